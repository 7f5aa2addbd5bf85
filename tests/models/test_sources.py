"""Model specs, their cheap checks, and the single loader (hf local dirs, zoo, GGUF) with the hub offline."""

from __future__ import annotations

import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

from thinkalike.models.architectures import build_zoo_module, hf_zoo_config, zoo_logits  # noqa: E402
from thinkalike.models.handle import ModelSourceError, UnsupportedArchitectureError  # noqa: E402
from thinkalike.models.hf import HFModelHandle  # noqa: E402
from thinkalike.models.sources import check_model_spec, load_model, parse_model_spec, spec_options  # noqa: E402


@pytest.fixture(autouse=True)
def _hub_offline(monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


# ---------------------------------------------------------------------- parsing
@pytest.mark.parametrize(
    "spec, expected",
    [
        ("zoo:gelu-2l", ("zoo", "gelu-2l")),
        ("hf:EleutherAI/pythia-70m", ("hf", "EleutherAI/pythia-70m")),
        ("hf:EleutherAI/pythia-70m?revision=step1000", ("hf", "EleutherAI/pythia-70m")),
        ("hf:/data/models/my-model", ("hf", "/data/models/my-model")),
        ("gguf:/models/tiny.gguf", ("gguf", "/models/tiny.gguf")),
        ("gguf:/models::tiny.gguf", ("gguf", "/models::tiny.gguf")),
        ("tl:gelu-2l?weights=/w/model.safetensors", ("tl", "gelu-2l")),
    ],
)
def test_parse_model_spec(spec, expected):
    assert parse_model_spec(spec) == expected


def test_spec_options():
    assert spec_options("hf:org/m?revision=step1&trust_remote_code=true") == {
        "revision": "step1",
        "trust_remote_code": "true",
    }
    assert spec_options("zoo:x") == {}


@pytest.mark.parametrize(
    "spec", ["foo:x", "no-colon", "hf:", "zoo:x?revision=1", "hf:org/m?weights=/x", "hf:org/m?novalue"]
)
def test_bad_specs_are_named(spec):
    with pytest.raises(ModelSourceError) as info:
        parse_model_spec(spec)
    assert spec in str(info.value)
    with pytest.raises(ModelSourceError):
        check_model_spec(spec)


# ---------------------------------------------------------------------- cheap checks
def test_check_accepts_good_specs(tiny_checkpoints, tiny_llama_gguf):
    check_model_spec(f"hf:{tiny_checkpoints['gpt2']}")
    path, _ = tiny_llama_gguf
    check_model_spec(f"gguf:{path}")
    check_model_spec(f"gguf:{path.parent}::{path.name}")
    check_model_spec("zoo:a", zoo_names=["a", "b"])
    check_model_spec("zoo:anything")  # names unknown: not checked
    check_model_spec("tl:gelu-2l")


def _raises(spec, match, exc=ModelSourceError, **kwargs):
    with pytest.raises(exc, match=match) as info:
        check_model_spec(spec, **kwargs)
    assert spec in str(info.value)


def test_check_errors(tmp_path):
    _raises(f"hf:{tmp_path / 'missing'}", "no such directory")
    _raises("hf:./not/here/either", "no such directory")
    (tmp_path / "empty").mkdir()
    _raises(f"hf:{tmp_path / 'empty'}", "no config.json")
    _raises("zoo:nope", "unknown zoo model", zoo_names=["a"])
    _raises(f"gguf:{tmp_path / 'x.gguf'}", "no such GGUF file")
    (tmp_path / "bad.gguf").write_bytes(b"not a gguf file at all")
    _raises(f"gguf:{tmp_path / 'bad.gguf'}", "not a readable GGUF")
    _raises(f"tl:gelu-2l?weights={tmp_path / 'w.safetensors'}", "no such weights path")


def test_hub_id_offline_and_not_cached_is_a_clear_error():
    _raises("hf:thinkalike-tests/definitely-not-cached-model", "not in the local Hugging Face cache")
    with pytest.raises(ModelSourceError, match="offline"):
        load_model("hf:thinkalike-tests/definitely-not-cached-model")
    _raises("gguf:thinkalike-tests/not-cached::m.gguf", "not in the local cache")


def _custom_code_dir(tmp_path, auto_map: bool):
    d = tmp_path / ("custom" if auto_map else "unknown")
    d.mkdir()
    config = {"model_type": "thinkalike_custom_lm", "architectures": ["CustomLM"]}
    if auto_map:
        config["auto_map"] = {
            "AutoConfig": "modeling_custom.CustomConfig",
            "AutoModelForCausalLM": "modeling_custom.CustomLM",
        }
    (d / "config.json").write_text(json.dumps(config))
    (d / "model.safetensors").write_bytes(b"")
    return d


def test_remote_code_is_refused_unless_requested(tmp_path):
    d = _custom_code_dir(tmp_path, auto_map=True)
    _raises(f"hf:{d}", "trust_remote_code")
    with pytest.raises(ModelSourceError, match="trust_remote_code"):
        load_model(f"hf:{d}")
    check_model_spec(f"hf:{d}?trust_remote_code=true")  # cheap check passes once asked for
    check_model_spec(f"hf:{d}", trust_remote_code=True)
    _raises(
        f"hf:{_custom_code_dir(tmp_path, auto_map=False)}", "does not know model_type", exc=UnsupportedArchitectureError
    )


# ---------------------------------------------------------------------- loading
@pytest.mark.parametrize("mt", ["gpt2", "gpt_neox", "bert", "llama", "mamba"])
def test_hf_local_directory_round_trip(loaded_handles, build_tiny, batch, mt):
    handle = loaded_handles[mt]
    ids, mask = batch
    assert isinstance(handle, HFModelHandle) and handle.name == f"tiny-{mt}"
    assert handle.spec.startswith("hf:") and handle.device.type == "cpu"
    assert not handle.module.training
    assert handle.tokenizer is not None and handle.tokenizer("w1 w2")["input_ids"] == [6, 7]
    with torch.no_grad():
        expected = build_tiny(mt)(input_ids=ids, attention_mask=mask).logits
        got = handle.module(input_ids=ids, attention_mask=mask).logits
    torch.testing.assert_close(got, expected)


def test_default_device_is_cuda_when_available(tiny_checkpoints, batch):
    handle = load_model(f"hf:{tiny_checkpoints['gpt_neox']}")
    assert handle.device.type == ("cuda" if torch.cuda.is_available() else "cpu")
    ids, mask = (t.to(handle.device) for t in batch)
    with torch.no_grad():
        res = handle.residual_streams(ids, mask)
        logits = handle.logits_from_layer(res[1], 1, ids, mask)
        torch.testing.assert_close(
            logits, handle.module(input_ids=ids, attention_mask=mask).logits, rtol=1e-4, atol=1e-4
        )
    assert res.device.type == handle.device.type


def test_load_model_dtype_and_explicit_tokenizer(tiny_checkpoints):
    handle = load_model(f"hf:{tiny_checkpoints['gpt2']}", dtype="float64", device="cpu", tokenizer="given")
    assert (
        handle.dtype == torch.float64 and handle.tokenizer == "given" and handle.name == str(tiny_checkpoints["gpt2"])
    )
    with pytest.raises(ModelSourceError, match="unknown dtype"):
        load_model(f"hf:{tiny_checkpoints['gpt2']}", dtype="float17")


def test_missing_tokenizer_is_named(tmp_path, build_tiny):
    build_tiny("gpt2").save_pretrained(tmp_path / "m", safe_serialization=True)
    with pytest.raises(ModelSourceError, match="tokenizer"):
        load_model(f"hf:{tmp_path / 'm'}", device="cpu")
    assert load_model(f"hf:{tmp_path / 'm'}", device="cpu", tokenizer="t").tokenizer == "t"


def test_zoo_round_trip_and_errors(batch):
    config = hf_zoo_config(
        "neox-zoo",
        "gpt_neox",
        "causal",
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=32,
    )
    config = json.loads(json.dumps(config))  # zoo configs are JSON
    trained = build_zoo_module(config, seed=7).eval()
    state = {k: v.clone() for k, v in trained.state_dict().items()}
    handle = load_model("zoo:neox-zoo", zoo_artifacts={"neox-zoo": (config, state)}, device="cpu")
    assert isinstance(handle, HFModelHandle) and handle.name == "neox-zoo" and handle.is_causal
    ids, mask = batch
    with torch.no_grad():
        torch.testing.assert_close(
            handle.module(input_ids=ids, attention_mask=mask).logits, zoo_logits(trained, config, ids, mask)
        )
    masked = hf_zoo_config(
        "bert-zoo",
        "bert",
        "masked",
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=48,
        max_position_embeddings=32,
    )
    bert = load_model(
        "zoo:bert-zoo",
        device="cpu",
        zoo_artifacts={"bert-zoo": (masked, build_zoo_module(masked, seed=1).state_dict())},
    )
    assert not bert.is_causal
    with pytest.raises(ModelSourceError, match="unknown zoo model") as info:
        load_model("zoo:other", zoo_artifacts={"neox-zoo": (config, state)})
    assert "zoo:other" in str(info.value)
    bad_state = dict(state)
    bad_state.pop(next(iter(bad_state)))
    with pytest.raises(ModelSourceError, match="zoo:neox-zoo"):
        load_model("zoo:neox-zoo", zoo_artifacts={"neox-zoo": (config, bad_state)})
    bad_config = dict(config, hf_config=dict(config["hf_config"], model_type="no_such_type"))
    with pytest.raises(ModelSourceError, match="no_such_type"):
        load_model("zoo:neox-zoo", zoo_artifacts={"neox-zoo": (bad_config, state)})


def test_build_zoo_module_is_seeded_and_validates():
    config = hf_zoo_config("g", "gpt2", "causal", vocab_size=50, n_embd=16, n_layer=1, n_head=2, n_positions=16)
    assert config["hf_config"]["architectures"] == ["GPT2LMHeadModel"]
    state = torch.get_rng_state()
    a, b = build_zoo_module(config, seed=3), build_zoo_module(config, seed=3)
    assert torch.equal(torch.get_rng_state(), state)  # the global RNG is left alone
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert ka == kb and torch.equal(va, vb)
    with pytest.raises(ModelSourceError, match="unknown family"):
        build_zoo_module({"name": "x", "family": "keras"})
    with pytest.raises(ModelSourceError, match="objective"):
        build_zoo_module(dict(config, objective="seq2seq"))
    with pytest.raises(ModelSourceError, match="unknown transformers model_type"):
        hf_zoo_config("x", "no_such_type", "causal")


@pytest.mark.parametrize(
    ("model_type", "objective"),
    [("gpt_neox", "causal"), ("llama", "causal"), ("mamba", "causal"), ("gpt2", "causal"), ("bert", "masked")],
)
def test_a_zoo_config_names_the_class_the_auto_model_builds(model_type, objective):
    """The architecture recorded in a zoo config is the class ``AutoModelFor…`` resolves the config to."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM

    auto = AutoModelForCausalLM if objective == "causal" else AutoModelForMaskedLM
    config = hf_zoo_config("m", model_type, objective)
    assert config["hf_config"]["architectures"] == [
        auto._model_mapping[type(AutoConfig.for_model(model_type))].__name__
    ]
    with pytest.raises(ModelSourceError, match=f"no {objective} LM class"):
        hf_zoo_config("m", "vit" if objective == "causal" else "mamba", objective)  # vision, state space


def test_checking_a_zoo_config_imports_no_modeling_code():
    """Building a zoo config (what the parameter check does for every hf zoo model before a run) leaves the
    architecture's modeling module unimported: importing it (and transformers' model-loading code) took 1.8 s of a
    run's start."""
    import subprocess
    import sys

    probe = (
        "import sys; from thinkalike.models.architectures import hf_zoo_config; "
        "hf_zoo_config('m', 'gpt_neox', 'causal', hidden_size=32, num_hidden_layers=2, num_attention_heads=2); "
        "print('transformers.models.gpt_neox.modeling_gpt_neox' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False"


def test_gguf_llama_round_trip(tiny_llama_gguf, batch):
    path, source = tiny_llama_gguf
    ids, mask = batch
    with torch.no_grad():
        expected = source(input_ids=ids, attention_mask=mask).logits
    for spec in (f"gguf:{path}", f"gguf:{path.parent}::{path.name}"):
        handle = load_model(spec, name="tiny-gguf", device="cpu")
        assert isinstance(handle, HFModelHandle) and handle.spec == spec
        assert handle.dims.n_heads == 4 and handle.module.config.num_key_value_heads == 2
        with torch.no_grad():
            torch.testing.assert_close(
                handle.module(input_ids=ids, attention_mask=mask).logits, expected, rtol=1e-5, atol=1e-5
            )
        # the vocabulary stored in the GGUF metadata became a tokenizer
        assert handle.tokenizer.convert_ids_to_tokens([1, 4]) == ["<s>", "a"]
        assert handle.tokenizer("ab")["input_ids"][0] == 1  # BOS added, as llama.cpp does


def test_hub_id_from_the_local_cache_offline(tiny_checkpoints, monkeypatch, tmp_path, batch):
    """A hub id already in the cache loads with HF_HUB_OFFLINE=1 (a hand-made cache with one snapshot)."""
    import shutil

    import huggingface_hub.constants

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--thinkalike-tests--tiny-llama"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    shutil.copytree(tiny_checkpoints["llama"], repo / "snapshots" / commit)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    spec = "hf:thinkalike-tests/tiny-llama"
    check_model_spec(spec)
    handle = load_model(spec, device="cpu")
    assert handle.name == "thinkalike-tests/tiny-llama" and handle.tokenizer is not None
    reference = load_model(f"hf:{tiny_checkpoints['llama']}", device="cpu", tokenizer="t")
    ids, mask = batch
    with torch.no_grad():
        torch.testing.assert_close(
            handle.module(input_ids=ids, attention_mask=mask).logits,
            reference.module(input_ids=ids, attention_mask=mask).logits,
        )
    _raises("hf:thinkalike-tests/tiny-llama?revision=other-branch", "not in the local Hugging Face cache")


def test_tl_source_takes_the_tokenizer_beside_its_weights(tiny_checkpoints):
    from transformers import AutoTokenizer

    from thinkalike.models.sources import load_model

    directory = tiny_checkpoints["gpt2"]
    handle = load_model(f"tl:GPT2LMHeadModel?weights={directory}", device="cpu")
    assert handle.tokenizer is not None
    assert handle.tokenizer.get_vocab() == AutoTokenizer.from_pretrained(directory).get_vocab()


def _bridge_zoo_config(seed: int) -> dict:
    bridge = {
        "n_layers": 1,
        "d_model": 16,
        "n_heads": 2,
        "d_head": 8,
        "d_mlp": 32,
        "act_fn": "gelu",
        "attention_dir": "causal",
        "d_vocab": 50,
        "n_ctx": 16,
        "seed": seed,
    }
    return {"name": "zoo-b", "family": "bridge", "objective": "causal", "seed": seed, "bridge_config": bridge}


def _hf_zoo_config(seed: int) -> dict:
    config = hf_zoo_config(
        "zoo-b",
        "gpt_neox",
        "causal",
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
    )
    return {**json.loads(json.dumps(config)), "seed": seed}


@pytest.mark.parametrize("make_config", [_bridge_zoo_config, _hf_zoo_config], ids=["bridge", "hf"])
def test_a_zoo_initialisation_is_the_point_training_starts_from(make_config):
    """``zoo:<m>?weights=initial`` rebuilds the weights training starts from: training with a learning rate of 1e-30
    (AdamW then moves a weight by about 1e-30: nothing, but a zero bias) ends there; with a real learning rate it
    ends elsewhere, and the initialisation does not read the saved weights."""
    from thinkalike.models.sources import is_initialisation, zoo_target
    from thinkalike.models.training import TrainingConfig
    from thinkalike.models.zoo import train_zoo_model

    config = make_config(3)
    rows = torch.randint(0, 50, (8, 16), generator=torch.Generator().manual_seed(0)).numpy()

    def trained(learning_rate: float) -> dict[str, torch.Tensor]:
        settings = TrainingConfig(
            steps=2, batch_size=4, learning_rate=learning_rate, warmup_steps=0, eval_every=1, eval_batches=1, seed=3
        )
        module, _ = train_zoo_model(config, settings, rows, rows, None, torch.device("cpu"))
        return module.state_dict()

    unmoved, moved = trained(1e-30), trained(1e-2)
    initial = load_model("zoo:zoo-b?weights=initial", zoo_artifacts={"zoo-b": (config, moved)}, device="cpu")
    weights = initial.module.state_dict()
    assert weights.keys() == unmoved.keys()
    for key, value in unmoved.items():
        torch.testing.assert_close(weights[key], value, rtol=0, atol=1e-25, msg=key)
    assert any(not torch.equal(moved[key], unmoved[key]) for key in unmoved)
    saved = load_model("zoo:zoo-b", zoo_artifacts={"zoo-b": (config, moved)}, device="cpu").module.state_dict()
    assert all(torch.equal(saved[key], moved[key]) for key in moved)
    assert initial.spec == "zoo:zoo-b?weights=initial" and is_initialisation(initial.spec)
    assert not is_initialisation("zoo:zoo-b") and not is_initialisation("hf:org/m")
    assert zoo_target("zoo:zoo-b?weights=initial") == "zoo-b" and zoo_target("hf:org/m") is None


def test_a_bad_zoo_weights_option_and_a_seedless_config_are_named():
    check_model_spec("zoo:a?weights=initial", zoo_names=["a"])
    _raises("zoo:a?weights=final", "weights='final'", zoo_names=["a"])
    config = _hf_zoo_config(1)
    config.pop("seed")
    with pytest.raises(ModelSourceError, match="no integer seed") as info:
        load_model("zoo:zoo-b?weights=initial", zoo_artifacts={"zoo-b": (config, {})}, device="cpu")
    assert "zoo:zoo-b?weights=initial" in str(info.value)
