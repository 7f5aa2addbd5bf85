"""``nli.finetune`` is a :class:`~thinkalike.models.finetune.FinetuneConfig`; its two seeds are the pipeline's, per
copy (``copy_seeds`` of ``nli.seed``), and refused when the section gives them."""

import pytest

from thinkalike.pipelines.errors import ParameterError
from thinkalike.pipelines.nli.schema import validate_nli


def test_nli_finetune_is_typed_and_its_seeds_are_the_copies():
    nli = validate_nli({"finetune": {"steps": 40, "warmup_steps": 4}})
    config = nli.finetune_config((11, 12))
    assert (config.steps, config.warmup_steps, config.head_seed, config.data_seed) == (40, 4, 11, 12)
    with pytest.raises(ParameterError, match=r"nli.finetune.head_seed: the copies' seeds come from nli.seed"):
        validate_nli({"finetune": {"head_seed": 3}})
    with pytest.raises(ParameterError, match=r"nli.finetune.stepz: unknown parameter"):
        validate_nli({"finetune": {"stepz": 3}})
