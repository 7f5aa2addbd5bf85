"""Thin nodes of the ``nli`` pipeline (Brown et al. 2023 §4 on the grammar's HANS-style pairs).

``make_pairs`` → ``pretrain_encoder`` (corpus + unlabelled pair text) → ``finetune_copy`` per copy (weights,
config, curve, accuracy table, predictions) → ``summarise_accuracy`` (groups, distribution) →
``sweep_fractions`` (only when ``nli.sweep.run`` is true) → ``stitch_from_copy`` per copy (identity stitching
into every other copy at every layer) → ``summarise_stitching`` → ``compare_copies_cka`` (grouped copies) →
``write_report``. The maths and the CKA tables are in :mod:`thinkalike.nli.analysis`, the sentences in
:mod:`thinkalike.nli.verdicts`, the figures in :mod:`thinkalike.nli.figures`; tiny models run with ``nli.threads``
torch threads.

Every node gets the ``nli`` section as ``settings`` (:class:`~thinkalike.pipelines.nli.schema.NLIParameters`,
parsed once by the pipeline's builder, where its defaults live) and, where CKA is estimated or named, ``cka``
(:class:`~thinkalike.cka.settings.CKASettings` of ``nli.cka``, built once by the builder).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd
import torch

from thinkalike.cka.settings import CKA_RANGES, CKASettings
from thinkalike.language.nli import (
    LABELS,
    accuracy_table,
    encode_pairs,
    generate_pairs,
    heuristic_predictions,
    mix_rows,
    pack_pairs,
)
from thinkalike.models.encoder_import import import_encoder
from thinkalike.models.finetune import (
    copy_seeds,
    finetune_classifier,
    predict_labels,
)
from thinkalike.models.handle import default_device
from thinkalike.models.sources import load_classifier
from thinkalike.models.training import progress_bar, progress_label
from thinkalike.models.zoo import (
    state_dict_for_saving,
    train_zoo_model,
    training_config,
    zoo_config,
)
from thinkalike.nli.analysis import (
    BASELINE,
    GENERALIZING,
    HEURISTIC,
    accuracy_summary,
    aggregate_stitching,
    copies_cka_tables,
    copy_names,
    identity_stitch_table,
    ood_spread,
    split_groups,
    stratified_subset,
    token_activations,
)
from thinkalike.nli.figures import accuracy_figure, experiment_plotly, stitching_figure
from thinkalike.nli.verdicts import (
    accuracy_sentence,
    cka_sentence,
    distance_sentence,
    markdown_report,
    stitching_sentence,
    sweep_sentence,
)
from thinkalike.pipelines.cka.nodes import summarise_cka
from thinkalike.pipelines.cka.schema import CKAParameters
from thinkalike.pipelines.nli.schema import NLIParameters, group_size
from thinkalike.stitching import TokenSplit
from thinkalike.threads import torch_threads

logger = logging.getLogger(__name__)

ENCODER_NAME = "nli_encoder"
STITCH_DATA = ("test", "ood")
SWEEP_COLUMNS = [
    "status",
    "note",
    "counterexample_fraction",
    "model",
    "test_accuracy",
    "ood_non_entailed_accuracy",
    "ood_entailed_accuracy",
]
FIGURES = ["accuracy.png", "stitching.png", "cka_group_curves.png", "cka_distances.png", "figures.json (plotly)"]


def make_pairs(*, settings: NLIParameters) -> pd.DataFrame:
    """The train / test / ood pairs of ``nli.pairs`` with subcase, variant, form and label of each
    (premise triples joined by ``"; "``, so the table has no list column)."""
    pairs = generate_pairs(settings.pairs_config())
    return pairs.assign(premise_triples=pairs["premise_triples"].map("; ".join))


def import_pretrained_encoder(*, settings: NLIParameters):
    """A real pretrained encoder (``nli.encoder.source``) as the encoder every copy starts from
    (:func:`thinkalike.models.encoder_import.import_encoder`): its weights, its zoo-style config, an empty
    pretraining curve (it was pretrained elsewhere) and its own tokenizer, which every copy's node then reads."""
    weights, config, tokenizer = import_encoder(settings.encoder.source, ENCODER_NAME)
    parameters = sum(int(tensor.numel()) for tensor in weights.values())
    finetune = settings.finetune_config((0, 0))  # the seeds do not change the amount of work
    logger.info(
        "nli: encoder %s imported (%d tensors, %.1f M parameters); next %d fine-tunes of the whole model x %d steps "
        "of %d pairs, then identity stitching of every ordered pair of copies at each layer and CKA: a real "
        "encoder's run is tens of minutes on a 2-core CPU (docs/real-models.md states a measured one)",
        settings.encoder.source,
        len(weights),
        parameters / 1e6,
        settings.n_copies,
        finetune.steps,
        finetune.batch_size,
    )
    curve = pd.DataFrame(columns=["model", "step", "train_loss", "seconds"])
    return weights, config, curve, tokenizer


def pretrain_encoder(
    train_sequences: dict[str, np.ndarray],
    heldout_sequences: dict[str, np.ndarray],
    tokenizer,
    *,
    settings: NLIParameters,
):
    """The masked encoder every copy starts from, trained from scratch on the corpus's training rows mixed with
    unlabelled pair text (``nli.encoder.pair_text``: ``n_pairs`` in-distribution pairs drawn with its own
    seed, whole pairs per row; ``share`` of the rows). In pair rows premise and hypothesis tokens are masked
    with their own probabilities (``premise_mask_probability``, ``hypothesis_mask_probability``), corpus rows
    with ``training.mask_probability``. Held out: the corpus's held-out rows and the pair text's test pairs."""
    encoder = settings.encoder
    pair_text = encoder.pair_text
    width = settings.n_ctx  # whole pairs per row of the encoder's context; corpus rows padded to it
    corpus_rows = _right_padded(np.asarray(train_sequences["input_ids"]), width, tokenizer)
    corpus_heldout = _right_padded(np.asarray(heldout_sequences["input_ids"]), width, tokenizer)
    entry = {
        "family": "bridge",
        "objective": "masked",
        "seed": encoder.seed,
        "architecture": dict(encoder.architecture),
        "training": encoder.training.model_dump(exclude_unset=True, exclude={"seed"}),
    }
    config = zoo_config(ENCODER_NAME, entry, tokenizer, width)
    training = training_config({}, entry)
    text = generate_pairs(
        settings.pairs_config(n_train=pair_text.n_pairs, n_test=64, n_ood_per_subcase=1, seed=pair_text.seed)
    )
    pair_rows, is_hypothesis = pack_pairs(text[text["split"] == "train"], tokenizer, width)
    pair_rates = np.where(is_hypothesis, pair_text.hypothesis_mask_probability, pair_text.premise_mask_probability)
    heldout_pairs, _ = pack_pairs(text[text["split"] == "test"], tokenizer, width)
    share = pair_text.share
    rows = mix_rows(corpus_rows, pair_rows, share)
    rates = mix_rows(np.full(corpus_rows.shape, training.mask_probability), pair_rates, share)
    heldout = np.concatenate([corpus_heldout[: len(heldout_pairs)], heldout_pairs])
    with torch_threads(settings.threads), progress_label(ENCODER_NAME):
        module, curve = train_zoo_model(
            config, training, rows, heldout, tokenizer, default_device(settings.device), mask_rates=rates, padded=True
        )
    logger.info(
        "nli encoder: %d rows (%d of pair text), held-out MLM loss %.3f",
        len(rows),
        len(rows) - (0 if share == 1 else len(corpus_rows)),
        float(curve["heldout_loss"].iloc[-1]),
    )
    return state_dict_for_saving(module), config, curve


def _right_padded(rows: np.ndarray, width: int, tokenizer) -> np.ndarray:
    """Corpus rows right-padded with the pad token to ``width`` (the encoder's ``nli.n_ctx``)."""
    if rows.shape[1] > width:
        raise ValueError(f"nli.n_ctx={width} is shorter than the corpus rows ({rows.shape[1]} tokens); raise nli.n_ctx")
    return np.pad(rows, ((0, 0), (0, width - rows.shape[1])), constant_values=tokenizer.pad_token_id)


def _finetune(
    pairs: pd.DataFrame, tokenizer, weights, config, settings: NLIParameters, name: str, seeds: tuple[int, int]
):
    """One copy fine-tuned on the train split (``nli.finetune`` with ``seeds``), then its predictions for the test
    and OOD pairs (in the order of ``pairs`` without its train rows), pairs encoded to ``nli.n_ctx`` tokens."""
    encoded = encode_pairs(pairs, tokenizer, settings.n_ctx)
    train = (pairs["split"] == "train").to_numpy()
    device = default_device(settings.device)
    with torch_threads(settings.threads):
        weights_c, config_c, curve = finetune_classifier(
            weights,
            config,
            {k: v[train] for k, v in encoded.items()},
            name,
            LABELS,
            settings.finetune_config(seeds),
            device,
            progress=settings.progress,
        )
        handle = load_classifier(weights_c, config_c, tokenizer, device=device)
        predicted = predict_labels(handle, encoded["input_ids"][~train], encoded["attention_mask"][~train])
    return weights_c, config_c, curve, predicted


def finetune_copy(
    pairs: pd.DataFrame,
    tokenizer,
    encoder_weights: dict[str, torch.Tensor],
    encoder_config: dict[str, Any],
    *,
    settings: NLIParameters,
    name: str,
    index: int,
):
    """Copy ``index`` (seeds ``copy_seeds(nli.n_copies, nli.seed)[index]``): weights and config (a zoo config
    with a ``classifier`` entry), training curve, accuracy table and per-pair predictions."""
    seeds = copy_seeds(settings.n_copies, settings.seed)[index]
    weights, config, curve, predicted = _finetune(
        pairs, tokenizer, encoder_weights, encoder_config, settings, name, seeds
    )
    evaluated = pairs[pairs["split"] != "train"]
    table = accuracy_table(evaluated, predicted, name)
    logger.info(
        "%s: test accuracy %.3f, OOD non-entailed %.3f",
        name,
        table["accuracy"].iloc[0],
        table.set_index(["split", "subcase", "label"]).loc[("ood", "all", "non_entailed"), "accuracy"],
    )
    predictions = pd.DataFrame({"pair_id": evaluated["pair_id"].to_numpy(), "predicted": predicted})
    return weights, config, curve, table, predictions


def summarise_accuracy(
    pairs: pd.DataFrame, encoder_curve: pd.DataFrame, *tables_then_curves: pd.DataFrame, settings: NLIParameters
):
    """Every copy's accuracy table with the lexical-overlap baseline's rows, the groups (top / bottom k by OOD
    non-entailed accuracy), the distribution figure, and the encoder's and every copy's training curve in one
    table. Inputs after the encoder's curve: every copy's accuracy table, then every copy's curve."""
    n = len(tables_then_curves) // 2
    tables, curves = tables_then_curves[:n], tables_then_curves[n:]
    baseline = accuracy_table(pairs, heuristic_predictions(pairs), BASELINE)
    accuracy = pd.concat([*tables, baseline], ignore_index=True)
    training_curves = pd.concat(
        [encoder_curve.assign(stage="pretraining"), *(curve.assign(stage="fine-tuning") for curve in curves)],
        ignore_index=True,
    )
    k = group_size(settings.n_copies, settings.group_size)
    groups = split_groups(accuracy, k)
    baseline_row = accuracy_summary(baseline).iloc[0]
    return accuracy, groups, accuracy_figure(groups, baseline_row), training_curves


def sweep_fractions(
    groups: pd.DataFrame,
    tokenizer,
    encoder_weights: dict[str, torch.Tensor],
    encoder_config: dict[str, Any],
    *,
    settings: NLIParameters,
) -> pd.DataFrame:
    """The counterexample-fraction sweep, run exactly when ``nli.sweep.run`` is true: fine-tunes
    ``nli.sweep.n_copies`` copies at every ``nli.sweep.fractions`` counterexample fraction (pairs regenerated,
    same seeds) and tabulates their accuracies; otherwise a one-row table saying it was not asked for. Whether it
    runs never turns on a result (the copies' spread, which round-off on another CPU can move across
    ``nli.min_spread``): a spread below ``nli.min_spread`` only suggests it, in a log line. A sweep copy at the
    experiment's own fraction (``nli.pairs.counterexample_fraction``) has the same pairs and seeds as the
    experiment's copy of that index, so its row is that copy's accuracies from ``groups`` (named in the note)
    rather than a second, identical fine-tuning."""
    spread, minimum = ood_spread(groups), settings.min_spread
    spread_note = f"OOD non-entailed accuracy range {spread:.3f}, nli.min_spread = {minimum:g}"
    n_finetunes = len(settings.sweep.fractions) * settings.sweep.n_copies
    if not settings.sweep.run:
        if spread < minimum:
            logger.info(
                "nli: the copies do not spread (%s); nli.sweep.run: true sweeps the counterexample fraction "
                "(up to %d fine-tunes)",
                spread_note,
                n_finetunes,
            )
        note = f"nli.sweep.run is false ({spread_note})"
        return pd.DataFrame([{"status": "not_run", "note": note}], columns=SWEEP_COLUMNS)
    logger.info("nli sweep: up to %d fine-tunes (nli.sweep.fractions x nli.sweep.n_copies)", n_finetunes)
    fractions, n_copies = settings.sweep.fractions, settings.sweep.n_copies
    seeds = copy_seeds(n_copies, settings.seed)
    trained = _trained_copies(groups, settings)
    note = f"nli.sweep.run is true ({spread_note})"
    rows = []
    with progress_bar(len(fractions) * n_copies, "nli sweep", settings.progress) as bar:
        for fraction in fractions:
            pairs = None
            for i, copy_seed in enumerate(seeds):
                name = f"sweep_{fraction:g}_{i}"
                same = trained.get((fraction, copy_seed))
                if same is not None:
                    rows.append(
                        {
                            "status": "swept",
                            "note": f"{note}; the experiment's {same['model']} (same pairs and seeds)",
                            "counterexample_fraction": fraction,
                            **same,
                            "model": name,
                        }
                    )
                else:
                    if pairs is None:  # this fraction's pairs, made once, when a copy first needs them
                        pairs = generate_pairs(settings.pairs_config(counterexample_fraction=fraction))
                    *_, predicted = _finetune(
                        pairs, tokenizer, encoder_weights, encoder_config, settings, name, copy_seed
                    )
                    summary = accuracy_summary(accuracy_table(pairs[pairs["split"] != "train"], predicted, name))
                    rows.append(
                        {
                            "status": "swept",
                            "note": note,
                            "counterexample_fraction": fraction,
                            **summary.iloc[0].to_dict(),
                        }
                    )
                bar.update(1)
    return pd.DataFrame(rows, columns=SWEEP_COLUMNS)


def _trained_copies(
    groups: pd.DataFrame, settings: NLIParameters
) -> dict[tuple[float, tuple[int, int]], dict[str, Any]]:
    """The experiment's copies by (counterexample fraction, seeds): their model name and accuracies in ``groups``."""
    fraction = float(settings.pairs_config().counterexample_fraction)
    seeds = copy_seeds(settings.n_copies, settings.seed)
    by_name = groups.set_index("model")
    return {
        (fraction, seed): {"model": name, **by_name.loc[name, SWEEP_COLUMNS[4:]].to_dict()}
        for name, seed in zip(copy_names(len(seeds)), seeds)
        if name in by_name.index
    }


def _handles(names: list[str], weights_then_configs: tuple, tokenizer, device) -> dict[str, Any]:
    n = len(names)
    return {
        name: load_classifier(weights_then_configs[i], weights_then_configs[n + i], tokenizer, device=device, name=name)
        for i, name in enumerate(names)
    }


def stitching_data(
    pairs: pd.DataFrame, tokenizer, settings: NLIParameters
) -> tuple[dict[str, TokenSplit], dict[str, np.ndarray]]:
    """The labelled evaluation sets of stitching (``test`` and ``ood``, each at most
    ``nli.stitching.max_pairs``, stratified by subcase and label, encoded to ``nli.n_ctx`` tokens) and their
    pair ids."""
    stitching = settings.stitching
    data, ids = {}, {}
    for split in STITCH_DATA:
        part = stratified_subset(pairs[pairs["split"] == split], stitching.max_pairs, stitching.seed)
        encoded = encode_pairs(part, tokenizer, settings.n_ctx)
        data[split] = TokenSplit.of(encoded["input_ids"], encoded["attention_mask"], encoded["labels"], what=split)
        ids[split] = part["pair_id"].to_numpy()
    return data, ids


def stitch_from_copy(
    pairs: pd.DataFrame,
    tokenizer,
    *weights_configs_predictions,
    settings: NLIParameters,
    model_f: str,
    names: list[str],
) -> pd.DataFrame:
    """Identity stitching of copy ``model_f`` into every other copy at every layer (``nli.stitching.layers``;
    null: all), on the test and OOD pairs; g's own correctness comes from its saved predictions. Inputs: every
    copy's weights, then configs, then predictions, in ``names`` order."""
    n = len(names)
    stitching = settings.stitching
    device = default_device(settings.device)
    data, ids = stitching_data(pairs, tokenizer, settings)
    label_of = pairs.set_index("pair_id")["label_id"]
    own_correct = {}
    for i, name in enumerate(names):
        predicted = weights_configs_predictions[2 * n + i].set_index("pair_id")["predicted"]
        for split, pair_ids in ids.items():
            own_correct[(name, split)] = predicted.loc[pair_ids].to_numpy() == label_of.loc[pair_ids].to_numpy()
    with torch_threads(settings.threads):
        handles = _handles(names, weights_configs_predictions[: 2 * n], tokenizer, device)
        others = {name: handle for name, handle in handles.items() if name != model_f}
        layers = stitching.layers
        total = len(data) * len(others) * (len(layers) if layers else handles[model_f].n_layers + 1)
        with progress_bar(total, f"stitch {model_f}", settings.progress) as bar:
            return identity_stitch_table(
                handles[model_f],
                others,
                data,
                own_correct,
                layers,
                batch_size=stitching.batch_size,
                n_bootstrap=stitching.n_bootstrap,
                level=stitching.ci_level,
                seed=stitching.seed,
                on_stitch=lambda: bar.update(1),
            )


def summarise_stitching(groups: pd.DataFrame, *tables: pd.DataFrame, settings: NLIParameters):
    """All ordered pairs' stitching rows, their within/between-group means with CIs (``nli.stitching.ci_level``),
    and the figure."""
    stitches = pd.concat(tables, ignore_index=True)
    by_group = aggregate_stitching(stitches, groups, settings.stitching.ci_level)
    return stitches, by_group, stitching_figure(by_group)


def compare_copies_cka(
    pairs: pd.DataFrame,
    tokenizer,
    groups: pd.DataFrame,
    *weights_then_configs,
    settings: NLIParameters,
    cka: CKASettings,
    names: list[str],
):
    """CKA (``cka``: ``nli.cka`` on token rows) of every layer pair between the grouped copies on the
    in-distribution test tokens, then the CKA pipeline's group analysis
    (:func:`thinkalike.pipelines.cka.nodes.summarise_cka`): distances, the within/between-group distances (fig. 8)
    and per-layer curves with CIs (fig. 2b)."""
    grouped = groups[groups["group"].isin([GENERALIZING, HEURISTIC])]
    membership = dict(zip(grouped["model"], grouped["group"]))
    chosen = [name for name in names if name in membership]
    test = pairs[pairs["split"] == "test"]
    encoded = encode_pairs(test, tokenizer, settings.n_ctx)
    split = TokenSplit.of(encoded["input_ids"], encoded["attention_mask"], what="test pairs")
    device = default_device(settings.device)
    n = len(names)
    with torch_threads(settings.threads):
        activations = {}
        for name in chosen:
            i = names.index(name)
            handle = load_classifier(
                weights_then_configs[i], weights_then_configs[n + i], tokenizer, device=device, name=name
            )
            activations[name] = token_activations(handle, split, tokenizer)
        n_pairs = len(chosen) * (len(chosen) - 1) // 2
        with progress_bar(n_pairs, "nli CKA", settings.progress) as bar:
            tables = copies_cka_tables(activations, cka, on_pair=lambda: bar.update(1))
    # the CKA pipeline's summary: its first five outputs (later ones, e.g. per-pair heatmaps, are not kept here)
    summary = summarise_cka(*tables, settings=CKAParameters(estimation=cka, groups=membership))
    distances, distance_figure, group_distances, curves, curves_figure = summary[:5]
    return pd.concat(tables, ignore_index=True), distances, distance_figure, group_distances, curves, curves_figure


def write_report(
    accuracy: pd.DataFrame,
    groups: pd.DataFrame,
    sweep: pd.DataFrame,
    stitch_groups: pd.DataFrame,
    cka_curves: pd.DataFrame,
    cka_group_distances: pd.DataFrame,
    *,
    settings: NLIParameters,
    cka: CKASettings,
):
    """The markdown report (one sentence per figure computed from these tables, then the tables; the spread
    against ``nli.min_spread``, CKA's range of ``nli.cka.estimator``) and the experiment's figures as one plotly
    page for kedro-viz."""
    baseline = accuracy_summary(accuracy[accuracy["model"] == BASELINE]).iloc[0]
    spread = ood_spread(groups)
    estimator = cka.estimator
    sentences = {
        "Accuracy distribution (accuracy.png)": accuracy_sentence(groups, baseline, spread, settings.min_spread),
        "Counterexample-fraction sweep": sweep_sentence(sweep),
        "Identity stitching, in distribution (stitching.png, left; Brown et al. fig. 2a)": stitching_sentence(
            stitch_groups, "test"
        ),
        "Identity stitching, out of distribution (stitching.png, right; fig. 7)": stitching_sentence(
            stitch_groups, "ood"
        ),
        "CKA per layer (cka_group_curves.png; fig. 2b)": cka_sentence(cka_curves),
        "CKA distances (cka_distances.png; fig. 8)": distance_sentence(cka_group_distances),
    }
    per_subcase = accuracy[accuracy["split"] == "ood"].pivot_table(
        index="model", columns=["subcase", "label"], values="accuracy", sort=False
    )
    per_subcase.columns = [f"{subcase}/{label}" for subcase, label in per_subcase.columns]
    tables = {
        "Copies by OOD non-entailed accuracy": groups,
        "OOD accuracy per subcase and label": per_subcase.reset_index(),
        "Identity stitching by group (accuracy penalty, t interval across pairs)": stitch_groups,
        f"CKA by group and relative depth ({estimator})": cka_curves,
        "Arccos-CKA distance by group": cka_group_distances,
    }
    report = markdown_report(sentences, tables, FIGURES) + f"\nCKA value range: {CKA_RANGES[estimator]}.\n"
    return report, experiment_plotly(groups, baseline, stitch_groups, cka_curves)
