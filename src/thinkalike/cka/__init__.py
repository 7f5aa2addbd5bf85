"""CKA between two models' activations as a method (Kornblith et al. 2019; Brown et al. 2023), no Kedro:
:mod:`~thinkalike.cka.settings` (how it is estimated), :mod:`~thinkalike.cka.compute` (the long table of a pair
and its summaries, from the accumulators of :mod:`thinkalike.measures.cka`), :mod:`~thinkalike.cka.figures`
(heatmaps, group curves, the distance matrix); the Kedro wiring is :mod:`thinkalike.pipelines.cka`.
"""
