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


def test_training_seeds_are_the_models_own():
    """``zoo.training`` and ``nli.encoder.training`` are :class:`~thinkalike.models.training.TrainingConfig`; a seed
    given there would be overridden by the model's own (``zoo.models.<m>.seed``, ``nli.encoder.seed``), so it is
    refused, naming the key; a model's own training overrides the shared one, checked merged."""
    from thinkalike.pipelines.corpus.schema import validate_corpus
    from thinkalike.pipelines.zoo.schema import validate_zoo

    corpus = validate_corpus({})
    with pytest.raises(ParameterError, match=r"^zoo.training.seed: each model's seed is its own"):
        validate_zoo({"training": {"seed": 4}}, corpus)
    with pytest.raises(ParameterError, match=r"^nli.encoder.training.seed: the encoder's seed is nli.encoder.seed"):
        validate_nli({"encoder": {"training": {"seed": 4}}})
    zoo = {"training": {"steps": 20, "warmup_steps": 2}, "models": {"m": {"family": "bridge", "training": {"lr": 1}}}}
    with pytest.raises(ParameterError, match=r"zoo.models.m.training.lr: unknown parameter"):
        validate_zoo(zoo, corpus)
    zoo["models"]["m"]["training"] = {"warmup_steps": 30}  # ≥ the shared 20 steps: refused merged
    with pytest.raises(ParameterError, match=r"^zoo.models.m.training: warmup_steps must be in \[0, steps\)"):
        validate_zoo(zoo, corpus)
