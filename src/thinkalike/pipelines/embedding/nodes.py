"""Thin nodes of the ``embedding`` pipeline: per model readings and keep-k, per pair alignment, fine-tune diffs
and zero-shot stitching, then a summary (the maths is in :mod:`thinkalike.embedding`).

Their settings are the ``embedding`` section parsed once by the pipeline builder
(:class:`~thinkalike.pipelines.embedding.schema.EmbeddingParameters`, where every default lives) and bound to the
nodes as ``settings``; the fine-tuning nodes also get the parsed ``corpus`` section
(``CorpusParameters``) as ``corpus``."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd
import torch

from thinkalike.embedding import (
    align_layers,
    check_k,
    check_same_vocabulary,
    extract_parameters,
    ff_value_pool,
    figures,
    keep_k_scores,
    knowledge_lookup,
    read_head_interactions,
    read_vectors,
    readings_report,
    residual_pool,
    vocabulary_embedding,
)
from thinkalike.embedding.finetune_diff import (
    TASK_WORDS,
    ZERO_SHOT_COLUMNS,
    diff_readings,
    encode_sentences,
    feature_token_ids,
    finetune_top_layers,
    finetuned_layers,
    task_labels,
    zero_shot_scores,
)
from thinkalike.embedding.overlap import auto_k, pair_overlap, summarise_overlap
from thinkalike.embedding.selection import select_blocks, select_heads
from thinkalike.embedding.token_structure import STRUCTURE_COLUMNS, corpus_pos_lexicon, token_classes
from thinkalike.embedding.token_structure import token_structure as pos_coherence
from thinkalike.language.grammar import lexicon_words
from thinkalike.models.activation_store import ActivationStore
from thinkalike.models.finetune import predict_labels
from thinkalike.models.handle import ModelHandle, default_device
from thinkalike.models.sources import load_classifier, load_model, load_saved_zoo_model, zoo_target
from thinkalike.pipelines.corpus.schema import CorpusParameters
from thinkalike.pipelines.embedding.schema import EmbeddingParameters, ReadingsParameters
from thinkalike.threads import torch_threads

logger = logging.getLogger(__name__)
DTYPES = {"float32": torch.float32, "float64": torch.float64}


def model_handle(settings: EmbeddingParameters, model: str, spec: str, *sources: Any) -> ModelHandle:
    """The handle of ``model``: a zoo spec from its saved ``(weights, config, tokenizer)``, any other spec loaded
    itself."""
    device = default_device(settings.device)
    if spec.startswith("zoo:"):
        weights, config, tokenizer = sources
        return load_saved_zoo_model(weights, config, tokenizer, name=model, spec=spec, device=device)
    return load_model(spec, name=model, device=device)


def zoo_handle(
    settings: EmbeddingParameters, model: str, weights: dict[str, torch.Tensor], config: dict[str, Any], tokenizer
) -> ModelHandle:
    """The handle of the trained zoo model ``model`` from its saved weights and config."""
    return load_saved_zoo_model(weights, config, tokenizer, name=model, device=default_device(settings.device))


def _embedding_of(handle: ModelHandle, settings: EmbeddingParameters) -> torch.Tensor:
    return vocabulary_embedding(handle, allow_input_embedding=settings.allow_input_embedding)


def _check_ks(settings: EmbeddingParameters, vocabulary: int, model: str) -> None:
    """Every configured k against this model's V, before any compute (the message names the key); ``keep_k.ks``
    null is the default grid, which stays within V by construction."""
    checks: list[tuple[str, int | list[int]]] = [
        ("readings.k", settings.readings.k),
        ("readings.pair_k", settings.readings.pair_k),
        ("lookup.k_tokens", settings.lookup.k_tokens),
    ]
    if settings.keep_k.ks is not None:
        checks.append(("keep_k.ks", settings.keep_k.ks))
    if isinstance(settings.overlap.k, int):  # auto stays within V by construction
        checks.append(("overlap.k", settings.overlap.k))
    if isinstance(settings.token_structure.k, int):
        checks.append(("token_structure.k", settings.token_structure.k))
    for key, k in checks:
        check_k(k, vocabulary, f"embedding.{key} ({model}, V={vocabulary})")


def lookup_tokens(tokenizer: Any, words: list[str], key: str) -> list[int]:
    """Token ids of a knowledge-lookup set: a word that is one vocabulary token gives its id, any other word the
    ids of its pieces (``tokenizer(word)``); a word with no token is an error naming ``key``."""
    if tokenizer is None:
        raise ValueError(f"{key}: the model has no tokenizer to look the words up in")
    vocabulary = tokenizer.get_vocab()
    ids: list[int] = []
    for word in words:
        pieces = [vocabulary[word]] if word in vocabulary else tokenizer(word, add_special_tokens=False)["input_ids"]
        if not pieces:
            raise ValueError(f"{key}: {word!r} has no token in the model's vocabulary")
        ids.extend(int(piece) for piece in pieces)
    return list(dict.fromkeys(ids))


def report_selection(parameters, readings: ReadingsParameters) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """Neurons (per layer, the ``report_neurons`` FF neurons of largest ‖value‖) and heads (the first
    ``report_heads``) shown in the markdown report."""
    neurons, heads = {}, {}
    for position, layer in enumerate(parameters.layers):
        if parameters.has("FF_value"):
            norms = parameters.vectors("FF_value", position).norm(dim=1)
            neurons[layer] = norms.topk(min(readings.report_neurons, len(norms))).indices.tolist()
        if parameters.has("W_VO"):
            n_heads = parameters.interaction_factors("W_VO", position)[0].shape[0]
            heads[layer] = list(range(min(readings.report_heads, n_heads)))
    return neurons, heads


def read_model(*sources: Any, settings: EmbeddingParameters, model: str, spec: str):
    """Readings of every FF key/value and head, the knowledge lookup of each token set, a markdown report."""
    handle = model_handle(settings, model, spec, *sources)
    matrix = _embedding_of(handle, settings)
    _check_ks(settings, matrix.shape[1], model)
    readings, lookup = settings.readings, settings.lookup
    token_sets = {
        name: lookup_tokens(handle.tokenizer, list(words), f"embedding.lookup.token_sets.{name}")
        for name, words in lookup.token_sets.items()
    }
    dtype = DTYPES[settings.dtype]
    blocks = select_blocks(handle.n_layers, readings.layers, what=f"embedding.readings.layers ({model})")
    head_ids = select_heads(
        handle.dims.n_heads, len(blocks), readings.heads, what=f"embedding.readings.heads ({model})"
    )
    if len(blocks) < handle.n_layers or len(head_ids) < handle.dims.n_heads:
        logger.info(
            "embedding %s: reading blocks %s of %d and heads %s of %d (embedding.readings.layers / heads)",
            model,
            blocks,
            handle.n_layers,
            head_ids,
            handle.dims.n_heads,
        )
    with torch_threads(settings.threads):
        parameters = extract_parameters(handle, blocks)
        vectors = read_vectors(
            parameters, matrix, k=readings.k, tokenizer=handle.tokenizer, groups=readings.groups, dtype=dtype
        )
        pairs = read_head_interactions(
            parameters,
            matrix,
            k=readings.pair_k,
            e_prime=readings.e_prime,
            groups=readings.interactions,
            tokenizer=handle.tokenizer,
            dtype=dtype,
            heads={block: head_ids for block in blocks},
            exclude_same_token=readings.exclude_same_token,
            progress=settings.progress,
        )
        lookups = [
            knowledge_lookup(
                parameters,
                matrix,
                tokens,
                group=lookup.group,
                top=lookup.top,
                k_tokens=lookup.k_tokens,
                tokenizer=handle.tokenizer,
                dtype=dtype,
            ).assign(token_set=name)
            for name, tokens in token_sets.items()
        ]
    table = (
        pd.concat(lookups, ignore_index=True)
        if lookups
        else pd.DataFrame(columns=["model", "layer", "group", "neuron", "rank", "score", "top_tokens", "token_set"])
    )
    neurons, heads = report_selection(parameters, readings)
    chosen_vectors = vectors[[n in neurons.get(layer, ()) for layer, n in zip(vectors["layer"], vectors["neuron"])]]
    chosen_pairs = pairs[[h in heads.get(layer, ()) for layer, h in zip(pairs["layer"], pairs["head"])]]
    notes = [f"> {reason}" for group in ("W_VO", "FF_value") if (reason := parameters.missing_reason(group))]
    report = readings_report(
        chosen_vectors,
        chosen_pairs,
        lookup=None,
        max_rows=readings.report_rows,
        title=f"{model} ({spec}) in embedding space (E′ = {readings.e_prime})",
    )
    for name, part in table.groupby("token_set", sort=False):
        report += "\n" + readings_report(lookup=part, title=f"Knowledge lookup: {name}").split("\n", 1)[1]
    return vectors, pairs, table, "\n".join([*notes, "", report]) if notes else report


def read_blocks(handle: ModelHandle, settings: EmbeddingParameters, model: str) -> list[int]:
    """The blocks of ``model`` whose parameters keep-k, the overlap and the token structure read
    (``embedding.blocks``; null: every one); a ``ValueError`` naming the setting for a block the model lacks."""
    return select_blocks(handle.n_layers, settings.blocks, what=f"embedding.blocks ({model})")


def residual_rows(store: ActivationStore, limit: int) -> torch.Tensor:
    """Residual states of the store's block outputs (stored layers ≥ 1), up to ``limit`` rows, shard by shard."""
    keep = [i for i, layer in enumerate(store.layers) if layer >= 1]
    rows, count = [], 0
    for batch in store:
        chunk = residual_pool(batch.tokens()[keep])
        rows.append(chunk)
        count += len(chunk)
        if count >= limit:
            break
    return torch.cat(rows)[:limit]


def measure_keep_k(
    store: ActivationStore | None, *sources: Any, settings: EmbeddingParameters, model: str, spec: str
) -> tuple[pd.DataFrame]:
    """keep-k scores (``distribution, variant, e_prime, k, n, score, condition_number``, and ``vocabulary``: V; the
    summary draws them), as a one-table tuple (the node's single output)."""
    handle = model_handle(settings, model, spec, *sources)
    matrix = _embedding_of(handle, settings)
    _check_ks(settings, matrix.shape[1], model)
    keep = settings.keep_k
    parameters = extract_parameters(handle, read_blocks(handle, settings, model))
    pools: dict[str, torch.Tensor | None] = {}
    for distribution in keep.distributions:
        if distribution == "normal":
            pools["normal"] = None
        elif distribution == "ff_values" and parameters.has("FF_value"):
            pools["ff_values"] = ff_value_pool([parameters.vectors("FF_value", p) for p in range(parameters.n_layers)])
        elif distribution == "residual" and store is not None:
            pools["residual"] = residual_rows(store, keep.residual_rows)
    with torch_threads(settings.threads):
        scores = keep_k_scores(
            matrix, pools, ks=keep.ks, e_primes=keep.e_primes, n=keep.n, seed=keep.seed, dtype=DTYPES[settings.dtype]
        )
    scores.insert(0, "model", model)
    scores["vocabulary"] = matrix.shape[1]  # V: k = V keeps every coordinate
    return (scores,)


def key_value_overlap(*sources: Any, settings: EmbeddingParameters, model: str, spec: str) -> tuple[pd.DataFrame]:
    """Per block and pair kind, the Jaccard overlap of the top-k tokens of corresponding FF key/value, W_V/W_O and
    W_Q/W_K vectors against random pairings (appendix B, fig. 6; columns
    :data:`~thinkalike.embedding.overlap.OVERLAP_COLUMNS`), as a one-table tuple (the node's single output)."""
    handle = model_handle(settings, model, spec, *sources)
    matrix = _embedding_of(handle, settings)
    _check_ks(settings, matrix.shape[1], model)
    overlap = settings.overlap
    k = overlap.k if isinstance(overlap.k, int) else auto_k(matrix.shape[1])
    with torch_threads(settings.threads):
        table = pair_overlap(
            extract_parameters(handle, read_blocks(handle, settings, model)),
            matrix,
            k=k,
            n_random=overlap.n_random,
            seed=overlap.seed,
            dtype=DTYPES[settings.dtype],
        )
    return (table,)


def token_structure(*sources: Any, settings: EmbeddingParameters, model: str, spec: str) -> tuple[pd.DataFrame]:
    """Per block and vector group, the part-of-speech coherence of the vectors' top-k tokens of ``+v·E`` against
    the chance of random token sets and of Gaussian vectors (columns
    :data:`~thinkalike.embedding.token_structure.STRUCTURE_COLUMNS`), as a one-table tuple (the node's single
    output). Tokens are labelled through the corpus tokenizer (a zoo model's third source) and the grammar's
    lexicon; a model with another vocabulary (a hub spec) gets an empty table and a logged note."""
    if zoo_target(spec) is None:
        logger.info(
            "embedding token structure %s (%s): its vocabulary is its own tokenizer's, not the grammar's corpus "
            "tokenizer's, so no token has a grammar part of speech — empty table",
            model,
            spec,
        )
        return (pd.DataFrame(columns=STRUCTURE_COLUMNS),)
    handle = model_handle(settings, model, spec, *sources)
    matrix = _embedding_of(handle, settings)
    _check_ks(settings, matrix.shape[1], model)
    structure = settings.token_structure
    k = structure.k if isinstance(structure.k, int) else auto_k(matrix.shape[1])
    labels, classes = token_classes(sources[2], corpus_pos_lexicon(), matrix.shape[1])
    with torch_threads(settings.threads):
        table = pos_coherence(
            extract_parameters(handle, read_blocks(handle, settings, model)),
            matrix,
            labels,
            k=k,
            n_classes=len(classes),
            groups=structure.groups,
            n_random=structure.n_random,
            seed=structure.seed,
            dtype=DTYPES[settings.dtype],
        )
    logger.info(
        "embedding token structure %s: %d of %d tokens labelled; POS coherence of the top-%d tokens, mean over "
        "layers (chance %.3f, Gaussian vectors %.3f): %s",
        model,
        int((labels >= 0).sum()),
        matrix.shape[1],
        k,
        table["chance"].iloc[0] if len(table) else float("nan"),
        table["random_vector_mean"].iloc[0] if len(table) else float("nan"),
        table.groupby("group", sort=False)["coherence_mean"].mean().round(3).to_dict(),
    )
    return (table,)


def align_pair(
    *sources: Any, settings: EmbeddingParameters, model_a: str, spec_a: str, model_b: str, spec_b: str, n_sources_a: int
):
    """Similarity (long table; the summary draws its heatmaps) and matching of every group and space."""
    handle_a = model_handle(settings, model_a, spec_a, *sources[:n_sources_a])
    handle_b = model_handle(settings, model_b, spec_b, *sources[n_sources_a:])
    matrix_a, matrix_b = _embedding_of(handle_a, settings), _embedding_of(handle_b, settings)
    check_same_vocabulary(handle_a, handle_b, matrix_a, matrix_b)
    with torch_threads(settings.threads):
        similarity, matches = align_layers(
            extract_parameters(handle_a),
            extract_parameters(handle_b),
            matrix_a,
            matrix_b,
            groups=settings.alignment.groups,
            spaces=settings.alignment.spaces,
        )
    return similarity, matches


def finetune_model(
    weights: dict[str, torch.Tensor],
    config: dict[str, Any],
    tokenizer,
    train_sentences: pd.DataFrame,
    *,
    settings: EmbeddingParameters,
    corpus: CorpusParameters,
    model: str,
):
    """Fine-tunes the top layers + a class head on ``embedding.finetune.task``; ΔW and head rows read as tokens,
    the fraction of feature tokens among their top-k against random rows."""
    finetune = settings.finetune
    task, top = finetune.task, finetune.top_layers
    labels = task_labels(task)
    train = encode_sentences(train_sentences, tokenizer, corpus.n_ctx, task, limit=finetune.n_train, seed=finetune.seed)
    base = zoo_handle(settings, model, weights, config, tokenizer)
    matrix = _embedding_of(base, settings)
    check_k(finetune.top_k, matrix.shape[1], f"embedding.finetune.top_k ({model})")
    with torch_threads(settings.threads):
        tuned_weights, tuned_config, curve = finetune_top_layers(
            weights,
            config,
            train,
            f"{model}_{task}",
            labels,
            finetune.config(),
            top,
            default_device(settings.device),
            progress=settings.progress,
        )
    tuned = load_classifier(tuned_weights, tuned_config, tokenizer, device=base.device, name=f"{model}_{task}")
    layers = finetuned_layers(base.n_layers, top)
    features = feature_token_ids(tokenizer, frozenset().union(*TASK_WORDS[task].values()), lexicon_words())
    readings, fractions = diff_readings(
        extract_parameters(base, layers),
        extract_parameters(tuned, layers),
        tuned.unembedding_matrix().T.detach(),
        matrix,
        features,
        model=model,
        task=task,
        k=finetune.top_k,
        n_rows=finetune.n_rows,
        n_random=finetune.n_random,
        seed=finetune.seed,
        tokenizer=tokenizer,
    )
    logger.info(
        "embedding fine-tune %s on %s: feature-token fraction %s",
        model,
        task,
        fractions.groupby("source")["feature_fraction"].mean().round(3).to_dict(),
    )
    return tuned_weights, tuned_config, curve, readings, fractions


def zero_shot_pair(
    tuned_weights: dict[str, torch.Tensor],
    tuned_config: dict[str, Any],
    heldout_sentences: pd.DataFrame,
    tokenizer,
    weights_a,
    config_a,
    weights_b,
    config_b,
    *,
    settings: EmbeddingParameters,
    corpus: CorpusParameters,
    model_a: str,
    model_b: str,
) -> tuple[pd.DataFrame]:
    """Accuracy, balanced accuracy and AUROC of fine-tuned A fed B's first ℓ layers mapped by ``E_B E_A⁺``, for
    every ℓ; A's own accuracy and
    the majority-class rate beside it (a one-table tuple: the node's single output)."""
    finetune = settings.finetune
    task = finetune.task
    evaluation = encode_sentences(
        heldout_sentences, tokenizer, corpus.n_ctx, task, limit=finetune.n_eval, seed=finetune.seed + 1
    )
    base_a = zoo_handle(settings, model_a, weights_a, config_a, tokenizer)
    handle_b = zoo_handle(settings, model_b, weights_b, config_b, tokenizer)
    matrix_a, matrix_b = _embedding_of(base_a, settings), _embedding_of(handle_b, settings)
    check_same_vocabulary(base_a, handle_b, matrix_a, matrix_b)
    tuned = load_classifier(tuned_weights, tuned_config, tokenizer, device=base_a.device, name=f"{model_a}_{task}")
    with torch_threads(settings.threads):
        own = float(
            np.mean(
                predict_labels(tuned, evaluation["input_ids"], evaluation["attention_mask"]) == evaluation["labels"]
            )
        )
        scores = zero_shot_scores(
            tuned,
            handle_b,
            matrix_a,
            matrix_b,
            evaluation["input_ids"],
            evaluation["attention_mask"],
            evaluation["labels"],
        )
    chance = float(np.bincount(evaluation["labels"]).max() / len(evaluation["labels"]))
    return (
        pd.DataFrame(
            [
                {
                    "model_a": model_a,
                    "model_b": model_b,
                    "task": task,
                    "layers_from_b": layer,
                    **value,
                    "own_accuracy": own,
                    "chance": chance,
                    "n_sentences": len(evaluation["labels"]),
                }
                for layer, value in scores.items()
            ],
            columns=ZERO_SHOT_COLUMNS,
        ),
    )


def _concat(tables: list[pd.DataFrame]) -> pd.DataFrame:
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()


def summarise_embedding(
    *inputs: Any, models: list[str], pairs: list[tuple[str, str]], finetuned: list[str], n_zero_shot: int
):
    """Every model's keep-k scores, every pair's matches, every fine-tune's fractions and zero-shot accuracies and
    the two summary figures; then every model's keep-k figure (``<model>.png``) and every pair's alignment heatmaps
    (``<a>__<b>.png``); and the per-model and per-pair tables in one each (a ``model`` column tells them apart):
    alignment similarities, readings of FF vectors and of head pairs, knowledge lookups, the markdown reports (one
    section per model), fine-tuning curves and top tokens, key–value overlaps, token structures.

    ``inputs``, each kind in the order of its names: per model (``models``) keep-k scores, vectors, head pairs,
    lookups, reports, key–value overlaps and token structures; per alignment pair (``pairs``) matches and similarities; per fine-tuned
    model (``finetuned``) feature fractions, curves and top tokens; then ``n_zero_shot`` zero-shot tables."""
    sizes = [len(models)] * 7 + [len(pairs)] * 2 + [len(finetuned)] * 3 + [n_zero_shot]
    starts = np.cumsum([0, *sizes])
    (
        keep_k_tables,
        vectors,
        head_pairs,
        lookups,
        reports,
        overlap_tables,
        structure_tables,
        match_tables,
        similarities,
        fraction_tables,
        curves,
        top_tokens,
        zero_shot_tables,
    ) = (list(inputs[start : start + size]) for start, size in zip(starts, sizes))
    keep_k, matches, fractions = _concat(keep_k_tables), _concat(match_tables), _concat(fraction_tables)
    zero_shot = _concat(zero_shot_tables)
    if zero_shot.empty:
        zero_shot = pd.DataFrame(columns=ZERO_SHOT_COLUMNS)
    if not matches.empty:
        diagonal = matches.pivot_table(index="group", columns="space", values="diagonal_fraction", aggfunc="mean")
        logger.info("embedding alignment: mean diagonal-match fraction per group\n%s", diagonal.round(3).to_string())
    overlap = _concat(overlap_tables)
    if not overlap.empty:
        means = summarise_overlap(overlap).pivot_table(index="model", columns="pair", values="difference")
        logger.info(
            "embedding key-value overlap: matched − random Jaccard, mean over layers\n%s", means.round(4).to_string()
        )
    structure = _concat([table for table in structure_tables if not table.empty])
    if structure.empty:
        structure = pd.DataFrame(columns=STRUCTURE_COLUMNS)
    else:
        means = structure.pivot_table(index="model", columns="group", values="difference", aggfunc="mean")
        logger.info(
            "embedding token structure: POS coherence of top tokens − chance, mean over layers\n%s",
            means.round(4).to_string(),
        )
    alignment_figures = {
        f"{a}__{b}.png": figures.alignment_figure(similarity, a, b) for (a, b), similarity in zip(pairs, similarities)
    }
    finetune_curves = _concat([curve.assign(model=model) for model, curve in zip(finetuned, curves)])
    return (
        keep_k,
        matches,
        fractions,
        zero_shot,
        figures.alignment_summary_figure(matches),
        figures.zero_shot_figure(zero_shot),
        {f"{model}.png": figures.keep_k_figure(table, model) for model, table in zip(models, keep_k_tables)},
        alignment_figures,
        _concat(similarities),
        _concat(vectors),
        _concat(head_pairs),
        _concat(lookups),
        "\n\n".join(reports),
        finetune_curves,
        _concat(top_tokens),
        overlap,
        structure,
    )
