"""The findings are generated: the region of the documentation page docs/findings.md is what docs/findings.json
renders to (``findings_cli --render`` rewrites it from the JSON alone), and the JSON comes from the current code (its
source digest); the collection and the rendering on synthetic tables shaped like
the default run's (the tiny run's outputs: tests/pipelines/test_findings_tiny_run.py)."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from thinkalike.findings_cli import main as findings_main
from thinkalike.pipelines.specs import report_outline
from thinkalike.reports.findings import (
    END_MARKER,
    REGENERATE,
    START_MARKER,
    claims_of,
    collect_findings,
    findings_document,
    readme_region,
    render_document,
    render_findings,
    replace_region,
    source_digest,
)
from thinkalike.run_record.clock import most_at_once

OUTLINE = report_outline()  # the project's report sections

ROOT = Path(__file__).resolve().parents[2]
FINDINGS_JSON = ROOT / "docs" / "findings.json"
FINDINGS_PAGE = ROOT / "docs" / "findings.md"
NOT_GENERATED = f"docs/findings.json is not generated yet — {REGENERATE}"


# --------------------------------------------------------------------------- (a): the committed findings


def _document() -> dict:
    if not FINDINGS_JSON.exists():
        pytest.skip(NOT_GENERATED)
    return json.loads(FINDINGS_JSON.read_text(encoding="utf-8"))


def test_the_findings_page_region_is_what_findings_json_renders_to():
    document = _document()
    region = readme_region(FINDINGS_PAGE.read_text(encoding="utf-8"))
    assert region is not None, f"docs/findings.md has no {START_MARKER} … {END_MARKER} region: {REGENERATE}"
    assert region == render_document(document, OUTLINE), (
        "the findings page differs from what docs/findings.json renders to (hand-edited, or the renderer "
        f"changed): `python -m thinkalike.findings_cli --render` rewrites it from the JSON; {REGENERATE}"
    )


def test_the_readme_leaves_the_findings_to_their_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert START_MARKER not in readme and END_MARKER not in readme
    assert "docs/findings.md" in readme


def test_render_rewrites_the_page_region_from_the_json_alone(tmp_path, capsys):
    """``findings_cli --render``: no git work tree, no project, no outputs — the saved JSON is all it reads; the
    page's hand-written prose around the markers stays, a page that does not exist is made, no JSON is an error."""
    document = _document()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "findings.json").write_text(FINDINGS_JSON.read_text(encoding="utf-8"), encoding="utf-8")
    page = tmp_path / "docs" / "findings.md"
    page.write_text(f"# Findings\n\nProse before.\n\n{START_MARKER}\nstale\n{END_MARKER}\n\nProse after.\n")
    assert findings_main(["--render", "--repo", str(tmp_path)]) == 0
    text = page.read_text(encoding="utf-8")
    assert text == (
        f"# Findings\n\nProse before.\n\n{START_MARKER}\n{render_document(document, OUTLINE)}{END_MARKER}\n\nProse after.\n"
    )
    assert "updated:" in capsys.readouterr().out
    assert findings_main(["--render", "--repo", str(tmp_path)]) == 0  # again: nothing to change
    assert "unchanged:" in capsys.readouterr().out and page.read_text(encoding="utf-8") == text
    page.unlink()
    assert findings_main(["--render", "--repo", str(tmp_path)]) == 0
    assert readme_region(page.read_text(encoding="utf-8")) == render_document(document, OUTLINE)
    (tmp_path / "docs" / "findings.json").unlink()
    assert findings_main(["--render", "--repo", str(tmp_path)]) == 2
    assert "no " in capsys.readouterr().err
    with pytest.raises(SystemExit):  # --render renders the saved JSON: it collects nothing
        findings_main(["--render", "--write", "--repo", str(tmp_path)])


def test_the_committed_page_renders_unchanged(tmp_path):
    """The committed docs/findings.md is a fixed point of ``--render`` (the whole file, prose included)."""
    _document()
    (tmp_path / "docs").mkdir()
    for name in ("findings.json", "findings.md"):
        (tmp_path / "docs" / name).write_text((ROOT / "docs" / name).read_text(encoding="utf-8"), encoding="utf-8")
    assert findings_main(["--render", "--repo", str(tmp_path)]) == 0
    assert (tmp_path / "docs" / "findings.md").read_text(encoding="utf-8") == FINDINGS_PAGE.read_text(encoding="utf-8")


def _no_amendment_touches_the_zoo_column(document, plan) -> None:
    """The plan the zoo's deciding replicates were collected under (``analysis_plan.earlier``, read from git at its
    commit) has the same zoo column, question by question, as the plan now: an amendment of the zoo column changes
    which replicates decide it, never a question; the zoo's replicates are the plan's deciding ones."""
    from thinkalike.analysis.plan import PLAN_PATH, AnalysisPlan

    earlier = document["analysis_plan"].get("earlier") or []
    assert bool(earlier) == bool(plan.amendments)  # amended exactly when a plan is named as earlier
    zoo = [r["replicate"] for r in document["replicates"]]
    first = plan.deciding.first_replicate
    assert zoo == list(range(first, first + plan.deciding.zoo_replicates)), zoo
    for entry in earlier:
        shown = subprocess.run(
            ["git", "show", f"{entry['git_commit']}:{PLAN_PATH}"], cwd=ROOT, capture_output=True, text=True
        )
        if shown.returncode != 0:  # a clone without that history: the sha256 alone is the record
            continue
        then = AnalysisPlan.model_validate(yaml.safe_load(shown.stdout))
        assert hashlib.sha256(shown.stdout.encode("utf-8")).hexdigest() == entry["sha256"]
        for key, question in then.questions.items():
            assert plan.questions[key].zoo == question.zoo, key


def test_findings_json_is_the_scorecard_by_the_committed_plan_and_every_verdict_recomputes():
    """docs/findings.json: no claims; the plan's path and sha256 (the plan in the repository now); ≥ 16 rows whose
    primary parts are the plan's; per part every number and word recomputed from its stored effects and the plan by
    the rule; at most 20 exploratory observations."""
    from thinkalike.analysis import rule
    from thinkalike.analysis.plan import PLAN_PATH, load_plan, plan_digest

    document = _document()
    replicates = document["replicates"]
    assert len(replicates) >= 3 and document["git_commit"] and document["command"]
    assert not any(r["run"].get("roundoff") for r in replicates)  # independent draws only
    assert "claims" not in document
    assert {k: document["analysis_plan"][k] for k in ("path", "sha256")} == {
        "path": str(PLAN_PATH),
        "sha256": plan_digest(ROOT / PLAN_PATH),
    }
    plan = load_plan(ROOT / PLAN_PATH)
    _no_amendment_touches_the_zoo_column(document, plan)
    rows = document["scorecard"]
    assert len(rows) >= 16
    for row in rows:
        assert {"question", "paper", "ours", "rule", "verdict", "parts", "primary"} <= set(row)
        assert row["verdict"].startswith(("reproduced", "partly", "not reproduced", "inconclusive", "not testable"))
        planned = plan.questions[row["key"]].zoo
        if not row["parts"]:
            continue
        assert row["primary"] == list(planned.primary) and set(row["parts"]) == set(planned.parts)
        # every planned part is measured: a label the estimand code does not produce would leave it empty
        assert all(p.get("ci95") and p.get("verdict") for p in row["parts"].values()), row["key"]
        results = {}
        for name, part in row["parts"].items():
            assert part["delta"] == planned.parts[name].delta
            if any(e is None for e in part["effects"]):
                continue
            assert len(part["effects"]) == len(replicates)
            gates = [
                rule.decide_gate(g, row["gates"][g]["values"], row["gates"][g]["threshold"]) for g in planned.gates
            ]
            again = rule.decide_part(part["effects"], part["delta"], gates)
            results[name] = again
            assert (part["mean"], part["ci95"], part["ci90"]) == (again.mean, list(again.ci95), list(again.ci90))
            assert (part["verdict"], part["smaller_than_delta"]) == (again.verdict, again.smaller_than_delta)
            assert part.get("n_needed") == (
                again.n_needed if again.verdict == "inconclusive" and not again.gate else None
            )
        if all(name in results for name in planned.primary):
            assert row["verdict"] == rule.decide_row({n: results[n] for n in planned.primary}).text
    assert len(document["exploratory"]) <= 20
    assert all({"mean", "ci95", "n"} <= set(o) for o in document["exploratory"])
    # the scorecard is recomputed from the committed findings by this code
    rows = findings_document([r["findings"] for r in replicates], OUTLINE)["scorecard"]
    assert [(r["key"], r["verdict"]) for r in rows] == [(r["key"], r["verdict"]) for r in document["scorecard"]]


# --------------------------------------------------------------------------- tables shaped like the default run's


def _parameters() -> dict:
    parameters = {}
    for path in sorted((ROOT / "conf" / "base").glob("parameters_*.yml")):
        parameters.update(yaml.safe_load(path.read_text()))
    return parameters


def _pairs(spec: dict, models: list[str]) -> list[tuple[str, str]]:
    pairs = [(m, m) for m in models] if spec.get("intra") else []
    pairs += [tuple(p) for p in spec.get("explicit") or []]
    pairs += list(itertools.combinations(spec.get("all_pairs_of") or [], 2))
    pairs += [(ref, other) for ref, others in (spec.get("against") or {}).items() for other in others]
    return list(dict.fromkeys(pairs))


def _depth(config: dict) -> int:
    arch = config["architecture"]
    return int(arch.get("n_layers", arch.get("num_hidden_layers")))


def default_shaped_tables(seed: int = 0, *, asymmetry: float = 0.08) -> dict:
    """Every table collect_findings reads, with the default configuration's models and pairs and made-up numbers.
    ``asymmetry``: how much more SoLU → GeLU costs than GeLU → SoLU over their floors."""
    rng = np.random.default_rng(seed)
    parameters = _parameters()
    zoo = parameters["zoo"]["models"]
    models = list(zoo)
    depth = {m: _depth(c) for m, c in zoo.items()}
    depth.update(
        {
            name: depth[spec.split(":")[1].split("?")[0]]  # zoo initialisations (zoo:<m>?weights=initial)
            for name, spec in (parameters["activations"].get("models") or {}).items()
            if spec.startswith("zoo:")
        }
    )
    V = 394
    tables: dict = {
        "parameters": parameters,
        "model_configs": {m: {**c, "objective": c.get("objective", "causal")} for m, c in zoo.items()},
    }
    tables["corpus_statistics"] = {
        "n_sentences": 5000,
        "vocab_size": V,
        "n_train_sequences": 1167,
        "n_heldout_sequences": 130,
        "n_evaluation_texts": 400,
        "n_evaluation_tokens": 3500,
        "unigram_entropy_nats": 4.4,
    }
    tables["zoo_summary"] = pd.DataFrame(
        {
            "model": models,
            "n_parameters": 1000,
            "steps": 300,
            "train_seconds": 10.0,
            "heldout_loss": 2.3,
            "unigram_entropy": 4.4,
            "improvement": rng.uniform(0.41, 0.6, len(models)),
            "beats_baseline": True,
        }
    )
    # CKA
    rows = []
    for a, b in _pairs(parameters["cka"]["pairs"], models):
        cka = 1.0 if a == b else float(rng.uniform(0.75, 0.95))
        rows.append(
            {
                "model_a": a,
                "model_b": b,
                "layers_a": depth[a] + 1,
                "layers_b": depth[b] + 1,
                "mean_matched_cka": cka,
                "arccos_distance": 0.0 if a == b else float(rng.uniform(0.7, 1.4)),
                "n_matched_layers": 3,
                "n_finite_layers": 3,
                "n_tokens": 3313,
            }
        )
    tables["cka_distances"] = pd.DataFrame(rows)
    # stitching: both directions and self baselines, diagonal, three kinds
    explicit = [tuple(p) for p in parameters["stitching"]["pairs"]["explicit"]]
    ordered = list(
        dict.fromkeys([*explicit, *[(b, a) for a, b in explicit], *[(m, m) for pair in explicit for m in pair]])
    )
    rows = []
    # its own generator: the tables drawn after it do not move when conf/base stitches more pairs
    stitch_rng = np.random.default_rng(seed + 1)
    for f, g in ordered:
        for layer in range(min(depth[f], depth[g]) + 1):
            for kind in ("identity", "affine", "affine_ln"):
                if kind == "identity":
                    penalty = 0.0 if f == g else float(stitch_rng.uniform(0.03, 6.0))
                else:
                    floor = -0.02 * (1 + (layer == 0))
                    penalty = floor if f == g else floor + 0.02 + (asymmetry if f.startswith("solu") else 0.0)
                    penalty += float(stitch_rng.uniform(-0.002, 0.002))
                half = 0.0 if kind == "identity" and f == g else 0.01
                rows.append(
                    {
                        "model_f": f,
                        "layer_f": layer,
                        "model_g": g,
                        "layer_g": layer,
                        "stitch": kind,
                        "loss": 2.0 + penalty,
                        "ci_low": penalty - half,
                        "ci_high": penalty + half,
                        "g_loss": 2.0,
                        "f_loss": 2.0,
                        "penalty": penalty,
                        "steps": 0 if kind == "identity" else 150,
                        "tokens_per_step": 0 if kind == "identity" else 1024,
                        "train_tokens": 74688,
                        "eval_tokens": 2496,
                        "ci_level": 0.95,
                        "train_source": "train_sequences",
                    }
                )
    tables["stitching_penalties"] = pd.DataFrame(rows)
    tables["stitching_phis"] = pd.DataFrame({"model_f": [r["model_f"] for r in rows], "n_eval_sequences": 39})
    # MLEM
    features = ["pos", "word_role", "word_position", "number", "tense", "in_relative_clause"]
    rows = []
    for m in [*models, "gelu_2l_untrained"]:  # the untrained control (conf/base's activations.models)
        for layer in range(depth[m] + 1):
            spearman = float(rng.uniform(0.25, 0.6)) if m in models else 0.05 + 0.01 * layer
            importance = dict(zip(features, [0.3, 0.05, 0.1, 0.01, -0.005, 0.04]))
            if m.startswith("mamba") and layer == depth[m]:
                importance["word_role"] = 0.41
            for fold in (-1, 0, 1, 2, 3, 4):
                for feature in features:
                    rows.append(
                        {
                            "model": m,
                            "layer": layer,
                            "feature": feature,
                            "importance": importance[feature],
                            "spearman_heldout": spearman,
                            "fold": fold,
                            "n_stimuli": 1000,
                            "pairs_per_step": 1024,
                            "level": "word",
                            "stimuli": "corpus",
                        }
                    )
    tables["mlem_profiles"] = pd.DataFrame(rows)
    labels = [(m, layer) for m in models for layer in range(depth[m] + 1)]
    odd = ("mamba_2l", depth["mamba_2l"])
    for method in ("feature", "rsa"):
        rows = [
            {
                "model_a": a[0],
                "layer_a": a[1],
                "model_b": b[0],
                "layer_b": b[1],
                "similarity": -0.5 if method == "feature" and odd in (a, b) and a != b else float(rng.uniform(0.3, 1)),
            }
            for a in labels
            for b in labels
        ]
        tables[f"mlem_{method}_similarity"] = pd.DataFrame(rows)
    # embedding
    ks = [10, 50, 100, 200, 300, V]
    rows = []
    for m in models:
        for distribution in ("normal", "ff_values", "residual"):
            for k in ks:
                rows.append(
                    {
                        "model": m,
                        "distribution": distribution,
                        "variant": "one_sample",
                        "e_prime": "pinv",
                        "k": k,
                        "n": 300,
                        "score": min(1.0, 0.4 + k / V),
                        "condition_number": 8.0,
                    }
                )
                rows.append(
                    {
                        "model": m,
                        "distribution": distribution,
                        "variant": "one_sample",
                        "e_prime": "transpose",
                        "k": k,
                        "n": 300,
                        "score": 0.9 - abs(k - 50) / 1000,
                        "condition_number": 8.0,
                    }
                )
    tables["embedding_keep_k"] = pd.DataFrame(rows)
    replicas = ["gelu_4l", "gelu_4l_seed1", "gelu_4l_seed2"]
    groups = ["FF_key", "FF_value", "W_Q", "W_K", "W_V", "W_O"]
    tables["embedding_alignment"] = pd.DataFrame(
        [
            {
                "model_a": a,
                "model_b": b,
                "group": group,
                "space": space,
                "n_layers_a": 4,
                "n_layers_b": 4,
                "diagonal_fraction": (0.25 if space == "raw" else 1.0 - 0.15 * i),
                "matching": "",
            }
            for a, b in itertools.combinations(replicas, 2)
            for i, group in enumerate(groups)
            for space in ("projected", "raw")
        ]
    )
    rows = [
        {
            "model": "gelu_4l",
            "task": "tense",
            "source": source,
            "group": group,
            "layer": layer,
            "n_vectors": 10,
            "k": 20,
            "feature_fraction": float(rng.uniform(0.1, 0.6)),
            "chance_fraction": 0.16,
        }
        for group in groups
        for layer in (2, 3)
        for source in ("finetune_diff", "random_rows")
    ]
    rows.append(
        {
            "model": "gelu_4l",
            "task": "tense",
            "source": "classifier",
            "group": "head",
            "layer": 4,
            "n_vectors": 2,
            "k": 20,
            "feature_fraction": 0.18,
            "chance_fraction": 0.16,
        }
    )
    tables["embedding_feature_fractions"] = pd.DataFrame(rows)
    tables["embedding_finetune_curves"] = pd.DataFrame({"model": "gelu_4l", "step": [300, 600], "train_loss": 0.3})
    tables["embedding_zero_shot"] = pd.DataFrame(
        [
            {
                "model_a": "gelu_4l",
                "model_b": b,
                "task": "tense",
                "layers_from_b": layer,
                "accuracy": 0.855 if b == "gelu_4l" else float(rng.uniform(0.28, 0.72)),
                "own_accuracy": 0.855,
                "chance": 0.735,
                "n_sentences": 400,
            }
            for b in ["gelu_4l", *replicas[1:], "gelu_3l"]
            for layer in range(4)
        ]
    )
    # NLI
    from thinkalike.nli.analysis import BASELINE, RELATIONS, copy_names, split_groups

    copies = copy_names(10)
    pairs = pd.DataFrame(
        {
            "split": ["train"] * 200 + ["test"] * 40 + ["ood"] * 80,
            "subcase": ["swap"] * 240
            + [s for s in ("passive", "relative_clause", "preposition", "conjunction") for _ in range(20)],
            "label": (["entailed", "non_entailed"] * 160),
        }
    )
    tables["models.nli.pairs"] = pairs
    rows = []
    for model in [*copies, BASELINE]:
        non = 0.0 if model == BASELINE else float(rng.uniform(0.07, 0.19))
        rows.append(
            {
                "model": model,
                "split": "test",
                "subcase": "all",
                "label": "all",
                "n_pairs": 40,
                "accuracy": 0.95 if model == BASELINE else float(rng.uniform(0.82, 0.85)),
            }
        )
        for subcase in ("passive", "relative_clause", "preposition", "conjunction"):
            shift = {"relative_clause": 0.1, "preposition": -0.05}.get(subcase, 0.0)
            rows.append(
                {
                    "model": model,
                    "split": "ood",
                    "subcase": subcase,
                    "label": "non_entailed",
                    "n_pairs": 10,
                    "accuracy": max(0.0, non + shift) if model != BASELINE else 0.0,
                }
            )
            rows.append(
                {
                    "model": model,
                    "split": "ood",
                    "subcase": subcase,
                    "label": "entailed",
                    "n_pairs": 10,
                    "accuracy": 1.0,
                }
            )
        rows.append(
            {"model": model, "split": "ood", "subcase": "all", "label": "non_entailed", "n_pairs": 40, "accuracy": non}
        )
        rows.append(
            {"model": model, "split": "ood", "subcase": "all", "label": "entailed", "n_pairs": 40, "accuracy": 1.0}
        )
    accuracy = pd.DataFrame(rows)
    tables["models.nli.accuracy"] = accuracy
    tables["models.nli.groups"] = split_groups(accuracy, 3)
    rows = []
    for data in ("test", "ood"):
        for layer in range(5):
            for relation in RELATIONS:
                mean = (0.03 + 0.07 * layer) if data == "test" else float(rng.uniform(-0.03, 0.03))
                rows.append(
                    {
                        "data": data,
                        "layer": layer,
                        "relation_depth": layer / 4,
                        "relative_depth": layer / 4,
                        "relation": relation,
                        "mean_penalty": mean,
                        "ci_low": mean - 0.05,
                        "ci_high": mean + 0.05,
                        "mean_stitched_accuracy": 0.8,
                        "n_pairs": 6,
                    }
                )
    tables["models.nli.stitching_groups"] = pd.DataFrame(rows)
    tables["models.nli.stitching"] = pd.DataFrame(
        [{"model_f": f, "model_g": g} for f in copies for g in copies if f != g]
    )
    tables["models.nli.cka_group_curves"] = pd.DataFrame(
        [
            {
                "group_a": a,
                "group_b": b,
                "relative_depth": d,
                "mean": float(rng.uniform(0.82, 0.92)),
                "ci_low": 0.8,
                "ci_high": 0.95,
                "n": 3,
            }
            for a, b in (("generalizing", "generalizing"), ("generalizing", "heuristic"), ("heuristic", "heuristic"))
            for d in (0.0, 0.25, 0.5, 0.75, 1.0)
        ]
    )
    tables["models.nli.sweep"] = pd.DataFrame(
        [
            {
                "status": "not_needed",
                "note": "the seeds spread: OOD non-entailed accuracy range 0.120 >= nli.min_spread = 0.1",
            }
        ]
    )
    tables["models.nli.training_curves"] = pd.DataFrame(
        {
            "model": ["nli_encoder", *copies],
            "step": [1000, *[400] * 10],
            "stage": ["pretraining", *["fine-tuning"] * 10],
        }
    )
    tables["models.nli.encoder.model_config"] = {"family": "bridge", "bridge_config": {"n_layers": 4}}
    # timings
    nodes = [
        ("corpus", "generate_corpus", 1.0),
        *[("zoo", f"models.{m}.train_model", 10.0) for m in models],
        ("activations", "models.gelu_2l.extract_activations", 4.0),
        ("stitching", "s.stitch_pair", 283.0),
        ("cka", "c.compare_pair", 28.0),
        ("mlem", "m.fit_mlem", 67.0),
        ("embedding", "e.summarise", 60.0),
        ("nli", "models.nli.encoder.pretrain_encoder", 67.0),
        *[("nli", f"models.nli.{c}.finetune_copy", 14.3) for c in copies],
        *[("nli", f"models.nli.identity_stitching.{c}.stitch_from_copy", 3.4) for c in copies],
        ("nli", "models.nli.write_report", 10.0),
    ]
    start = pd.Timestamp("2026-11-26T10:00:00Z")
    rows = [
        {
            "node": "(start)",
            "namespace": "",
            "pipeline": "(run)",
            "status": "completed",
            "started_at": start,
            "seconds": 0.0,
            "span_seconds": 5.0,
            "peak_rss_mb": float("nan"),
        }
    ]
    rows += [
        {
            "node": node,
            "namespace": "",
            "pipeline": pipeline,
            "status": "completed",
            "started_at": start,
            "seconds": seconds,
            "span_seconds": seconds,
            "peak_rss_mb": 1400.0,
        }
        for pipeline, node, seconds in nodes
    ]
    timings = pd.DataFrame(rows)
    for column in ("cpu_seconds", "load_seconds", "save_seconds", "other_seconds", "peak_rss_growth_mb"):
        timings[column] = 0.0
    timings["run_seconds"] = timings["span_seconds"].sum()
    tables["run_timings"] = timings
    family = [m for m in models if m.startswith("neox_") and not m.endswith("_twin")]
    z = {m: float(v) for m, v in zip(family, rng.normal(0, 1, len(family)))}
    tables["scaling_summary"] = {
        "family": family,
        "trend_head_dim": 16,
        "band": [0.25, 0.75],
        "early": {"0.0": {"mean": 0.88, "min": 0.84, "max": 0.9}, "0.25": {"mean": 0.86, "min": 0.83, "max": 0.91}},
        "band_mean_between_members": 0.85,
        "intra_vs_size_spearman": 0.9,
        "intra_mean": {m: 0.8 + 0.02 * i for i, m in enumerate(family)},
        "structured_members": family[1:],
        "min_contrast": 0.1,
        "block_contrast": {m: 0.05 if i == 0 else 0.12 + 0.01 * i for i, m in enumerate(family)},
        "pair_block_contrast": {f"{a}–{b}": 0.08 for i, a in enumerate(family) for b in family[i + 1 :]},
        "structured_pairs": [],
        "outliers": [],
        "robust_z": z,
        "twins": [
            {
                "off_trend": "neox_6l",
                "twin": "neox_6l_twin",
                "d_head_off_trend": 40,
                "d_head_twin": 16,
                "band_mean_off_trend": 0.835,
                "band_mean_twin": 0.837,
                "difference": 0.002,
                "z_off_trend": z["neox_6l"],
                "z_twin": -0.6,
                "off_trend_flagged": False,
                "twin_flagged": False,
                "band_mean_off_trend_vs_twin": 0.87,
            }
        ],
    }
    # measures beyond CKA: seed replicas more alike than SoLU vs GeLU by every measure but rsa
    from thinkalike.measures.registry import MEASURES

    pairs = [
        ("gelu_2l", "gelu_2l_seed1"),
        ("gelu_2l", "gelu_2l_seed2"),
        ("gelu_2l_seed1", "gelu_2l_seed2"),
        ("solu_2l", "gelu_2l"),
        ("solu_3l", "gelu_3l"),
        ("solu_2l_shared_seed", "gelu_2l"),
    ]
    rows = []
    for name, entry in MEASURES.items():
        for a, b in pairs:
            alike = a.startswith("gelu") or name == "rsa"
            value = (0.9 if alike else 0.5) if entry.kind == "similarity" else (0.2 if alike else 0.6)
            rows.append(
                {
                    "model_a": a,
                    "model_b": b,
                    "measure": name,
                    "kind": entry.kind,
                    "matched_mean": value + 0.01 * rng.random(),
                    "model_distance": float("nan"),
                    "n_matched_layers": 3,
                    "n_tokens": 512,
                }
            )
    tables["similarity_measures"] = pd.DataFrame(rows)
    tables["dimension_shares"] = pd.DataFrame(
        {
            "model": ["gelu_2l"] * 3 + ["neox_8l"] * 3,
            "layer": [0, 1, 2] * 2,
            "top1_share": [0.05, 0.1, 0.62, 0.04, 0.2, 0.3],
            "top3_share": [0.1, 0.2, 0.7, 0.1, 0.4, 0.5],
            "n_tokens": 512,
        }
    )
    tables["rogue_remedies"] = pd.DataFrame(
        [
            {
                "model_a": a,
                "model_b": b,
                "measure": "cka",
                "variant": variant,
                "n_matched_layers": 3,
                "matched_mean": 0.6 + {"raw": 0.0, "standardised": 0.05, "top3_removed": -0.02}[variant] * (i + 1),
            }
            for i, (a, b) in enumerate(pairs)
            for variant in ("raw", "standardised", "top3_removed")
        ]
    )
    tables["measure_grounding"] = pd.DataFrame(
        [
            {
                "measure": name,
                "kind": entry.kind,
                "monotonicity": 0.9 - 0.05 * i,
                "monotonicity_chance": 0.0,
                "n_models": 14,
                "specificity": 1.0 if name != "rsa" else 0.7,
                "specificity_chance": 0.5,
                "n_pairs": 6,
                "sensitivity": 1.0 if name != "mean_cca" else 0.3,
                "sensitivity_chance": 0.0,
                "null_permuted": 0.01 if name not in ("mean_cca", "procrustes") else 0.45,
                "null_permuted_chance": 0.0,
                "null_independent": -0.02 if name != "mean_cca" else 0.5,
                "null_independent_chance": 0.0,
                "trained_vs_untrained": 1.0 if name != "knn_jaccard" else 0.6,
                "trained_vs_untrained_chance": 0.5,
                "n_untrained_pairs": 3,
            }
            for i, (name, entry) in enumerate(MEASURES.items())
        ]
    )
    tables["similarity_calibration"] = pd.DataFrame(
        [
            {
                "model_a": a,
                "model_b": b,
                "measure": name,
                "statistic": statistic,
                "layer_a": -1,
                "layer_b": -1,
                "observed": 0.5,
                "null_mean": 0.1,
                "null_std": 0.05,
                "z": 8.0 - i,
                "p_value": 1 / 21,
                "n_permutations": 20,
                "n_null": 20,
                "n_tokens": 512,
            }
            for i, (a, b) in enumerate(pairs)
            for name in ("cka", "procrustes")
            for statistic in ("matched_mean", "best")
        ]
    )
    return tables


# --------------------------------------------------------------------------- collection and rendering


def _words(findings: dict) -> str:
    """The rendered text with every run of whitespace as one space (phrases are checked whatever the wrapping)."""
    return " ".join(render_findings(findings, OUTLINE).split())


def _numbers(value) -> list:
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    return [value] if isinstance(value, (int, float)) and not isinstance(value, bool) else []


SECTIONS = {"zoo", "timing", "cka", "stitching", "mlem", "embedding", "nli", "scaling", "measures"}


def test_default_shaped_outputs_give_claims_in_every_section():
    findings = collect_findings(default_shaped_tables(), OUTLINE)
    claims = claims_of(findings, OUTLINE)
    assert {c.id.split(".")[0] for c in claims} == SECTIONS
    assert len({c.id for c in claims}) == len(claims)
    assert all(math.isfinite(n) for n in _numbers(findings))
    text = render_findings(findings, OUTLINE)
    assert "not in these outputs" not in text and "n/a" not in text, text
    round_trip = json.loads(json.dumps(findings, sort_keys=True))
    assert text == render_findings(round_trip, OUTLINE), (
        "rendering must not depend on a JSON round trip or the key order"
    )
    assert [c.as_json() for c in claims] == [c.as_json() for c in claims_of(round_trip, OUTLINE)]
    paragraphs = [p.replace("\n", " ") for p in text.strip().split("\n\n")]
    assert paragraphs[1] == "## The papers' questions" and paragraphs[2].startswith("| question | verdict |")
    after = paragraphs[paragraphs.index("## Where the findings come from") + 1 :]
    assert after[0].startswith("**One run** (") and after[1].startswith("The default run (measured on ")
    for title in (
        "The zoo",
        "Run time",
        "CKA",
        "Stitching",
        "MLEM",
        "Embedding space",
        "NLI (Brown et al. §4, offline)",
        "Scaling family (Brown et al. §5)",
        "Measures beyond CKA",
    ):
        assert f"## {title}" in paragraphs, title
    timing = after[1]
    assert "a SoLU with GeLU's seed as a control, 3 2-layer and 3 4-layer GeLU seed replicas" in timing
    assert (
        "zoo of 18 models" in timing
        and (
            "a GPT-NeoX family of 5 sizes of which `neox_6l` has head dimension 40 "
            "(and `neox_6l_twin`, its twin of head dimension 16)"
        )
        in timing
        and "10 copies 2 min 23 s" in timing
    )
    stitches = default_shaped_tables()["stitching_penalties"]  # one row a stitch (one φ seed): conf/base's pairs
    trained = int((stitches["stitch"] != "identity").sum())
    assert f"stitching ({len(stitches)} stitches, {trained} of them trained on 74,688 tokens) 4 min 43 s" in timing
    assert "identity stitching of 90 ordered pairs" in timing and "CKA of 27 pairs" in timing
    # a single run states only what holds in it, and nothing as varying
    assert "Not findings" not in text
    held = [c for c in claims if c.holds]
    assert held and all(c.margin > 0 for c in held)


def test_a_run_on_several_workers_says_its_pipeline_times_are_summed_work():
    tables = default_shaped_tables()
    assert "DaskRunner" not in _words(collect_findings(tables, OUTLINE))  # a sequential run's table (no worker column)
    timings = tables["run_timings"]
    timings["worker"] = ["" if node == "(start)" else f"host:{index % 2}" for index, node in enumerate(timings["node"])]
    text = _words(collect_findings(tables, OUTLINE))
    assert (
        "`--runner thinkalike.runners.DaskRunner`, 2 worker processes: a pipeline's time is its nodes' work summed"
        in text
    )
    # three workers (a spare among them), node i from 0.5·i s for 0.9 s: never more than two at work at once
    base = pd.to_datetime(timings["started_at"], utc=True).min()
    timings["worker"] = ["" if node == "(start)" else f"host:{index % 3}" for index, node in enumerate(timings["node"])]
    timings["started_at"] = [base + pd.Timedelta(seconds=0.5 * index) for index in range(len(timings))]
    timings["span_seconds"] = 0.9
    assert most_at_once(timings) == 2
    assert "DaskRunner`, 3 worker processes, at most 2 at work at once:" in _words(collect_findings(tables, OUTLINE))
    timings["span_seconds"] = 1.2  # node i overlaps i + 1 and i + 2: all three workers at once
    assert most_at_once(timings) == 3
    assert "DaskRunner`, 3 worker processes: a pipeline's" in _words(collect_findings(tables, OUTLINE))


def _claim(findings: dict, claim_id: str):
    return next(c for c in claims_of(findings, OUTLINE) if c.id == claim_id)


def test_the_run_time_claim_says_whether_the_run_kept_its_10_minute_budget():
    tables = default_shaped_tables()
    timings = tables["run_timings"]
    for run_seconds, within in ((599.5, True), (600.5, False), (547.8, True)):
        timings["run_seconds"] = run_seconds
        claim = _claim(collect_findings(tables, OUTLINE), "timing.within_budget")
        assert claim.holds == within and claim.margin == pytest.approx((600 - run_seconds) / 60), run_seconds
        assert "within its 10-minute budget" in claim.text
        assert ("within its 10-minute budget" in _words(collect_findings(tables, OUTLINE))) == within


def test_the_numbers_in_the_claims_are_the_collected_ones():
    tables = default_shaped_tables(seed=3)
    findings = collect_findings(tables, OUTLINE)
    distances = tables["cka_distances"].set_index(["model_a", "model_b"])
    control = distances.loc[("solu_2l_shared_seed", "gelu_2l")]
    raises = _claim(findings, "cka.shared_init_raises")
    assert raises.values["control"] == pytest.approx(control["mean_matched_cka"], abs=1e-6)
    assert f"({control['mean_matched_cka']:.2f})" in raises.text
    solu_gelu = [distances.loc[pair, "mean_matched_cka"] for pair in (("solu_2l", "gelu_2l"), ("solu_3l", "gelu_3l"))]
    replicas = [
        distances.loc[pair, "mean_matched_cka"]
        for pair in (("gelu_2l", "gelu_2l_seed1"), ("gelu_2l", "gelu_2l_seed2"), ("gelu_2l_seed1", "gelu_2l_seed2"))
    ]
    below = _claim(findings, "cka.solu_gelu_below_replicas")
    above = _claim(findings, "cka.solu_gelu_above_replicas")
    assert below.margin == pytest.approx(min(replicas) - max(solu_gelu), abs=1e-5)
    assert above.margin == pytest.approx(min(solu_gelu) - max(replicas), abs=1e-5)
    assert not (below.holds and above.holds)
    zoo = _claim(findings, "zoo.beats_unigram_margin")
    assert zoo.margin == pytest.approx(tables["zoo_summary"]["improvement"].min() - 0.3, abs=1e-5)


def test_which_gpt_neox_member_is_closest_is_one_claim_per_member():
    def planted(scores: dict) -> dict:
        members = [{"model": m, "cka": v, "distance": 1 - v, "head_dim": 16} for m, v in scores.items()]
        return {
            "cka": {
                "solu_gelu": [],
                "replicas": [],
                "control": [],
                "neox": {"reference": "neox_8l", "members": members, "odd": ["neox_6l"]},
            }
        }

    first = planted({"neox_2l": 0.80, "neox_4l": 0.88, "neox_6l": 0.86})
    second = planted({"neox_2l": 0.90, "neox_4l": 0.70, "neox_6l": 0.86})
    for findings, closest, furthest in ((first, "neox_4l", "neox_2l"), (second, "neox_2l", "neox_4l")):
        claims = claims_of(findings, OUTLINE)
        assert [c.id for c in claims] == [c.id for c in claims_of(first, OUTLINE)]  # the same ids whichever way it goes
        held = {c.id for c in claims if c.holds}
        assert held == {f"cka.neox_closest.{closest}", f"cka.neox_furthest.{furthest}"}
    assert _claim(first, "cka.neox_closest.neox_4l").margin == pytest.approx(0.02)
    assert "`neox_6l` (odd head size)" in _claim(first, "cka.neox_closest.neox_6l").text


def test_paragraphs_are_wrapped_without_starting_a_line_with_a_markdown_block_marker():
    text = render_findings(collect_findings(default_shaped_tables(), OUTLINE), OUTLINE)
    # the comment; the scorecard's rows; each question's forest plot (one line of inline SVG, by design)
    lines = [line for line in text.split("\n")[1:] if not line.startswith(("|", "<svg"))]
    assert max(len(line) for line in lines) <= 100
    from thinkalike.reports.findings import wrap

    assert wrap("aaa bbb - ccc 1. ddd # eee", width=4) == "aaa\nbbb -\nccc 1.\nddd #\neee"
    assert wrap("word " * 3 + "x" * 120) == "word word word\n" + "x" * 120
    assert wrap(" ".join(["w"] * 60)).replace("\n", " ") == " ".join(["w"] * 60)


def _held(findings: dict) -> set[str]:
    return {c.id for c in claims_of(findings, OUTLINE) if c.holds}


def test_stitching_asymmetry_is_measured_against_the_self_floor():
    held = _held(collect_findings(default_shaped_tables(asymmetry=0.08), OUTLINE))
    assert {"stitching.asymmetry.every_cell", "stitching.control_asymmetry.every_cell"} <= held
    assert "stitching.asymmetry.no_cell" not in held
    # the same raw penalties with GeLU's floors raised above SoLU's: over the floors the asymmetry reverses
    tables = default_shaped_tables(asymmetry=0.08)
    penalties = tables["stitching_penalties"]
    gelu_self = (
        (penalties["model_f"] == penalties["model_g"])
        & penalties["model_g"].str.startswith("gelu")
        & (penalties["stitch"] != "identity")
    )
    for column in ("penalty", "ci_low", "ci_high"):
        penalties.loc[gelu_self, column] += 0.2
    reversed_ = collect_findings(tables, OUTLINE)
    held = _held(reversed_)
    assert "stitching.asymmetry.no_cell" in held and "stitching.asymmetry.every_cell" not in held
    assert "stitching.control_asymmetry.every_cell" not in held
    assert "not the asymmetry Brown et al. report" in _words(reversed_)


def test_several_phi_seeds_per_stitch_are_averaged():
    tables = default_shaped_tables()
    penalties = tables["stitching_penalties"]
    twice = pd.concat(
        [penalties.assign(phi_seed=0), penalties.assign(phi_seed=1, penalty=penalties["penalty"] + 0.002)],
        ignore_index=True,
    )
    tables["stitching_penalties"] = twice
    findings = collect_findings(tables, OUTLINE)
    assert findings["stitching"]["n_stitches"] == len(penalties) and findings["stitching"]["phi_seeds"] == 2
    assert _held(findings) == _held(collect_findings(default_shaped_tables(), OUTLINE))  # 0.002 decides nothing here


def test_nli_verdicts_follow_the_numbers():
    tables = default_shaped_tables()
    held = _held(collect_findings(tables, OUTLINE))
    assert {
        f"nli.stitching_deeper_costs_more.{r}" for r in ("between", "within_generalizing", "within_heuristic")
    } <= held
    assert {
        "nli.stitching_groups_do_not_diverge",
        "nli.cka_does_not_separate_groups",
        "nli.ood_said_entailed_majority",
        "nli.subcase_highest.relative_clause",
        "nli.subcase_lowest.preposition",
    } <= held
    assert "nli.stitching_groups_diverge" not in held
    by_group = tables["models.nli.stitching_groups"]
    between = (by_group["relation"] == "between") & (by_group["data"] == "test") & (by_group["layer"] >= 3)
    for column in ("mean_penalty", "ci_low", "ci_high"):
        by_group.loc[between, column] += 0.3
    held = _held(collect_findings(tables, OUTLINE))
    assert "nli.stitching_groups_diverge" in held and "nli.stitching_groups_do_not_diverge" not in held


def test_mlem_comparison_with_the_paper_follows_the_numbers():
    tables = default_shaped_tables()
    assert "mlem.spearman_below_paper" in _held(collect_findings(tables, OUTLINE))
    tables["mlem_profiles"].loc[tables["mlem_profiles"]["model"] == "neox_8l", "spearman_heldout"] = 0.75
    held = _held(collect_findings(tables, OUTLINE))
    assert "mlem.spearman_reaches_paper" in held and "mlem.spearman_below_paper" not in held


@pytest.mark.parametrize(
    "table, sentence",
    [
        (
            "stitching_penalties",
            "## Stitching Stitching: not in these outputs (no `stitching_penalties`: the pipeline was not run).",
        ),
        ("cka_distances", "## CKA CKA: not in these outputs (no `cka_distances`: the pipeline was not run)."),
        ("mlem_profiles", "## MLEM MLEM: not in these outputs (no `mlem_profiles`: the pipeline was not run)."),
        (
            "models.nli.groups",
            "NLI (Brown et al. §4, offline): not in these outputs (no `models.nli.groups`: the pipeline was not run).",
        ),
        ("run_timings", ": no `run_timings` table in these outputs, so no timings."),
    ],
)
def test_a_missing_table_says_its_pipeline_was_not_run(table, sentence):
    tables = default_shaped_tables()
    del tables[table]
    findings = collect_findings(tables, OUTLINE)
    assert sentence in _words(findings)
    section = {
        "stitching_penalties": "stitching.",
        "cka_distances": "cka.",
        "mlem_profiles": "mlem.",
        "models.nli.groups": "nli.",
        "run_timings": "timing.",
    }[table]
    assert not any(c.id.startswith(section) for c in claims_of(findings, OUTLINE))


def test_a_table_without_the_columns_it_needs_spoils_only_its_own_paragraph():
    from thinkalike.reports.findings import collect_errors

    tables = default_shaped_tables()
    tables["mlem_profiles"] = tables["mlem_profiles"].drop(columns=["spearman_heldout"])
    findings = collect_findings(tables, OUTLINE)
    errors = collect_errors(findings)
    assert len(errors) == 1 and errors[0].startswith("mlem: KeyError") and "spearman_heldout" in errors[0]
    text = _words(findings)
    assert "MLEM: its tables could not be read (KeyError: " in text
    assert "## Stitching " in text and "the NLI experiment" in text
    sections = {c.id.split(".")[0] for c in claims_of(findings, OUTLINE)}
    assert "mlem" not in sections and {"stitching", "nli", "cka"} <= sections


def test_no_outputs_at_all_still_render():
    findings = collect_findings({}, OUTLINE)
    text = _words(findings)
    assert text.count("not in these outputs") >= 7 and "no `run_timings` table" in text
    assert claims_of(findings, OUTLINE) == []


# --------------------------------------------------------------------------- the page region and the digest


LEGACY = """# Title

Intro.

The default run (measured on 2 CPU cores, idle): corpus 1 s; …
… 15-minute budget).

What the default run finds (special tokens excluded, 3,313 tokens). CKA: …

NLI (Brown et al. §4 offline; …
… (`benchmarks/nli_pretraining.py`).

### CKA, as computed here

Unchanged.
"""


def test_the_first_write_replaces_the_hand_written_paragraphs_and_later_writes_only_the_region():
    first = replace_region(LEGACY, "generated one\n")
    assert first == (
        "# Title\n\nIntro.\n\n"
        + START_MARKER
        + "\ngenerated one\n"
        + END_MARKER
        + "\n\n### CKA, as computed here\n\nUnchanged.\n"
    )
    assert readme_region(first) == "generated one\n"
    second = replace_region(first, "generated two\n")
    assert second == first.replace("generated one", "generated two")
    assert replace_region(second, "generated two\n") == second
    with pytest.raises(ValueError, match="neither the markers"):
        replace_region("# nothing here\n", "x\n")


def test_source_digest_covers_the_tracked_code_and_configuration(tmp_path, tmp_path_factory):
    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    for path, content in {
        "src/a.py": "x = 1\n",
        "conf/base/p.yml": "a: 1\n",
        "conf/local/c.yml": "secret\n",
        "README.md": "text\n",
    }.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(content)
    git("add", "src/a.py", "conf/base/p.yml", "README.md")
    digest = source_digest(tmp_path)
    assert re.fullmatch(r"[0-9a-f]{64}", digest)
    (tmp_path / "README.md").write_text("other\n")
    (tmp_path / "conf/local/c.yml").write_text("other\n")
    (tmp_path / "src/untracked.py").write_text("y = 2\n")
    assert source_digest(tmp_path) == digest  # neither untracked files nor files outside src/, conf/base/
    (tmp_path / "conf/base/p.yml").write_text("a: 2\n")
    changed = source_digest(tmp_path)
    assert changed != digest
    (tmp_path / "src/a.py").unlink()
    assert source_digest(tmp_path) not in (digest, changed)
    with pytest.raises(RuntimeError, match="not a git work tree"):
        source_digest(tmp_path_factory.mktemp("not_a_repository"))
