"""CKA across a width/depth family of models (Brown et al. 2023 §5) as a method, no Kedro:
:mod:`~thinkalike.scaling.membership` (which models form the family and its twins), :mod:`~thinkalike.scaling.analysis`
(the analysis of the family's CKA tables), :mod:`~thinkalike.scaling.figures` (its figure); the Kedro wiring is
:mod:`thinkalike.pipelines.scaling`.
"""
