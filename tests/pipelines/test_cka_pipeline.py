"""The cka pipeline: config of pairs, and its outputs on the tiny project run."""

import json

import numpy as np
import pytest

from tests.reference_cka import ref_grid
from thinkalike.cka.compute import TABLE_COLUMNS
from thinkalike.cka.settings import CKASettings
from thinkalike.pipelines.cka.pairs import configured_pairs
from thinkalike.pipelines.run_settings import RunSettings

MODELS = ["a", "b", "c", "d"]


def test_pairs_combine_deduplicate_and_keep_order():
    pairs = configured_pairs(
        {
            "intra": True,
            "explicit": [["a", "b"], ["b", "a"]],
            "all_pairs_of": ["a", "b", "c"],
            "against": {"d": ["a", "d"]},
        },
        MODELS,
    )
    assert pairs == [("a", "a"), ("b", "b"), ("c", "c"), ("d", "d"), ("a", "b"), ("a", "c"), ("b", "c"), ("a", "d")]


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        ({}, "no model pair"),
        ({"explicit": [["a", "ghost"]]}, "ghost"),
        ({"explicit": [["a"]]}, r"^cka\.pairs\.explicit\.0: must be \[model_a, model_b\]"),
        ({"everything": True}, "unknown key"),
    ],
)
def test_bad_pair_config_is_named(pairs, message):
    with pytest.raises(ValueError, match=message):
        configured_pairs(pairs, MODELS)


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        ({"intra": "yes"}, r"^cka\.pairs\.intra: "),
        ({"explicit": [["a", "b", "c"]]}, r"^cka\.pairs\.explicit\.0: must be \[model_a, model_b\]"),
        ({"against": ["a"]}, r"^cka\.pairs\.against: "),
        ({"everything": True}, r"^cka\.pairs: unknown key\(s\) \['everything'\]; known: \['intra'"),
        ({"explicit": [["a", "ghost"]]}, r"^cka\.pairs: cka\.pairs names model\(s\) \['ghost'\]"),
    ],
)
def test_cka_pairs_are_parsed_with_the_section(pairs, message):
    """``cka.pairs`` is parsed once with the section (:class:`CKAPairs`), its errors naming the key."""
    from thinkalike.pipelines.cka.schema import validate_cka

    with pytest.raises(ValueError, match=message):
        validate_cka({"pairs": pairs}, dict.fromkeys(MODELS, "zoo:x"))


def test_parsed_pairs_are_the_pairs_of_the_syntax():
    from thinkalike.pipelines.cka.pairs import CKAPairs, cka_pairs
    from thinkalike.pipelines.cka.schema import parse_cka

    syntax = {"intra": True, "explicit": [["a", "b"]], "against": {"d": ["c"]}, "all_pairs_of": None}
    parsed = parse_cka({"pairs": syntax}).pairs
    assert isinstance(parsed, CKAPairs)
    assert cka_pairs(parsed, MODELS) == configured_pairs(syntax, MODELS)
    assert cka_pairs(parse_cka({"pairs": None}).pairs, ["a", "b"]) == [("a", "a"), ("b", "b"), ("a", "b")]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"estimator": "rbf"}, "cka.estimator"),
        ({"aggregation": "median"}, "cka.aggregation"),
        ({"batch_tokens": 3}, "at least 4"),
        ({"pooling": "char"}, "pooling"),
        ({"n_bootstrap": -1}, "n_bootstrap"),
        ({"confidence": 1.5}, "confidence"),
        ({"bath_tokens": 8}, "cka.bath_tokens: unknown parameter"),
        ({"skip_constant_layers": "no"}, "cka.skip_constant_layers"),
    ],
)
def test_bad_cka_settings_are_named(settings, message):
    from thinkalike.pipelines.cka.schema import parse_cka

    with pytest.raises(ValueError, match=message):
        parse_cka(settings)


def _tokens(store):
    return np.concatenate([batch.tokens() for batch in store], axis=1).astype(np.float64)


def test_pair_table_matches_an_independent_reference(tiny_project):
    _, catalog = tiny_project
    table = catalog.load("models.cka.gelu_1l__neox_xs.cka_table")
    assert list(table.columns) == [*TABLE_COLUMNS, "activations_version_a", "spec_a", "activations_version_b", "spec_b"]
    a, b = _tokens(catalog.load("models.gelu_1l.activations")), _tokens(catalog.load("models.neox_xs.activations"))
    if table["exclude_special_tokens"].iloc[0]:
        # rows are the tokens neither model's index marks special (bos, eos, pad, ...)
        special = (
            catalog.load("models.gelu_1l.activation_index")["is_special"].to_numpy()
            | catalog.load("models.neox_xs.activation_index")["is_special"].to_numpy()
        )
        assert special.any() and len(special) == a.shape[1]
        a, b = a[:, ~special], b[:, ~special]
    n = a.shape[1]
    batch = 64
    starts = list(range(0, n - n % batch, batch))
    bounds = [(s, s + batch) for s in starts[:-1]] + [(starts[-1], n)]  # the remainder joins the last batch
    expected = np.mean([ref_grid(a[:, lo:hi], b[:, lo:hi], "unbiased") for lo, hi in bounds], axis=0)
    matrix = table.pivot(index="layer_a", columns="layer_b", values="cka").to_numpy()
    np.testing.assert_allclose(matrix, expected, atol=1e-6)
    assert (table["n_batches"] == len(bounds)).all() and (table["n_tokens"] == n).all()
    assert (table["ci_low"] <= table["cka"] + 1e-12).all() and (table["cka"] <= table["ci_high"] + 1e-12).all()
    assert table["p_value"].between(1 / 11, 1).all()


def test_intra_model_diagonal_is_one_and_distance_zero(tiny_project):
    _, catalog = tiny_project
    table = catalog.load("models.cka.neox_xs__neox_xs.cka_table")
    diagonal = table[table["layer_a"] == table["layer_b"]]["cka"]
    np.testing.assert_allclose(diagonal, 1.0, atol=1e-9)
    distances = catalog.load("cka_distances").set_index(["model_a", "model_b"])
    assert distances.loc[("neox_xs", "neox_xs"), "arccos_distance"] == pytest.approx(0.0, abs=1e-4)
    assert distances.loc[("gelu_1l", "neox_xs"), "arccos_distance"] > 0.05
    groups = catalog.load("cka_group_distances")
    assert list(groups["kind"]) == ["between"]


PAIRS = ["gelu_1l__gelu_1l", "neox_xs__neox_xs", "gelu_1l__neox_xs"]  # conf/test/parameters_cka.yml, in its order


def test_figures_are_saved_and_logged_to_mlflow(tiny_project):
    project, catalog = tiny_project
    folder = max((project / "data/08_reporting/cka_heatmaps").glob("*/cka_heatmaps"))  # one PNG per pair, latest run
    assert sorted(path.name for path in folder.iterdir()) == sorted(f"{pair}.png" for pair in PAIRS)
    figure = catalog.load("cka_heatmaps_plotly")  # one heatmap per pair, one shown, picked in a dropdown
    assert [button.label for button in figure.layout.updatemenus[0].buttons] == PAIRS
    assert len(figure.data) == len(PAIRS) and [trace.visible for trace in figure.data] == [True, False, False]
    artifacts = {path.name for path in project.rglob("figures/*.png")}
    assert "zoo_training_curves_figure.png" in artifacts and "cka_distance_figure.png" in artifacts
    assert {path.name for path in project.rglob("figures/cka_heatmaps/*.png")} == {f"{pair}.png" for pair in PAIRS}


def test_a_dropdown_figure_shows_one_figure_at_a_time():
    import plotly.graph_objects as go

    from thinkalike.figures import dropdown_figure

    first = go.Figure([go.Heatmap(z=[[1, 2]]), go.Scatter(y=[1])], layout={"title": "first", "xaxis_title": "x1"})
    second = go.Figure([go.Heatmap(z=[[3]])], layout={"title": "second", "xaxis_title": "x2"})
    combined = dropdown_figure({"a": first, "b": second}, "pairs")
    assert [trace.visible for trace in combined.data] == [True, True, False]
    assert list(map(list, combined.data[2].z)) == [[3]] and combined.layout.title.text == "first"
    (menu,) = combined.layout.updatemenus
    assert [button.label for button in menu.buttons] == ["a", "b"]
    visible, layout = menu.buttons[1].args
    assert visible == {"visible": [False, False, True]}
    assert layout["title"]["text"] == "second" and layout["xaxis"]["title"]["text"] == "x2"
    assert dropdown_figure({}, "pairs").layout.title.text == "pairs: nothing to show"


def test_the_pythia_environment_builds_its_pipelines_without_the_hub():
    from tests.pipelines.conftest import PROJECT_ROOT
    from thinkalike.pipelines.activations.pipeline import (
        create_pipeline as activations_pipeline,
    )
    from thinkalike.pipelines.cka.pipeline import create_pipeline as cka_pipeline
    from thinkalike.pipelines.parameters import configured_parameters

    parameters = configured_parameters(PROJECT_ROOT, "pythia")
    activations = activations_pipeline(RunSettings(parameters))
    assert {node.namespace for node in activations.nodes} == {
        f"models.{name}"
        for name in (
            "pythia_70m",
            "pythia_160m",
            "pythia_410m",
            "pythia_1b",
            "pythia_1_4b",
            "pythia_2_8b",
            "pythia_6_9b",
        )
    }
    namespaces = {node.namespace for node in cka_pipeline(RunSettings(parameters)).nodes}
    assert "models.cka.pythia_70m__pythia_410m" in namespaces and "models.cka.pythia_410m__pythia_410m" in namespaces
    assert len([ns for ns in namespaces if ns.count("__")]) == 7 + 21  # each with itself, every pair (scaling)


def test_tables_report_counts_beside_every_mean(tiny_project):
    _, catalog = tiny_project
    table = catalog.load("models.cka.gelu_1l__neox_xs.cka_table")
    assert not table["skip_constant_layers"].any()
    distances = catalog.load("cka_distances")
    assert {"n_matched_layers", "n_finite_layers"} <= set(distances.columns)
    assert (distances["n_finite_layers"] == distances["n_matched_layers"]).all()
    assert distances.set_index(["model_a", "model_b"]).loc[("gelu_1l", "neox_xs"), "n_matched_layers"] == 2
    assert catalog.load("cka_group_distances")[["n", "n_finite"]].values.tolist() == [[1, 1]]


def test_saved_figures_are_paper_sized(tiny_project):
    from PIL import Image

    project, catalog = tiny_project
    for pattern in (
        "cka_heatmaps/*/cka_heatmaps/gelu_1l__neox_xs.png",
        "cka_distances.png/*/cka_distances.png",
        "cka_group_curves.png/*/cka_group_curves.png",
        "zoo_training_curves.png/*/zoo_training_curves.png",
    ):
        (path,) = (project / "data/08_reporting").glob(pattern)
        with Image.open(path) as image:
            assert image.size[0] >= 1000, path
    curves = catalog.load("cka_group_curves")
    assert ((curves["ci_low"].dropna() >= -1) & (curves["ci_high"].dropna() <= 1)).all()
    buttons = {button.label: button for button in catalog.load("cka_heatmaps_plotly").layout.updatemenus[0].buttons}
    axes = buttons["gelu_1l__neox_xs"].args[1]  # the pair's own axes, set when it is picked
    assert list(axes["xaxis"]["tickvals"]) == [0, 1, 2] and list(axes["yaxis"]["tickvals"]) == [0, 1]


def test_every_measure_of_every_layer_pair_on_the_cka_rows(tiny_project):
    """conf/test asks for every registered measure on 48 of the pair's rows: the table equals each measure computed
    here on the rows the CKA reference uses (special tokens out), drawn with the configured seed."""
    from thinkalike.measures.registry import MEASURE_NAMES, MEASURES, subsample_tokens

    project, catalog = tiny_project
    full = catalog.load("models.cka.gelu_1l__neox_xs.measures_table")
    table = full[full["variant"] == "configured"]
    parameters = catalog.load("params:cka")["measures"]
    assert parameters["names"] == "all" and list(dict.fromkeys(table["measure"])) == list(MEASURE_NAMES)
    a, b = _tokens(catalog.load("models.gelu_1l.activations")), _tokens(catalog.load("models.neox_xs.activations"))
    special = (
        catalog.load("models.gelu_1l.activation_index")["is_special"].to_numpy()
        | catalog.load("models.neox_xs.activation_index")["is_special"].to_numpy()
    )
    a, b = a[:, ~special], b[:, ~special]
    rows = subsample_tokens(a.shape[1], parameters["max_tokens"], parameters["seed"])
    assert (table["n_tokens"] == len(rows)).all() and (table["n_rows"] == a.shape[1]).all()
    options = {
        name: {
            **parameters["options"].get(name, {}),  # the CCA family fitted to the rows: n // 10 components
            **({"max_dims": len(rows) // 10} if MEASURES[name].rows_per_dimension else {}),
        }
        for name in MEASURE_NAMES
    }
    assert all(json.loads(row.options) == options[row.measure] for row in table.itertuples())
    for row in table.itertuples():
        expected = MEASURES[row.measure](a[row.layer_a, rows], b[row.layer_b, rows], **options[row.measure])
        assert row.value == pytest.approx(expected, rel=1e-9, abs=1e-12, nan_ok=True), row
    assert len(table) == len(MEASURE_NAMES) * a.shape[0] * b.shape[0]
    from thinkalike.measures.rogue import remove_top_dimensions, standardise_dimensions

    variants = {
        "raw": lambda x: x,
        "standardised": standardise_dimensions,
        "top3_removed": lambda x: remove_top_dimensions(x, 3),
    }  # the remedies, on the same rows
    checks = full[full["variant"] != "configured"]  # a pair of different models: no grounding controls
    assert set(checks["variant"]) == set(variants) and set(checks["measure"]) == {"cka", "procrustes"}
    for row in checks.itertuples():
        transform = variants[row.variant]
        expected = MEASURES[row.measure](transform(a[row.layer_a, rows]), transform(b[row.layer_b, rows]))
        assert row.value == pytest.approx(expected, rel=1e-9, abs=1e-12), row
    assert set(catalog.load("rogue_remedies")["variant"]) == set(variants)
    from thinkalike.cka.measure_tables import measure_matrix
    from thinkalike.measures.grounding import layer_monotonicity

    grounding = catalog.load("measure_grounding").set_index("measure")
    assert list(grounding.index) == list(MEASURE_NAMES)
    deep = [m for m in ("gelu_1l", "neox_xs") if len(catalog.load(f"models.{m}.activations").layers) >= 3]
    for name in MEASURE_NAMES:  # the mean over the models with ≥ 3 layers, recomputed from their own tables
        expected = [
            layer_monotonicity(
                measure_matrix(catalog.load(f"models.cka.{m}__{m}.measures_table"), name), MEASURES[name].kind
            )
            for m in deep
        ]
        assert grounding.loc[name, "n_models"] == len(deep)
        assert grounding.loc[name, "monotonicity"] == pytest.approx(np.mean(expected) if deep else np.nan, nan_ok=True)
    assert grounding["specificity"].isna().all()  # conf/test's two groups: no pair of one group to rank
    intra = catalog.load("models.cka.neox_xs__neox_xs.measures_table")
    diagonal = intra[(intra["layer_a"] == intra["layer_b"]) & (intra["variant"] == "configured")]
    for name, values in diagonal.groupby("measure")["value"]:  # a layer against itself: the measure's extreme
        if name == "linear_predictivity":  # ridge shrinks, and held-out folds: R² of X from X is below 1
            assert ((values > 0.9) & (values < 1.0)).all(), values
            continue
        extreme = 0.0 if MEASURES[name].kind == "distance" else 1.0
        np.testing.assert_allclose(values, extreme, atol=1e-6, err_msg=name)
    summary = catalog.load("similarity_measures")
    assert set(summary["measure"]) == set(MEASURE_NAMES) and len(summary) == len(MEASURE_NAMES) * len(PAIRS)
    metric = summary[summary["measure"] == "procrustes"].set_index(["model_a", "model_b"])
    assert metric.loc[("gelu_1l", "neox_xs"), "model_distance"] > 0
    assert {path.name for path in project.rglob("figures/similarity_heatmaps/*.png")} == {f"{p}.png" for p in PAIRS}
    shares = catalog.load("dimension_shares")  # rogue dimensions: every layer of both models, once
    assert sorted(set(shares["model"])) == ["gelu_1l", "neox_xs"] and not shares.duplicated(["model", "layer"]).any()
    assert (
        (0 < shares["top1_share"]) & (shares["top1_share"] <= shares["top3_share"]) & (shares["top3_share"] <= 1)
    ).all()
    from thinkalike.measures.rogue import top_share

    first = shares[shares["model"] == "gelu_1l"].iloc[0]
    assert first["top1_share"] == pytest.approx(top_share(a[int(first["layer"]), rows], 1))
    from tests.pipelines.test_run_timings import logged_numbers, mlflow_runs

    client, runs = mlflow_runs(project)
    logged = {name for run in runs for name in logged_numbers(client, run)}  # the pairs' numbers are details
    assert "measures/procrustes.matched_mean" in logged and "measures/mutual_knn.matched_mean_z" in logged
    assert "cka.gelu_1l__neox_xs.procrustes.model_distance" in logged
    assert "cka.gelu_1l__neox_xs.mutual_knn.matched_mean" in logged
    assert not any(name.startswith("cka.neox_xs__neox_xs.procrustes") for name in logged)  # intra: by construction
    assert "cka.gelu_1l__neox_xs.mutual_knn.best_z" in logged and "cka.gelu_1l__neox_xs.cka.matched_mean_p" in logged


def test_grounding_controls_of_a_model_against_itself_equal_the_measures_recomputed(tiny_project):
    """A model compared with itself also gets the grounding controls (conf/test: max_components default 5): its
    middle layer against itself with its rows shuffled, on other tokens, and without its top k principal components —
    each row equals the measure recomputed here by the stated rule; measure_grounding's sensitivity and null levels
    are their summaries, and its figure is saved."""
    from scipy.stats import spearmanr

    from thinkalike.measures.grounding import without_top_components
    from thinkalike.measures.registry import MEASURE_NAMES, MEASURES, subsample_tokens

    project, catalog = tiny_project
    table = catalog.load("models.cka.neox_xs__neox_xs.measures_table")
    parameters = catalog.load("params:cka")["measures"]
    options, seed = parameters["options"], parameters["seed"]
    acts = _tokens(catalog.load("models.neox_xs.activations"))
    acts = acts[:, ~catalog.load("models.neox_xs.activation_index")["is_special"].to_numpy()]
    drawn = subsample_tokens(acts.shape[1], parameters["max_tokens"], seed)
    n = len(drawn)
    shuffled = np.random.default_rng(seed + 1).permutation(n)
    rest = np.setdiff1d(np.arange(acts.shape[1]), drawn)
    assert len(rest) >= n  # conf/test has rows to spare: the independent rows are other tokens
    other = np.sort(np.random.default_rng(seed + 2).choice(rest, size=n, replace=False))
    controls = table[table["variant"] != "configured"]
    assert set(controls["variant"]) == {"permuted_rows", "independent_rows", "components_removed"} | {
        "raw",
        "standardised",
        "top3_removed",
    }
    for row in controls[
        controls["variant"].isin(["permuted_rows", "independent_rows", "components_removed"])
    ].itertuples():
        layer = acts[row.layer_a]
        assert row.layer_a == row.layer_b == acts.shape[0] // 2
        if row.variant == "permuted_rows":
            x, y = layer[drawn], layer[drawn][shuffled]
        elif row.variant == "independent_rows":
            x, y = layer[drawn], layer[other]
        else:
            x, y = without_top_components(layer[drawn], 0), without_top_components(layer[drawn], row.removed_components)
        used = {
            **options.get(row.measure, {}),  # the CCA family fitted to the control's rows: n // 10 components
            **({"max_dims": len(x) // 10} if MEASURES[row.measure].rows_per_dimension else {}),
        }
        assert json.loads(row.options) == used, row
        expected = MEASURES[row.measure](x, y, **used)
        assert row.value == pytest.approx(expected, rel=1e-9, abs=1e-12), row
    steps = controls[controls["variant"] == "components_removed"]
    assert sorted(set(steps["removed_components"])) == [0, 1, 2, 3, 4, 5]
    grounding = catalog.load("measure_grounding").set_index("measure")
    models = ["gelu_1l", "neox_xs"]
    tables = [catalog.load(f"models.cka.{m}__{m}.measures_table") for m in models]
    for name in MEASURE_NAMES:
        measure = MEASURES[name]
        sign = 1.0 if measure.kind == "similarity" else -1.0
        rhos = [
            spearmanr(-rows["removed_components"], sign * rows["value"]).statistic
            for t in tables
            for _, rows in t[(t["measure"] == name) & (t["variant"] == "components_removed")]
            .sort_values("removed_components")
            .groupby("layer_a")
        ]
        rhos = [0.0 if np.isnan(rho) else rho for rho in rhos]  # a measure that does not move scores 0
        assert grounding.loc[name, "sensitivity"] == pytest.approx(np.mean(rhos)), name
        for variant in ("permuted_rows", "independent_rows"):
            values = np.concatenate(
                [t.loc[(t["measure"] == name) & (t["variant"] == variant), "value"] for t in tables]
            )
            alike = 1 - values**2 / 2 if name == "procrustes" else np.cos(values) if name == "angular_shape" else values
            column = "null_permuted" if variant == "permuted_rows" else "null_independent"
            assert grounding.loc[name, column] == pytest.approx(alike.mean()), (name, variant)
    assert grounding.loc["cka", "null_permuted"] == pytest.approx(0, abs=0.1)  # unbiased CKA: no correspondence
    assert grounding["trained_vs_untrained"].isna().all() and (grounding["n_untrained_pairs"] == 0).all()
    assert list(project.rglob("data/08_reporting/measure_grounding.png/*/measure_grounding.png"))


def test_an_untrained_initialisation_is_extracted_and_graded_against_trained_models(tiny_project, tmp_path):
    """``zoo:gelu_1l?weights=initial`` in activations.models, compared with gelu_1l, and gelu_1l with neox_xs
    labelled one group (standing in for seed replicas): the untrained model's rows are its own (not gelu_1l's), it
    takes part in trained vs untrained only, and that score is the average precision of the labelled pair above
    the untrained one, recomputed from similarity_measures."""
    import shutil

    from tests.pipelines.conftest import run_project
    from thinkalike.measures.grounding import separation_auprc
    from thinkalike.measures.registry import MEASURE_NAMES, MEASURES

    project = shutil.copytree(tiny_project[0], tmp_path / "project")
    params = {
        "activations": {"models": {"gelu_1l_untrained": "zoo:gelu_1l?weights=initial"}},
        "cka": {
            "pairs": {"explicit": [["gelu_1l", "neox_xs"], ["gelu_1l", "gelu_1l_untrained"]]},
            "groups": {"gelu_1l": "lm", "neox_xs": "lm"},
        },
    }  # merged into conf/test's
    catalog = run_project(
        project, runtime_params=params, pipeline_names=["activations", "cka"], only_missing_outputs=True
    )
    untrained, trained = (
        catalog.load("models.gelu_1l_untrained.activations"),
        catalog.load("models.gelu_1l.activations"),
    )
    assert untrained.spec == "zoo:gelu_1l?weights=initial" and trained.spec == "zoo:gelu_1l"
    assert not np.allclose(_tokens(untrained), _tokens(trained))
    grounding = catalog.load("measure_grounding").set_index("measure")
    summary = catalog.load("similarity_measures")
    assert (grounding["n_untrained_pairs"] == 1).all() and (grounding["n_pairs"] == 1).all()
    assert grounding["n_models"].max() <= 1  # gelu_1l and neox_xs only (the untrained model is left out)
    for name in MEASURE_NAMES:
        rows = summary[
            (summary["measure"] == name)
            & (summary["model_a"] == "gelu_1l")
            & summary["model_b"].isin(["neox_xs", "gelu_1l_untrained"])
        ].sort_values("model_b")
        expected = separation_auprc(rows["matched_mean"].to_numpy(), [False, True], MEASURES[name].kind)
        assert (grounding.loc[name, "trained_vs_untrained"], grounding.loc[name, "trained_vs_untrained_chance"]) == (
            pytest.approx(expected[0]),
            pytest.approx(0.5),
        ), name


def test_calibrated_scores_of_the_pair_against_its_permutation_null(tiny_project):
    """conf/test calibrates cka, procrustes and mutual_knn with 9 shuffles on the pair of different models only:
    the observed matched-layer means are the measures table's, every p-value is on the grid 1/10 … 1, and the
    z-scores agree with the null columns."""
    from thinkalike.cka.measure_tables import pair_measure_summary

    project, catalog = tiny_project
    calibration = catalog.load("models.cka.gelu_1l__neox_xs.calibration_table")
    assert not list(project.glob("data/08_reporting/cka/neox_xs__neox_xs/calibration.parquet"))
    assert set(calibration["measure"]) == {"cka", "procrustes", "mutual_knn"}
    assert set(calibration["statistic"]) == {"cell", "matched_mean", "best"}
    assert (calibration["n_permutations"] == 9).all()
    p = calibration["p_value"].to_numpy()
    np.testing.assert_allclose(p * 10, np.round(p * 10), atol=1e-9)
    assert ((p >= 0.1 - 1e-12) & (p <= 1)).all()
    measures = catalog.load("models.cka.gelu_1l__neox_xs.measures_table")
    means = pair_measure_summary(measures).set_index("measure")["matched_mean"]
    matched = calibration[calibration["statistic"] == "matched_mean"].set_index("measure")
    for name, row in matched.iterrows():
        assert row["observed"] == pytest.approx(means[name], rel=1e-9, abs=1e-12)
        sign = -1 if name == "procrustes" else 1
        assert row["z"] == pytest.approx(sign * (row["observed"] - row["null_mean"]) / row["null_std"])
    summary = catalog.load("similarity_calibration")
    assert set(summary["statistic"]) == {"matched_mean", "best"} and len(summary) == 6


@pytest.mark.parametrize(
    ("measures", "message"),
    [
        ({"names": ["cka", "wasserstein"]}, r"unknown measure 'wasserstein'"),
        ({"names": ["mutual_knn"], "max_tokens": 64, "options": {"mutual_knn": {"k": 64}}}, r"k.*64"),
        ({"names": ["angular_shape"], "options": {"angular_shape": {"alpha": 1.5}}}, r"alpha"),
        ({"names": ["rsa"], "options": {"procrustes": {}}}, r"procrustes"),
        ({"names": ["rsa"], "max_tokens": 2}, r"cka.measures.max_tokens"),
        ({"names": ["rsa"], "tokens": 5}, r"^cka\.measures\.tokens: unknown parameter"),
        ({"names": ["rsa"], "layers": "every"}, r"^cka\.measures\.layers: Input should be 'diagonal', 'relative'"),
        ({"names": ["rsa"], "remedies": {"measures": ["cka"], "top": 2}}, r"^cka\.measures\.remedies\.top: unknown"),
        ({"names": ["rsa"], "calibration": {"measures": ["cka"]}}, r"^cka\.measures\.calibration\.measures: \['cka'\]"),
        ({"names": ["rsa"], "grounding": {"max_components": 1}}, r"^cka\.measures\.grounding\.max_components: 1"),
    ],
)
def test_bad_measure_settings_are_named(measures, message):
    from thinkalike.pipelines.cka.schema import measure_settings

    with pytest.raises(ValueError, match=message):
        measure_settings(measures)


def test_null_blocks_turn_the_remedies_calibration_and_grounding_off():
    from thinkalike.cka.measure_tables import MeasureSettings
    from thinkalike.pipelines.cka.schema import measure_settings

    assert measure_settings(None) == MeasureSettings()
    off = measure_settings({"names": ["cka", "rsa"], "remedies": None, "calibration": None, "grounding": None})
    assert (off.remedy_measures, off.calibration_measures, off.grounding_components) == ((), (), 0)
    assert not off.calibrated
    given = measure_settings({"names": ["cka", "rsa"], "calibration": {"measures": ["rsa"], "n_permutations": 9}})
    assert given.calibrated and given.calibration_measures == ("rsa",) and given.calibration_permutations == 9
    assert given.remedy_measures == MeasureSettings().remedy_measures  # a block left out keeps its defaults


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"measures": {"names": ["cka", "knn"]}}, r"^cka.measures.*unknown measure 'knn'"),
        ({"measures": {"names": ["cknna"], "max_tokens": 8, "options": {"cknna": {"k": 9}}}}, r"^cka.measures.*k"),
        ({"measures": {"names": ["cka"], "layers": "some"}}, r"^cka.measures.layers: Input should be 'diagonal'"),
    ],
)
def test_bad_measure_settings_fail_at_start_naming_the_parameter(change, message):
    import yaml

    from tests.pipelines.conftest import PROJECT_ROOT
    from thinkalike.pipelines.errors import ParameterError
    from thinkalike.pipelines.validation import validate_parameters

    parameters = {
        name: yaml.safe_load((PROJECT_ROOT / f"conf/base/parameters_{name}.yml").read_text())[name]
        for name in ("corpus", "zoo", "activations", "cka")
    }
    parameters["cka"] = {**parameters["cka"], **change}
    with pytest.raises(ParameterError, match=message):
        validate_parameters(parameters, ["cka"])


def test_streaming_mode_leaves_the_measures_out_and_says_so(caplog):
    import yaml

    from tests.pipelines.conftest import PROJECT_ROOT
    from thinkalike.pipelines.cka.pipeline import create_pipeline

    parameters = {
        name: yaml.safe_load((PROJECT_ROOT / f"conf/base/parameters_{name}.yml").read_text())[name]
        for name in ("corpus", "zoo", "activations", "cka")
    }
    assert any(node.name.endswith("compare_measures") for node in create_pipeline(RunSettings(parameters)).nodes)
    parameters["cka"] = {**parameters["cka"], "mode": "streaming"}
    with caplog.at_level("WARNING"):
        streamed = create_pipeline(RunSettings(parameters))
    assert not any("measures" in node.name for node in streamed.nodes) and streamed.nodes
    assert "need every row of a pair at once, i.e. the stored activations" in caplog.text and "left out" in caplog.text
    assert "procrustes, angular_shape, mean_cca" in caplog.text  # each measure that does not stream, by name


def test_a_planted_rogue_dimension_decides_cka_and_the_remedies_undo_it(tiny_project, caplog, recwarn):
    """A zoo model's own activations against themselves with one more dimension of noise at 30× the largest
    standard deviation planted on one side: CKA (1 without it) collapses on the raw rows; removing each side's top
    dimension or standardising gives most of it back; the planted layers are flagged."""
    from thinkalike.cka.measure_tables import MeasureSettings, measures_long_table

    _, catalog = tiny_project
    store = catalog.load("models.gelu_1l.activations")
    a = _tokens(store)  # (layers, tokens, d)
    rng = np.random.default_rng(0)
    scale = 30 * a.std(axis=1).max()
    planted = np.concatenate([a, scale * rng.normal(size=(*a.shape[:2], 1))], axis=2)  # one more dimension
    settings = MeasureSettings(names=("cka",), max_tokens=48, remedy_measures=("cka",), remedy_top_dimensions=1)
    with caplog.at_level("INFO", logger="thinkalike.cka.measure_tables"):
        table = measures_long_table(
            a,
            planted,
            settings,
            CKASettings(),
            model_a="gelu_1l",
            model_b="planted",
            layer_ids_a=store.layers,
            layer_ids_b=store.layers,
        )
    rogue = [r for r in caplog.records if "one dimension carries more than 50%" in r.getMessage()]
    assert len(rogue) == 1 and rogue[0].levelname == "WARNING"  # a log line naming the model and the settings
    assert rogue[0].getMessage().startswith("planted:") and "cka.measures.standardise" in rogue[0].getMessage()
    assert not [w for w in recwarn if "carries more than" in str(w.message)]  # not a Python warning
    diagonal = table[table["layer_a"] == table["layer_b"]].pivot(index=["layer_a"], columns="variant", values="value")
    assert (diagonal["raw"] < 0.1).all(), diagonal  # the same model: CKA 1 without the planted dimension
    assert (diagonal["top1_removed"] > 0.95).all(), diagonal  # measured 0.98-0.99
    assert (diagonal["standardised"] > 0.95).all(), diagonal  # measured 0.99-1.00
    assert (table["top1_share_b"] > 0.5).all() and (table["top1_share_a"] < 0.5).all()
