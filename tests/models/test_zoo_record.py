"""One record of a zoo model's facts (thinkalike.models.zoo_record), from its zoo entry or its saved config, and the
rules that compare records: seed families and GPT-NeoX twins."""

from __future__ import annotations

from thinkalike.models.zoo_record import neox_twins, seed_families, zoo_model, zoo_models


def _bridge(seed: int, n_layers: int = 2, act_fn: str = "gelu", **training: int) -> dict:
    architecture = {"n_layers": n_layers, "d_model": 64, "n_heads": 4, "d_head": 16, "d_mlp": 256, "act_fn": act_fn}
    return {"family": "bridge", "seed": seed, "architecture": architecture, "training": training}


def _neox(heads: int, width: int = 80, seed: int = 0, mlp: int = 320) -> dict:
    architecture = {"model_type": "gpt_neox", "hidden_size": width, "num_hidden_layers": 6}
    return {
        "family": "hf",
        "seed": seed,
        "architecture": {**architecture, "num_attention_heads": heads, "intermediate_size": mlp},
    }


def test_an_entry_and_its_saved_config_give_the_same_facts():
    entry = zoo_model("solu", _bridge(3, act_fn="solu_ln"))
    saved = zoo_model(
        "solu",
        {
            "name": "solu",
            "family": "bridge",
            "objective": "causal",
            "seed": 3,
            "bridge_config": {**_bridge(3, act_fn="solu_ln")["architecture"], "seed": 3},
        },
    )
    assert (entry.kind, entry.objective, entry.seed, entry.depth, entry.width, entry.heads, entry.head_dim) == (
        "solu",
        "causal",
        3,
        2,
        64,
        4,
        16,
    )
    assert (saved.kind, saved.seed, saved.depth, saved.head_dim) == (entry.kind, entry.seed, entry.depth, 16)
    encoder = zoo_model("enc", {**_bridge(0), "objective": "masked"})
    neox = zoo_model("n", _neox(2))
    assert (encoder.kind, neox.kind, neox.depth, neox.head_dim) == ("encoder", "gpt_neox", 6, 40)
    assert zoo_model("none", None).depth is None


def test_seed_families_are_models_identical_but_for_their_seed():
    models = zoo_models(
        {
            "a": _bridge(0),
            "b": _bridge(1),
            "deeper": _bridge(2, n_layers=3),
            "c": _bridge(2),
            "longer": _bridge(3, steps=10),  # trained otherwise: no replica
        }
    )
    assert [[m.name for m in group] for group in seed_families(list(models.values()))] == [["a", "b", "c"]]


def test_neox_twins_differ_only_in_their_heads_and_the_twin_is_on_trend():
    models = zoo_models(
        {
            "s": _neox(2, width=32),
            "m": _neox(3, width=48),
            "odd": _neox(2),  # head dimension 40
            "twin": _neox(5),  # 16, the family's trend
            "other_seed": _neox(5, seed=1),
            "other_mlp": _neox(5, mlp=64),
        }
    )
    assert neox_twins(list(models.values())) == {"odd": "twin"}
    assert neox_twins([]) == {}
