"""The timing paragraph of the findings: the corpus, the zoo and every pipeline's time from the run's
``run_timings`` table, against :data:`RUN_BUDGET_SECONDS` (:mod:`thinkalike.reports.findings`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from thinkalike.reports.findings.claims import Claim
from thinkalike.reports.findings.text import (
    as_float,
    code_text,
    int_text,
    ints_text,
    list_text,
    missing_section,
    number_text,
    plural_text,
    seconds_text,
    table_of,
)
from thinkalike.run_record.clock import RUN_PIPELINE, START_ROW, TOTAL, most_at_once, pipeline_totals

#: The default run's time budget on 2 idle CPU cores (the README's "two commands" promise; issues 19 and 21 set it
#: at 10 minutes with the scaling family, every measure and the report).
RUN_BUDGET_SECONDS = 10 * 60


def _controls(mlem: Mapping[str, Any]) -> str:
    """ " and N untrained control(s)" when MLEM also fitted untrained controls, else ""."""
    controls = mlem.get("untrained") or []
    return f" and {plural_text(len(controls), 'untrained control')}" if controls else ""


def collect_corpus(tables: Mapping[str, Any]) -> dict[str, Any]:
    """The corpus numbers the findings quote (``corpus_statistics``)."""
    statistics = tables.get("corpus_statistics")
    if not isinstance(statistics, Mapping):
        return missing_section("corpus_statistics")
    return {
        key: statistics.get(key)
        for key in (
            "n_sentences",
            "vocab_size",
            "n_train_sequences",
            "n_heldout_sequences",
            "n_evaluation_texts",
            "n_evaluation_tokens",
            "unigram_entropy_nats",
        )
    }


def collect_zoo(tables: Mapping[str, Any], parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The zoo's composition and every model's margin below the unigram entropy (``zoo_summary``)."""
    summary = table_of(tables, "zoo_summary")
    if summary is None or summary.empty:
        return missing_section("zoo_summary")
    margin = (parameters.get("zoo") or {}).get("baseline_margin")
    return {
        "n_models": len(summary),
        "models": list(summary["model"]),
        "min_improvement": as_float(summary["improvement"].min()),
        "max_improvement": as_float(summary["improvement"].max()),
        "n_beat_margin": int(summary["beats_baseline"].astype(bool).sum()),
        "margin": as_float(margin),
        "steps": {str(m): int(s) for m, s in zip(summary["model"], summary["steps"])},
    }


def collect_timing(tables: Mapping[str, Any]) -> dict[str, Any]:
    """Every pipeline's time, the run's total, its date, machine and peak memory (``run_timings``)."""
    table = table_of(tables, "run_timings")
    if table is None or table.empty:
        return missing_section("run_timings")
    totals = pipeline_totals(table)
    pipelines = {
        str(row["pipeline"]): {"seconds": as_float(row["seconds"], 3), "nodes": int(row["nodes"])}
        for row in totals.to_dict("records")
        if row["pipeline"] not in (RUN_PIPELINE, TOTAL)
    }
    total = totals[totals["pipeline"] == TOTAL].iloc[0]
    started = pd.to_datetime(table["started_at"], utc=True)
    nodes = table[table["node"] != START_ROW]
    function = nodes["node"].astype(str).str.rsplit(".", n=1).str[-1]
    nli = nodes["pipeline"] == "nli"
    parts = {
        "encoder": ["pretrain_encoder"],
        "copies": ["finetune_copy"],
        "stitching": ["stitch_from_copy", "summarise_stitching"],
    }
    nli_parts = {
        part: as_float(nodes.loc[nli & function.isin(names), "span_seconds"].sum(), 3) for part, names in parts.items()
    }
    named = [name for names in parts.values() for name in names]
    nli_parts["rest"] = as_float(nodes.loc[nli & ~function.isin(named), "span_seconds"].sum(), 3)
    workers = nodes["worker"].fillna("").astype(str) if "worker" in nodes else pd.Series([], dtype=str)
    return {
        "date": started.min().strftime("%Y-%m-%d"),
        "started_at": started.min().isoformat(),
        "workers": int(workers[workers != ""].nunique()),
        "most_at_once": most_at_once(nodes),
        "total_seconds": as_float(total["seconds"], 3),
        "peak_rss_mb": as_float(table["peak_rss_mb"].max(), 1),
        "failed_nodes": int((table["status"] == "failed").sum()),
        "pipelines": pipelines,
        "nli_parts": nli_parts if nli.any() else None,
    }


def _zoo_composition(findings: Mapping[str, Any]) -> str:
    roles = findings["roles"]
    parts = []
    depths = sorted({p["depth"] for p in roles["solu_gelu"]})
    if depths:
        parts.append(f"SoLU and GeLU bridges at {list_text([str(d) for d in depths])} layers with different seeds")
    if roles["control"]:
        parts.append(
            "a SoLU with GeLU's seed as a control"
            if len(roles["control"]) == 1
            else f"{len(roles['control'])} SoLUs with GeLU's seed as controls"
        )
    replicas = [g for g in roles["replicas"] if g["kind"] in ("gelu", "solu")]
    if replicas:
        parts.append(
            list_text([f"{len(g['models'])} {g['depth']}-layer" for g in replicas]) + " GeLU seed replicas"
            if all(g["kind"] == "gelu" for g in replicas)
            else list_text([f"{len(g['models'])} {g['depth']}-layer {g['kind']}" for g in replicas]) + " seed replicas"
        )
    if roles["gpt_neox"]:
        text = (
            f"a GPT-NeoX family of {len(roles['gpt_neox'])} sizes"
            if len(roles["gpt_neox"]) > 1
            else f"a GPT-NeoX model ({code_text(roles['gpt_neox'][0])})"
        )
        if roles["gpt_neox_odd"]:
            text += " of which " + list_text(
                [f"{code_text(m)} has head dimension {roles['gpt_neox_head_dims'][m]}" for m in roles["gpt_neox_odd"]]
            )
        twins = roles.get("gpt_neox_twins") or {}
        if twins:
            text += (
                " ("
                + list_text(
                    [
                        f"and {code_text(twin)}, its twin of head dimension {roles['gpt_neox_head_dims'][twin]}"
                        for twin in twins.values()
                    ]
                )
                + ")"
            )
        parts.append(text)
    if roles["encoders"]:
        parts.append(
            "a BERT-style masked-LM encoder"
            if len(roles["encoders"]) == 1
            else f"{len(roles['encoders'])} masked-LM encoders"
        )
    if roles["mamba"]:
        parts.append("a Mamba" if len(roles["mamba"]) == 1 else f"{len(roles['mamba'])} Mambas")
    if roles["others"]:
        parts.append(list_text([code_text(m) for m in roles["others"]]))
    return list_text(parts)


#: How the timing paragraph names a pipeline's time: findings → (the words before its time, the words after it).
TimingLabel = Callable[[Mapping[str, Any]], tuple[str, str]]


def zoo_timing_label(findings: Mapping[str, Any]) -> tuple[str, str]:
    """The zoo: its models, what they are and how far below the unigram entropy they got."""
    zoo = findings.get("zoo") or {}
    if "n_models" not in zoo:
        return "zoo", ""
    return f"zoo of {plural_text(zoo['n_models'], 'model')}", f" ({_zoo_composition(findings)}), " + _zoo_margin(zoo)


def stitching_timing_label(findings: Mapping[str, Any]) -> tuple[str, str]:
    """Stitching: its stitches, how many were trained and on how many tokens."""
    stitching = findings.get("stitching") or {}
    if "n_stitches" not in stitching:
        return "stitching", ""
    return (
        f"stitching ({int_text(stitching['n_stitches'])} stitches, {int_text(stitching['n_trained'])} of them "
        f"trained on {ints_text(stitching['train_tokens'])} tokens)",
        "",
    )


def cka_timing_label(findings: Mapping[str, Any]) -> tuple[str, str]:
    """CKA: its pairs."""
    cka = findings.get("cka") or {}
    return (f"CKA of {plural_text(cka['n_pairs'], 'pair')}" if "n_pairs" in cka else "CKA"), ""


def mlem_timing_label(findings: Mapping[str, Any]) -> tuple[str, str]:
    """MLEM: its models and untrained controls, and their layers in all."""
    mlem = findings.get("mlem") or {}
    if "n_models" not in mlem:
        return "MLEM", ""
    layers = mlem["n_layers"] + sum(c["n_layers"] for c in mlem.get("untrained") or [])
    return f"MLEM of {plural_text(mlem['n_models'], 'model')}{_controls(mlem)} ({layers} layers in all)", ""


def embedding_timing_label(findings: Mapping[str, Any]) -> tuple[str, str]:
    """The embedding space: what it does."""
    return "embedding space (readings, keep-k, alignment, fine-tuning, zero-shot stitching)", ""


def nli_timing_label(findings: Mapping[str, Any]) -> tuple[str, str]:
    """The NLI experiment, with its parts' times where the run recorded them."""
    parts = (findings.get("timing") or {}).get("nli_parts")
    if not parts:
        return "the NLI experiment", ""
    nli = findings.get("nli") or {}
    copies = nli.get("n_copies")
    ordered = (nli.get("stitching") or {}).get("n_ordered_pairs")
    return "the NLI experiment", (
        f" (encoder {seconds_text(parts['encoder'])}, "
        f"{plural_text(copies, 'copy', 'copies') if copies is not None else 'copies'} "
        f"{seconds_text(parts['copies'])}, identity stitching"
        f"{f' of {ordered} ordered pairs' if ordered else ''} {seconds_text(parts['stitching'])}, pairs, "
        f"accuracy, CKA, sweep and report {seconds_text(parts['rest'])})"
    )


def _timing_head(findings: Mapping[str, Any]) -> str:
    """The paragraph's opening: the machine, and the runner where it had several workers."""
    machine = findings["machine"]
    head = (
        f"The default run (measured on {machine['cpu_count']} CPU cores, {machine['system']} {machine['architecture']}"
    )
    workers = findings["timing"].get("workers") or 0
    if workers > 1:
        at_once = findings["timing"].get("most_at_once")
        busy = f", at most {at_once} at work at once" if at_once and at_once < workers else ""
        head += (
            f"; `--runner thinkalike.runners.DaskRunner`, {workers} worker processes{busy}: a pipeline's time is "
            "its nodes' work summed over the workers, the run's is its wall-clock time"
        )
    return head + ")"


def render_timing(findings: Mapping[str, Any], order: Sequence[str], labels: Mapping[str, TimingLabel]) -> str:
    """The timing paragraph: every pipeline (those of ``order`` in its order — the pipelines' stage order, a
    :class:`~thinkalike.reports.experiments.ReportOutline`'s ``pipelines`` — then any other by name; those of
    ``order`` not timed are named), each named by its label (``labels``: each pipeline's spec's ``timing_label``;
    none: its name), the total and whether it kept :data:`RUN_BUDGET_SECONDS`."""
    timing = findings["timing"]
    head = _timing_head(findings)
    if "missing" in timing:
        return head + ": no `run_timings` table in these outputs, so no timings."
    if "error" in timing:
        return head + f": its `run_timings` table could not be read ({timing['error']})."
    pipelines = timing["pipelines"]
    items = []
    for name in [*order, *sorted(set(pipelines) - set(order))]:
        if name in pipelines:
            before, after = labels[name](findings) if name in labels else (name, "")
            items.append(f"{before} {seconds_text(pipelines[name]['seconds'])}{after}")
    missing = [name for name in order if name not in pipelines]
    total = timing["total_seconds"]
    budget = findings["budget_seconds"]
    text = (
        f"{head}: " + "; ".join(items) + f" — {seconds_text(total)} in all (measured {timing['date']}, "
        f"{number_text((timing['peak_rss_mb'] or 0) / 1024, 1)} GB peak memory; its budget: "
        f"{budget // 60} minutes)"
    )
    if missing:
        text += f". Not timed in this run: {list_text(missing)}"
    if timing["failed_nodes"]:
        text += f". {plural_text(timing['failed_nodes'], 'node')} failed"
    return text + ". `python benchmarks/default_run.py` repeats the run idle and beside a busy process."


def _zoo_margin(zoo: Mapping[str, Any]) -> str:
    """The zoo models' improvement on the corpus unigram entropy (whether each beats the margin is a claim)."""
    return (
        f"each model {number_text(zoo['min_improvement'] * 100, 0)}–{number_text(zoo['max_improvement'] * 100, 0)} % "
        "below the corpus unigram entropy on held-out text"
    )


def claims_zoo(findings: Mapping[str, Any]) -> list[Claim]:
    """The zoo's claim: its models beat the unigram baseline by the configured margin (margin: the least improvement −
    the margin)."""
    zoo = findings.get("zoo") or {}
    if "n_models" not in zoo or zoo.get("margin") is None:
        return []
    return [
        Claim(
            "zoo.beats_unigram_margin",
            "Every zoo model's held-out loss is at least {margin:%} below the corpus unigram entropy "
            "(the least improvement: {least:%})",
            zoo["min_improvement"] - zoo["margin"],
            {"margin": zoo["margin"], "least": zoo["min_improvement"]},
        )
    ]


def claims_timing(findings: Mapping[str, Any]) -> list[Claim]:
    """The run's claims about itself: it kept its budget (margin: budget − total seconds, in minutes) or not (the
    negative)."""
    timing = findings.get("timing") or {}
    if timing.get("total_seconds") is None:
        return []
    budget = findings["budget_seconds"]
    values = {"minutes": timing["total_seconds"] / 60, "budget": budget // 60}
    return [
        Claim(
            "timing.within_budget",
            "The default run takes {minutes:1} min on this machine, within its {budget:d}-minute budget",
            (budget - timing["total_seconds"]) / 60,
            values,
        ),
        Claim(
            "timing.over_budget",
            "The default run takes {minutes:1} min on this machine, over its {budget:d}-minute budget",
            (timing["total_seconds"] - budget) / 60,
            values,
        ),
    ]
