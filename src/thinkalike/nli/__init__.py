"""Generalizing vs heuristic NLI copies (Brown et al. 2023 §4; McCoy et al. 2020), the maths, no Kedro:
:mod:`~thinkalike.nli.analysis` (groups by OOD accuracy, identity stitching between copies and its aggregation by
group relation, the token activations compared by CKA and their CKA tables), :mod:`~thinkalike.nli.verdicts` (the
verdicts and sentences computed from the tables, the markdown report) and :mod:`~thinkalike.nli.figures` (as the
scaling family's are :mod:`thinkalike.scaling`); the pairs and the encoder's data :mod:`thinkalike.language.nli`;
fine-tuning :mod:`thinkalike.models.finetune`; the Kedro wiring :mod:`thinkalike.pipelines.nli`.
"""
