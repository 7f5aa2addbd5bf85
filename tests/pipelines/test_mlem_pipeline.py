"""The mlem pipeline on the tiny project: per-model profiles, similarity tables, MDS, figures; bad config fails first."""

from __future__ import annotations

import numpy as np
import pytest

from tests.pipelines.conftest import make_project_copy, run_project
from thinkalike.mlem.fit import ALL_FOLDS, PROFILE_COLUMNS
from thinkalike.pipelines.run_settings import RunSettings
from thinkalike.pipelines.schema import ParameterError

MODELS = {"gelu_1l": 2, "neox_xs": 3}  # conf/test zoo models and their stored layers (embeddings + blocks)


@pytest.fixture(scope="module")
def fitted(tiny_project):
    """The catalog after running the ``mlem`` pipeline on the tiny project."""
    project, _ = tiny_project
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.chdir(project)
        return run_project(project, pipeline_names=["mlem"])


def test_every_model_and_layer_has_a_profile(fitted):
    profiles = fitted.load("mlem_profiles")
    assert list(profiles.columns[: len(PROFILE_COLUMNS)]) == PROFILE_COLUMNS
    for model, n_layers in MODELS.items():
        own = fitted.load(f"models.mlem.{model}.mlem_profile")
        assert sorted(own["layer"].unique()) == list(range(n_layers))
        assert set(own["fold"]) == {ALL_FOLDS, 0, 1, 2}  # conf/test: 3 folds
        assert own["spearman_heldout"].between(-1, 1).all() and own["weight"].ge(0).all()
        assert (own["ci_low"] <= own["importance"]).all() and (own["importance"] <= own["ci_high"]).all()
        assert own["activations_version"].notna().all() and (own["level"] == "word").all()
    overall = profiles[profiles["fold"] == ALL_FOLDS]
    assert set(overall["feature"]) <= {"pos", "word_role", "word_position", "number", "tense", "in_relative_clause"}
    assert overall.groupby(["model", "layer"])["spearman_heldout"].first().max() > 0.2  # some layer is fitted


@pytest.mark.parametrize("table", ["mlem_feature_similarity", "mlem_rsa_similarity"])
def test_similarity_tables_are_symmetric_with_unit_diagonal(fitted, table):
    long = fitted.load(table)
    n = sum(MODELS.values())
    assert len(long) == n * n
    matrix = long.pivot_table(index=["model_a", "layer_a"], columns=["model_b", "layer_b"], values="similarity")
    values = matrix.to_numpy()
    np.testing.assert_allclose(np.diag(values), 1.0, atol=1e-9)
    np.testing.assert_allclose(values, values.T, atol=1e-12)


def test_mds_has_every_layer_for_both_methods(fitted, tiny_project):
    project, _ = tiny_project
    mds = fitted.load("mlem_mds")
    assert set(mds["method"]) == {"feature", "rsa"}
    assert len(mds[mds["method"] == "rsa"]) == sum(MODELS.values())
    assert np.isfinite(mds[["x", "y"]].to_numpy()).all()
    reporting = project / "data" / "08_reporting"
    for name in ("mlem_similarity.png", "mlem_mds.png", "mlem_similarity.json", "mlem_mds.json"):
        assert list(reporting.glob(f"{name}/*/{name}")), name
    folder = max(reporting.glob("mlem_profile_figures/*/mlem_profile_figures"))  # drawn by the summary, one per model
    assert sorted(path.name for path in folder.iterdir()) == sorted(f"{model}.png" for model in MODELS)
    profiles = fitted.load("mlem_profile_figures_plotly")
    assert sorted(button.label for button in profiles.layout.updatemenus[0].buttons) == sorted(MODELS)


def test_unknown_feature_fails_before_any_node(tmp_path, monkeypatch):
    project = make_project_copy(tmp_path)
    monkeypatch.chdir(project)
    with pytest.raises(ParameterError, match=r"mlem\.features: unknown word-level feature\(s\) \['gender'\]"):
        run_project(project, runtime_params={"mlem": {"features": ["pos", "gender"]}})
    assert not (project / "data").exists() or not any((project / "data").rglob("*.parquet"))


def test_natural_text_replacing_the_grammar_leaves_mlem_empty(caplog):
    """With ``use: replace`` the evaluation texts carry no grammar labels: no MLEM node, and the log says why."""
    from thinkalike.pipelines.mlem.pipeline import create_pipeline

    parameters = {
        "mlem": {"level": "word"},
        "zoo": {"models": {"gelu_1l": {}}},
        "corpus": {"natural_text": {"path": "texts.txt", "use": "replace"}},
    }
    with caplog.at_level("WARNING"):
        assert not create_pipeline(RunSettings(parameters)).nodes
    assert "natural_text.use is 'replace'" in caplog.text
    joined = {**parameters, "corpus": {"natural_text": {"path": "texts.txt", "use": "join"}}}
    assert create_pipeline(RunSettings(joined)).nodes


def test_controlled_stimuli_and_chosen_layers_end_to_end(tiny_project, tmp_path, monkeypatch, caplog):
    """``corpus.controlled_stimuli`` adds the controlled set to the evaluation texts, every model extracts it, and
    ``mlem.stimuli: controlled`` fits it (at the ``mlem.layers`` chosen, indicator-coded), logging the cost first."""
    import shutil

    project, _ = tiny_project
    copy = tmp_path / "project"
    shutil.copytree(project, copy)  # the session's project stays as the other tests expect it
    monkeypatch.chdir(copy)
    parameters = {
        "corpus": {"controlled_stimuli": {"enabled": True, "verbs": 1}},
        "mlem": {"stimuli": "controlled", "layers": [1], "categorical_coding": "indicators"},
    }
    with caplog.at_level("DEBUG", logger="thinkalike.mlem.fit"):
        catalog = run_project(copy, pipeline_names=["corpus", "activations", "mlem"], runtime_params=parameters)
    texts = catalog.load("evaluation_texts")
    assert (texts["source"] == "controlled").sum() == 72 * 2 * 1 and texts["sentence_id"].is_unique
    controlled = set(texts.loc[texts["source"] == "controlled", "sentence_id"])
    for model in MODELS:
        assert set(catalog.load(f"models.{model}.activation_index")["sentence_id"]) >= controlled
        own = catalog.load(f"models.mlem.{model}.mlem_profile")
        assert set(own["layer"]) == {1} and (own["stimuli"] == "controlled").all()
        assert (own["categorical_coding"] == "indicators").all() and "pos" in set(own["feature"])  # one row a feature
        assert own["spearman_heldout"].between(-1, 1).all()
        assert f"MLEM {model}: 1 layer(s) x 3 folds x at most 60 steps" in caplog.text
    distances = catalog.load(f"models.mlem.{next(iter(MODELS))}.mlem_rsa_distances")
    assert set(distances["sentence_id_a"]) <= controlled
