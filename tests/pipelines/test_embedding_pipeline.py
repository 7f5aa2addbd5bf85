"""The embedding pipeline on the tiny project (conf/test: gelu_1l and neox_xs, one corpus tokenizer): readings,
keep-k, alignment, fine-tune diffs and zero-shot stitching; bad configuration fails before any node."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

from tests.pipelines.conftest import PROJECT_ROOT, make_project_copy, run_project
from thinkalike.embedding.overlap import OVERLAP_COLUMNS, PAIRS, auto_k
from thinkalike.embedding.token_structure import DEFAULT_GROUPS, STRUCTURE_COLUMNS
from thinkalike.pipelines.embedding import nodes
from thinkalike.pipelines.embedding.schema import EmbeddingParameters
from thinkalike.pipelines.parameters import configured_parameters
from thinkalike.pipelines.schema import ParameterError, validate_section

MODELS = ("gelu_1l", "neox_xs")
N_LAYERS = {"gelu_1l": 1, "neox_xs": 2}  # conf/test/parameters_zoo.yml


@pytest.fixture(scope="module")
def embedded(tiny_project):
    """The catalog after running the ``embedding`` pipeline on the tiny project."""
    project, _ = tiny_project
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.chdir(project)
        return project, run_project(project, pipeline_names=["embedding"])


def test_readings_and_report(embedded):
    _, catalog = embedded
    for model in MODELS:
        vectors = catalog.load(f"models.embedding.{model}.embedding_vectors")
        assert set(vectors["group"]) == {"FF_key", "FF_value"} and set(vectors["sign"]) == {"+", "-"}
        assert (vectors.groupby(["layer", "group", "neuron", "sign"]).size() == 5).all()  # readings.k
        pairs = catalog.load(f"models.embedding.{model}.embedding_head_pairs")
        assert set(pairs["group"]) == {"W_VO", "W_QK"} and (pairs.groupby(["layer", "head", "group"]).size() == 5).all()
        lookup = catalog.load(f"models.embedding.{model}.embedding_lookup")
        assert len(lookup) == 3 and set(lookup["token_set"]) == {"past_tense"}
        report = catalog.load(f"models.embedding.{model}.embedding_report")
        assert report.startswith(f"# {model}") and "## Attention heads" in report and "Knowledge lookup" in report
        # the summary gathers every model's tables (so kedro-viz draws them inside the model's box)
        for gathered, own in (
            ("embedding_readings", vectors),
            ("embedding_head_interactions", pairs),
            ("embedding_lookups", lookup),
        ):
            rows = catalog.load(gathered).query("model == @model").reset_index(drop=True)
            pd.testing.assert_frame_equal(rows, own.reset_index(drop=True), check_dtype=False)
        assert report in catalog.load("embedding_reports")


def test_key_value_overlap(embedded):
    """Per model, one row per block and pair kind (appendix B, fig. 6), k = auto (the corpus tokenizer's V / 20),
    ``overlap.n_random`` derangements (default 10); finite Jaccard means; the summary gathers them."""
    _, catalog = embedded
    vocabulary = len(catalog.load("tokenizer"))
    gathered = catalog.load("embedding_key_value_overlap")
    for model in MODELS:
        table = catalog.load(f"models.embedding.{model}.key_value_overlap")
        assert list(table.columns) == OVERLAP_COLUMNS and set(table["model"]) == {model}
        assert sorted(table["layer"].unique()) == list(range(N_LAYERS[model]))
        assert (table.groupby("layer")["pair"].apply(set) == set(PAIRS)).all()
        assert (
            set(table["k"]) == {auto_k(vocabulary)} and set(table["n_random"]) == {10} and (table["n_pairs"] > 1).all()
        )
        values = table[["matched_mean", "random_mean", "random_sd", "difference", "ratio"]].to_numpy(dtype=float)
        assert np.isfinite(values).all()
        assert table["matched_mean"].between(0, 1).all() and table["random_mean"].between(0, 1).all()
        np.testing.assert_allclose(table["difference"], table["matched_mean"] - table["random_mean"])
        rows = gathered.query("model == @model").reset_index(drop=True)
        pd.testing.assert_frame_equal(rows, table.reset_index(drop=True), check_dtype=False)


def test_token_structure(embedded):
    """Per model, one row per block and default vector group (§3 measured), k = auto; finite coherence means and
    baselines in [0, 1], the differences consistent; the summary gathers them."""
    _, catalog = embedded
    vocabulary = len(catalog.load("tokenizer"))
    gathered = catalog.load("embedding_token_structure")
    assert list(gathered.columns) == STRUCTURE_COLUMNS and set(gathered["model"]) == set(MODELS)
    for model in MODELS:
        table = catalog.load(f"models.embedding.{model}.token_structure")
        assert list(table.columns) == STRUCTURE_COLUMNS and set(table["model"]) == {model}
        assert sorted(table["layer"].unique()) == list(range(N_LAYERS[model]))
        assert all(list(part["group"]) == list(DEFAULT_GROUPS) for _, part in table.groupby("layer"))
        assert set(table["k"]) == {auto_k(vocabulary)} and (table["n_vectors"] > 0).all()
        numbers = table[STRUCTURE_COLUMNS[3:]].to_numpy(dtype=float)
        assert np.isfinite(numbers).all(), table
        for column in ("coherence_mean", "chance", "random_vector_mean", "labelled_fraction", "labelled_chance"):
            assert table[column].between(0, 1).all(), column
        assert table["chance"].nunique() == 1 and 0 < table["chance"].iloc[0] < 1
        np.testing.assert_allclose(table["difference"], table["coherence_mean"] - table["chance"])
        np.testing.assert_allclose(
            table["difference_random_vectors"], table["coherence_mean"] - table["random_vector_mean"]
        )
        rows = gathered.query("model == @model").reset_index(drop=True)
        pd.testing.assert_frame_equal(rows, table.reset_index(drop=True), check_dtype=False)


def test_token_structure_of_a_hub_model_is_empty_and_says_why():
    """A model with its own tokenizer (a hub spec): no grammar part of speech, so an empty table and a log line; the
    model is not even loaded."""
    settings = validate_section(EmbeddingParameters, {}, "embedding")
    logger, lines = logging.getLogger(nodes.__name__), _Lines()
    level = logger.level
    logger.addHandler(lines)
    logger.setLevel(logging.INFO)
    try:
        (table,) = nodes.token_structure(settings=settings, model="gpt2", spec="hf:gpt2-that-is-not-here")
    finally:
        logger.removeHandler(lines)
        logger.setLevel(level)
    assert table.empty and list(table.columns) == STRUCTURE_COLUMNS
    assert any("embedding token structure gpt2" in line and "empty table" in line for line in lines.lines)


def test_keep_k_grid_and_bounds(embedded):
    _, catalog = embedded
    scores = catalog.load("embedding_keep_k")
    assert set(scores["model"]) == set(MODELS)
    per_model = scores.groupby("model").size()
    assert (per_model == 3 * 2 * 2 * 2).all()  # distributions × variants × E′ × k
    assert set(scores["k"]) == {10, 50} and scores["score"].between(-1, 1).all()
    assert (scores["condition_number"] > 1).all()


def test_alignment_of_a_model_with_itself_is_the_identity(embedded):
    project, catalog = embedded
    matches = catalog.load("embedding_alignment")
    own = matches[matches["model_a"] == matches["model_b"]]
    assert len(own) == 2 * 6 * 2 and (own["diagonal_fraction"] == 1.0).all()
    similarity = catalog.load("models.embedding.neox_xs__neox_xs.alignment_similarity")
    for _, part in similarity.groupby(["group", "space"]):
        matrix = part.pivot(index="layer_a", columns="layer_b", values="similarity").to_numpy()
        np.testing.assert_allclose(matrix, matrix.T, atol=1e-9)  # a model with itself: symmetric
        assert ((matrix > 0) & (matrix <= 1)).all()
    cross = catalog.load("models.embedding.gelu_1l__neox_xs.alignment_matches")
    assert set(cross["space"]) == {"projected", "raw"} and (cross["n_layers_a"] == 1).all()
    folder = max((project / "data" / "08_reporting").glob("embedding_alignment_figures/*/embedding_alignment_figures"))
    assert "gelu_1l__neox_xs.png" in {path.name for path in folder.iterdir()}
    gathered = catalog.load("embedding_alignment_similarity")
    own_rows = gathered[(gathered["model_a"] == "neox_xs") & (gathered["model_b"] == "neox_xs")]
    assert len(own_rows) == len(similarity) and set(gathered["model_a"]) == set(MODELS)


def test_finetune_fractions_and_zero_shot(embedded):
    project, catalog = embedded
    fractions = catalog.load("embedding_feature_fractions")
    assert {"finetune_diff", "random_rows", "classifier"} <= set(fractions["source"])
    assert fractions["feature_fraction"].between(0, 1).all() and (fractions["layer"].isin([0, -1])).all()
    zero_shot = catalog.load("embedding_zero_shot")
    self_pair = zero_shot[zero_shot["model_b"] == "gelu_1l"]
    # B = A's base, E_A full row rank: with 0 layers of B kept (the frozen embeddings) A's own accuracy exactly
    assert self_pair.set_index("layers_from_b").loc[0, "accuracy"] == pytest.approx(self_pair["own_accuracy"].iloc[0])
    assert set(zero_shot["layers_from_b"]) == {0, 1} and zero_shot["chance"].between(0.5, 1).all()
    figure = project / "data" / "08_reporting"
    assert list(figure.glob("embedding_zero_shot.png/*/embedding_zero_shot.png"))
    from PIL import Image

    with Image.open(next(figure.glob("embedding_keep_k_figures/*/embedding_keep_k_figures/gelu_1l.png"))) as image:
        assert image.width >= 1000
    curves = catalog.load("embedding_finetune_curves")
    assert set(curves["model"]) == {"gelu_1l"} and len(curves)
    assert set(catalog.load("embedding_finetune_top_tokens")["model"]) == {"gelu_1l"}


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"readings": {"e_prime": "inverse"}}, r"embedding\.readings\.e_prime"),
        ({"readings": {"k": 100000}}, r"embedding\.readings\.k: k=100000 exceeds the zoo's vocabulary size"),
        ({"overlap": {"k": 100000}}, r"embedding\.overlap\.k: k=100000 exceeds the zoo's vocabulary size"),
        ({"overlap": {"n_random": 0}}, r"embedding\.overlap\.n_random"),
        (
            {"token_structure": {"k": 100000}},
            r"embedding\.token_structure\.k: k=100000 exceeds the zoo's vocabulary size",
        ),
        ({"token_structure": {"groups": []}}, r"embedding\.token_structure\.groups"),
        ({"finetune": {"models": ["neox_xs"]}}, r"embedding\.finetune\.models: 'neox_xs' is a 'hf'-family"),
        (
            {"zero_shot": {"pairs": [["neox_xs", "gelu_1l"]]}},
            r"embedding\.zero_shot\.pairs: 'neox_xs' is not a fine-tuned model",
        ),
    ],
)
def test_bad_configuration_fails_before_any_node(tmp_path, monkeypatch, override, message):
    project = make_project_copy(tmp_path)
    monkeypatch.chdir(project)
    with pytest.raises(ParameterError, match=message):
        run_project(project, pipeline_names=["embedding"], runtime_params={"embedding": override})
    assert not (project / "data").exists() or not any((project / "data").rglob("*.parquet"))


def test_different_tokenizers_are_named(tmp_path, monkeypatch, grammar_gpt2_dir):
    project = make_project_copy(tmp_path)
    monkeypatch.chdir(project)
    overrides = {
        "activations": {"models": {"gpt2_local": f"hf:{grammar_gpt2_dir}"}},
        "embedding": {"alignment": {"pairs": {"explicit": [["gelu_1l", "gpt2_local"]]}}},
    }
    with pytest.raises(
        ParameterError,
        match=r"embedding\.alignment\.pairs: model 'gelu_1l' \(zoo:gelu_1l\) and "
        r"model 'gpt2_local' .* use different tokenizers",
    ):
        run_project(project, pipeline_names=["embedding"], runtime_params=overrides)


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_readings_cover_the_selected_blocks_and_heads_only(grammar_gpt2_dir):
    """``readings.layers`` / ``heads`` narrow what a hub model's node reads (and say so); the rows read equal the
    same rows of the full reading."""
    embedding = configured_parameters(PROJECT_ROOT, "test")["embedding"]
    spec = f"hf:{grammar_gpt2_dir}"
    full = validate_section(
        EmbeddingParameters,
        {**embedding, "readings": {**embedding["readings"], "layers": None, "heads": None}},
        "embedding",
    )
    full_vectors, full_pairs, *_ = nodes.read_model(settings=full, model="gpt2", spec=spec)
    narrow = validate_section(
        EmbeddingParameters,
        {**embedding, "readings": {**embedding["readings"], "layers": [1], "heads": 2}},
        "embedding",
    )
    logger, lines = logging.getLogger(nodes.__name__), _Lines()  # Kedro's logging setup may replace root handlers
    level = logger.level
    logger.addHandler(lines)
    logger.setLevel(logging.INFO)
    try:
        vectors, pairs, *_ = nodes.read_model(settings=narrow, model="gpt2", spec=spec)
    finally:
        logger.removeHandler(lines)
        logger.setLevel(level)
    assert set(full_vectors["layer"]) == {0, 1} and set(full_pairs["head"]) == {0, 1, 2, 3}
    assert set(vectors["layer"]) == {1} and set(pairs["layer"]) == {1} and set(pairs["head"]) == {0, 1}
    pd.testing.assert_frame_equal(
        vectors.reset_index(drop=True), full_vectors[full_vectors["layer"] == 1].reset_index(drop=True)
    )
    same = full_pairs[(full_pairs["layer"] == 1) & full_pairs["head"].isin([0, 1])].reset_index(drop=True)
    pd.testing.assert_frame_equal(pairs.reset_index(drop=True), same)
    assert any("reading blocks [1] of 2 and heads [0, 1] of 4" in line for line in lines.lines)
