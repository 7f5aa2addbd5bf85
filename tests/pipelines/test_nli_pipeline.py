"""The nli pipeline: its outputs in the shared tiny run (conf/test: 4 copies, k = 2), groups, stitching and CKA
tables against independent recomputation, the sweep, errors at start (the maths and sentences on planted tables:
tests/nli)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from thinkalike.nli.analysis import (
    BASELINE,
    RELATIONS,
    copy_names,
    identity_stitch_table,
    stratified_subset,
)
from thinkalike.nli.verdicts import (
    cka_sentence,
    distance_sentence,
    stitching_sentence,
)
from thinkalike.pipelines.schema import ParameterError

NAMES = copy_names(4)


@pytest.fixture(scope="module")
def outputs(tiny_project):
    _, catalog = tiny_project
    names = [
        "groups",
        "accuracy",
        "stitching",
        "stitching_groups",
        "cka_group_curves",
        "cka_group_distances",
        "sweep",
        "report",
        "figures_plotly",
    ]
    return {name: catalog.load(f"models.nli.{name}") for name in names}


def test_groups_split_the_copies_by_ood_accuracy(outputs):
    groups = outputs["groups"]
    assert sorted(groups["model"]) == NAMES and list(groups["rank"]) == [1, 2, 3, 4]
    assert list(groups["group"]) == ["generalizing", "generalizing", "heuristic", "heuristic"]
    assert groups["ood_non_entailed_accuracy"].is_monotonic_decreasing
    # the name in the query's text, not as @BASELINE: a linter cannot see an import used only inside a string
    baseline = outputs["accuracy"].query(f"model == {BASELINE!r} and split == 'ood' and subcase == 'all'")
    assert dict(zip(baseline["label"], baseline["accuracy"])) == {"non_entailed": 0.0, "entailed": 1.0}


def test_stitching_covers_every_ordered_pair_and_layer_and_its_penalty_is_g_minus_stitched(outputs, tiny_project):
    _, catalog = tiny_project
    table = outputs["stitching"]
    n_layers = catalog.load("models.nli.encoder.model_config")["bridge_config"]["n_layers"]
    assert len(table) == 2 * len(NAMES) * (len(NAMES) - 1) * (n_layers + 1)
    assert not (table["model_f"] == table["model_g"]).any()
    np.testing.assert_allclose(table["penalty"], table["g_accuracy"] - table["stitched_accuracy"], atol=1e-12)
    assert (table["ci_low"] <= table["penalty"] + 1e-12).all() and (table["penalty"] <= table["ci_high"] + 1e-12).all()
    # g's accuracy is its own predictions' accuracy on the stitched subset (an independent path: saved predictions)
    pairs = catalog.load("models.nli.pairs")
    nli = catalog.load("params:nli")
    subset = stratified_subset(pairs[pairs["split"] == "test"], nli["stitching"]["max_pairs"], nli["stitching"]["seed"])
    for g in NAMES:
        predicted = catalog.load(f"models.nli.{g}.predictions").set_index("pair_id").loc[subset["pair_id"], "predicted"]
        expected = float((predicted.to_numpy() == subset["label_id"].to_numpy()).mean())
        assert np.allclose(table.query("data == 'test' and model_g == @g")["g_accuracy"], expected)
    by_group = outputs["stitching_groups"]
    assert set(by_group["relation"]) == set(RELATIONS)
    within = by_group.query("relation == 'within_generalizing'")
    assert (within["n_pairs"] == 2).all()  # two ordered pairs inside a group of two
    assert (by_group.query("relation == 'between'")["n_pairs"] == 8).all()


def test_saved_copies_load_as_classifiers_and_reproduce_their_predictions(tiny_project):
    from thinkalike.language.nli import encode_pairs
    from thinkalike.models.finetune import SequenceClassifierHandle, predict_labels
    from thinkalike.models.sources import load_classifier

    _, catalog = tiny_project
    pairs = catalog.load("models.nli.pairs")
    evaluated = pairs[pairs["split"] != "train"]
    tokenizer = catalog.load("tokenizer")
    handle = load_classifier(
        catalog.load("models.nli.copy_01.classifier_weights"),
        catalog.load("models.nli.copy_01.classifier_config"),
        tokenizer,
        device="cpu",
    )
    assert isinstance(handle, SequenceClassifierHandle)
    encoded = encode_pairs(evaluated, tokenizer, catalog.load("params:nli")["n_ctx"])
    saved = catalog.load("models.nli.copy_01.predictions")
    np.testing.assert_array_equal(
        predict_labels(handle, encoded["input_ids"], encoded["attention_mask"]), saved["predicted"].to_numpy()
    )


def test_cka_and_report(outputs):
    curves = outputs["cka_group_curves"]
    assert {(a, b) for a, b in zip(curves["group_a"], curves["group_b"])} == {
        ("generalizing", "generalizing"),
        ("generalizing", "heuristic"),
        ("heuristic", "heuristic"),
    }
    report = outputs["report"]
    for sentence in (
        stitching_sentence(outputs["stitching_groups"], "test"),
        cka_sentence(curves),
        distance_sentence(outputs["cka_group_distances"]),
    ):
        assert sentence in report
    assert outputs["sweep"]["status"].iloc[0] == "swept"  # conf/test: nli.sweep.run is true


def test_plotly_page_shows_the_tables_numbers(outputs):
    figure = outputs["figures_plotly"]
    traces = {}
    for trace in figure.data:  # the first of a name: stitching on test pairs comes before OOD
        traces.setdefault(trace.name, trace)
    groups = outputs["groups"]
    generalizing = groups[groups["group"] == "generalizing"]
    np.testing.assert_allclose(traces["generalizing"].y, generalizing["ood_non_entailed_accuracy"])
    between = outputs["stitching_groups"].query("data == 'test' and relation == 'between'").sort_values("layer")
    np.testing.assert_allclose(traces["stitching: between groups"].y, between["mean_penalty"])
    np.testing.assert_allclose(
        np.asarray(traces["stitching: between groups"].error_y.array), between["ci_high"] - between["mean_penalty"]
    )
    assert "CKA: gen.-to-gen." in traces and "lexical-overlap rule" in traces


# --------------------------------------------------------------------------- sweep and errors


def test_the_sweep_decision_is_a_setting_that_round_off_cannot_flip(tiny_project, outputs):
    """Whether the sweep runs is nli.sweep.run alone: copies whose spread sits a round-off either side of
    nli.min_spread get the same decision (before, a spread of min_spread - 1e-12 swept and min_spread did not)."""
    from thinkalike.pipelines.nli.nodes import sweep_fractions
    from thinkalike.pipelines.nli.schema import validate_nli

    _, catalog = tiny_project
    nli = validate_nli(catalog.load("params:nli"))
    args = (
        catalog.load("tokenizer"),
        catalog.load("models.nli.encoder.model_weights"),
        catalog.load("models.nli.encoder.model_config"),
    )
    assert nli.sweep.run
    just_below = outputs["groups"].assign(ood_non_entailed_accuracy=[nli.min_spread - 1e-12, 0.0, 0.0, 0.0])
    just_above = outputs["groups"].assign(ood_non_entailed_accuracy=[nli.min_spread + 1e-12, 0.0, 0.0, 0.0])
    swept = sweep_fractions(just_below, *args, settings=nli)
    assert (swept["status"] == "swept").all()
    assert swept.groupby("counterexample_fraction").size().to_dict() == {0.0: 2, 0.2: 2}
    assert (sweep_fractions(just_above, *args, settings=nli)["status"] == "swept").all()
    off = nli.model_copy(update={"sweep": nli.sweep.model_copy(update={"run": False})})
    for groups in (just_below, just_above):
        assert sweep_fractions(groups, *args, settings=off)["status"].tolist() == ["not_run"]


def test_a_sweep_copy_at_the_experiments_fraction_is_the_experiments_copy(tiny_project, outputs):
    """At nli.pairs.counterexample_fraction the sweep's copies have the experiment's pairs and seeds: their rows are
    the experiment's copies' accuracies, and equal what fine-tuning them again gives (the path they skip)."""
    from thinkalike.language.nli import accuracy_table, generate_pairs
    from thinkalike.models.finetune import copy_seeds
    from thinkalike.nli.analysis import accuracy_summary
    from thinkalike.pipelines.nli.nodes import SWEEP_COLUMNS, _finetune, sweep_fractions
    from thinkalike.pipelines.nli.schema import NLIParameters
    from thinkalike.pipelines.schema import validate_section

    _, catalog = tiny_project
    nli = catalog.load("params:nli")
    fraction = nli["pairs"]["counterexample_fraction"]
    # a spread of accuracy 1 is below min_spread 2: the sweep runs on the copies' own accuracies (min_spread 2 is
    # outside the section's range [0, 1], so the node gets it without the check)
    settings = validate_section(NLIParameters, nli, "nli")
    swept_nli = settings.model_copy(
        update={
            "min_spread": 2.0,
            "sweep": settings.sweep.model_copy(update={"fractions": [fraction, 0.0], "n_copies": 2}),
        }
    )
    args = (
        catalog.load("tokenizer"),
        catalog.load("models.nli.encoder.model_weights"),
        catalog.load("models.nli.encoder.model_config"),
    )
    swept = sweep_fractions(outputs["groups"], *args, settings=swept_nli).set_index("model")
    by_name = outputs["groups"].set_index("model")
    accuracies = SWEEP_COLUMNS[4:]
    pairs = generate_pairs(settings.pairs_config(counterexample_fraction=fraction))
    for i, seeds in enumerate(copy_seeds(2, nli["seed"])):
        row = swept.loc[f"sweep_{fraction:g}_{i}"]
        assert f"the experiment's {NAMES[i]}" in row["note"]
        assert row[accuracies].tolist() == by_name.loc[NAMES[i], accuracies].tolist()
        weights, _, _, predicted = _finetune(pairs, *args, settings, "again", seeds)
        again = accuracy_summary(accuracy_table(pairs[pairs["split"] != "train"], predicted, "again")).iloc[0]
        assert row[accuracies].tolist() == again[accuracies].tolist()
        saved = catalog.load(f"models.nli.{NAMES[i]}.classifier_weights")  # the very same model, to the bit
        assert saved.keys() == weights.keys() and all(torch.equal(saved[k], weights[k]) for k in saved)
        assert "the experiment's" not in swept.loc[f"sweep_0_{i}", "note"]  # another fraction: fine-tuned


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"n_copies": 4, "group_size": 3}, r"^nli.group_size: k = 3 must be between 1 and n_copies / 2 = 2.0"),
        ({"pairs": {"counterexample_fraction": 1.0}}, r"^nli.pairs.counterexample_fraction must be in \[0, 1\)"),
        (
            {"sweep": {"fractions": [0.1, -0.1]}},
            r"^nli.sweep.fractions: every counterexample fraction must be in \[0, 1\)",
        ),
        (
            {"pairs": {"ood_subcases": ["passive", "cleft"]}},
            r"^nli.pairs.ood_subcases.*unknown subcase\(s\) \['cleft'\]",
        ),
        ({"stitching": {"layers": [0, 9]}}, r"^nli.stitching.layers: the encoder has layers 0..4"),
        ({"finetune": {"head_seed": 3}}, r"^nli.finetune.head_seed"),
        (
            {"encoder": {"pair_text": {"hypothesis_mask_probability": 1.0}}},
            r"^nli.encoder.pair_text.hypothesis_mask_probability",
        ),
        ({"n_ctx": 16}, r"nli.n_ctx"),
    ],
)
def test_bad_settings_fail_at_start_naming_the_parameter(change, message):
    import yaml

    from tests.pipelines.conftest import PROJECT_ROOT
    from thinkalike.pipelines.validation import validate_parameters

    base = yaml.safe_load((PROJECT_ROOT / "conf/base/parameters_nli.yml").read_text())["nli"]
    nli = {**base, **{k: ({**base[k], **v} if isinstance(v, dict) else v) for k, v in change.items()}}
    with pytest.raises(ParameterError, match=message):
        validate_parameters({"nli": nli})


def test_stitching_copies_of_different_widths_is_refused_before_any_forward_pass(tiny_project):
    from thinkalike.language.nli import LABELS
    from thinkalike.models.architectures import build_zoo_module
    from thinkalike.models.finetune import FinetuneConfig, build_classifier
    from thinkalike.models.sources import load_classifier
    from thinkalike.models.zoo import state_dict_for_saving, zoo_config
    from thinkalike.stitching import StitchConfigError, TokenSplit

    _, catalog = tiny_project
    tokenizer = catalog.load("tokenizer")
    handles = {}
    for name, width in (("narrow", 16), ("wide", 32)):
        entry = {
            "family": "bridge",
            "objective": "masked",
            "seed": 0,
            "architecture": {
                "n_layers": 2,
                "d_model": width,
                "n_heads": 2,
                "d_head": width // 2,
                "d_mlp": 2 * width,
                "act_fn": "gelu",
                "positional_embedding_type": "rotary",
            },
        }
        config = zoo_config(name, entry, tokenizer, 64)
        module, classifier = build_classifier(
            state_dict_for_saving(build_zoo_module(config)), config, name, LABELS, FinetuneConfig()
        )
        handles[name] = load_classifier(state_dict_for_saving(module), classifier, tokenizer, device="cpu")
    split = TokenSplit.of(torch.ones(2, 5, dtype=torch.long), labels=torch.zeros(2, dtype=torch.long))
    with pytest.raises(StitchConfigError, match="identity stitching needs equal widths: model 'narrow' has d_model 16"):
        identity_stitch_table(
            handles["narrow"], {"wide": handles["wide"]}, {"test": split}, {("wide", "test"): np.ones(2)}
        )


class _Recorder:
    def __init__(self):
        self.metrics, self.texts, self.details = {}, {}, {}

    def log_metrics(self, metrics, step=0, what="metrics"):
        self.metrics.update(metrics)

    def log_details(self, metrics, dataset):
        self.details.update(metrics)

    def log_table(self, table, artifact_file):
        self.texts[artifact_file] = table.to_csv(index=False)

    def set_description(self, text):
        self.description = text

    def log_text(self, text, artifact_file):
        self.texts[artifact_file] = text


def test_mlflow_gets_each_copys_accuracies_the_summary_tables_and_the_report(outputs):
    from thinkalike.hooks import record_saved_output

    recorder = _Recorder()
    accuracy = outputs["accuracy"]
    one_copy = accuracy[accuracy["model"] == "copy_00"]
    record_saved_output(recorder, "models.nli.copy_00.accuracy", one_copy)
    assert not recorder.metrics and "tables/nli.copy_00.accuracy.csv" in recorder.texts  # one copy: a table
    assert recorder.details and all(name.startswith("nli.copy_00.") for name in recorder.details)
    row = one_copy.iloc[0]
    assert recorder.details[f"nli.copy_00.{row.split}_{row.subcase}_{row.label}"] == pytest.approx(row.accuracy)
    record_saved_output(recorder, "models.nli.accuracy", accuracy)  # the copies' spread and the baseline: metrics
    test = accuracy[(accuracy["split"] == "test") & (accuracy["subcase"] == "all") & (accuracy["model"] != BASELINE)]
    assert recorder.metrics["nli/copies.test_all_all.mean"] == pytest.approx(test["accuracy"].mean())
    assert recorder.metrics["nli/copies.test_all_all.min"] == pytest.approx(test["accuracy"].min())
    assert all(name.startswith("nli/") for name in recorder.metrics) and len(recorder.metrics) <= 15
    record_saved_output(recorder, "models.nli.report", "# report")
    assert recorder.texts["reports/nli_report.md"] == "# report"
