"""Generalizing vs heuristic NLI copies (Brown et al. 2023 §4; McCoy et al. 2020), the maths and the report, no
Kedro: :mod:`~thinkalike.nli.analysis` (groups by OOD accuracy, identity stitching between copies and its
aggregation by group relation, CKA between copies) and :mod:`~thinkalike.nli.report` (the sentences computed
from the tables, the markdown report, the figures). The pairs and the encoder's data are
:mod:`thinkalike.language.nli`; fine-tuning is :mod:`thinkalike.models.finetune`; the Kedro wiring is
:mod:`thinkalike.pipelines.nli`.
"""
