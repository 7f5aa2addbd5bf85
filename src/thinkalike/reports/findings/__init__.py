"""The README's findings — what the default run finds, as claims that hold — computed from saved outputs (no Kedro
import: :mod:`thinkalike.findings_cli` loads the tables through the catalog).

Every function below takes the report's outline (:class:`~thinkalike.reports.experiments.ReportOutline`, the
project's from :func:`thinkalike.pipelines.specs.report_outline`): its sections, each declared in the folder of the
pipeline that makes its outputs, say which tables are read, how each part is collected and which claims it makes.

* :func:`collect_findings` ``(tables, outline, saved=None) -> dict``: every number the findings quote, from one run's loaded
  tables (catalog name → DataFrame or dict; ``outline.tables`` lists them; ``model_configs`` maps every zoo model to
  its saved ``models.<model>.model_config``; ``parameters`` is the run's parameters), section by section. Plain
  JSON (NaN is ``None``). ``saved``: the sections their pipelines already collected and saved
  (:func:`collect_section`, ``<section>_findings``), taken as they are.
* :func:`claims_of` ``(findings, outline) -> list[Claim]``: every comparative sentence as a claim
  (:mod:`.claims`: a stable id, the sentence, a margin > 0 exactly when it holds in that run), section by section.
* :func:`findings_document` ``(replicates) -> dict``: the replicates' findings and their merged claims — one
  margin per replicate and a status, *holds* (> 0 in every replicate) or *mixed* — as ``docs/findings.json`` holds
  them.
* :func:`render_document` ``(document) -> str``: the README region between :data:`START_MARKER` and
  :data:`END_MARKER`: where the findings come from, the first replicate's timing paragraph, then per section the
  claims that hold (each number as its range over the replicates) and those that vary, listed as such with their
  margins; deterministic. :func:`render_findings` does the same for one run (the experiments report).

Who is who comes from the saved model configs (:func:`model_facts`: one :mod:`thinkalike.models.zoo_record` record
per model; :func:`model_roles`), not from names:
SoLU/GeLU pairs are causal TransformerLens bridges of equal shape whose activations are ``solu*`` and ``gelu``
(different seeds; equal seeds make the *same-seed control*); *seed replicas* are models identical but for
their seed; the *GPT-NeoX family* is every ``gpt_neox`` model; encoders are masked-LM models.

Stitching asymmetries are measured against the self-stitching floor: a penalty of f → g at layers (l, m) is
compared with g → g at (m, m), same φ kind — the penalty a φ trained on g's own stream already costs (or gains).
Where a penalty table holds several rows per stitch (one per φ seed), they are averaged and their intervals
joined (lowest low, highest high).

One module per section, each with its ``collect_*`` (numbers from tables) and ``claims_*`` (the claims), named by
the section its pipeline declares: :mod:`.timing` (the corpus, the zoo and the run's timings), :mod:`.cka`, :mod:`.stitching`, :mod:`.mlem`, :mod:`.embedding`, :mod:`.nli`,
:mod:`.scaling`, :mod:`.measures`; :mod:`.claims` builds, merges and renders claims, :mod:`.text` writes numbers
and lists, :mod:`.readme` finds and replaces the README region. This module puts them together.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from thinkalike.analysis.plan import PLAN_PATH, load_plan, package_plan_path, plan_digest
from thinkalike.models.sources import is_initialisation
from thinkalike.models.zoo_record import ZooModel, zoo_model
from thinkalike.models.zoo_record import family_roles as model_roles
from thinkalike.models.zoo_record import neox_twins as neox_twins
from thinkalike.reports.experiments import ReportOutline, ReportSection, RunTables
from thinkalike.reports.findings.claims import (
    HOLDS,
    MIXED,
    NOISE_FACTOR,
    UNRESOLVED,
    Claim,
    by_section,
    merge_claims,
    render_claims,
    single_run,
)
from thinkalike.reports.findings.deviations import amendments_text, deviations_table
from thinkalike.reports.findings.readme import (  # the README region and its digest: this package's API too
    END_MARKER,
    REGENERATE,
    START_MARKER,
    readme_region,
    replace_region,
    source_digest,
)
from thinkalike.reports.findings.scorecard import exploratory, render_parts, render_scorecard, scorecard
from thinkalike.reports.findings.text import (
    LITERATURE,
    guarded,
    jsonable,
    not_run_sentence,
    plural_text,
    seconds_text,
    table_of,
    wrap,
)
from thinkalike.reports.findings.timing import RUN_BUDGET_SECONDS, render_timing
from thinkalike.reports.templating import render_template

__all__ = [
    "END_MARKER",
    "REGENERATE",
    "START_MARKER",
    "at_risk",
    "rederived",
    "claims_of",
    "collect_errors",
    "collect_findings",
    "collect_section",
    "findings_document",
    "missing_tables",
    "model_facts",
    "model_roles",
    "provenance",
    "readme_region",
    "render_document",
    "render_findings",
    "replace_region",
    "source_digest",
    "wrap",
]

logger = logging.getLogger(__name__)


def model_facts(tables: Mapping[str, Any]) -> dict[str, ZooModel]:
    """Every zoo model's record (:func:`~thinkalike.models.zoo_record.zoo_model`), in ``zoo_summary`` order, from
    its saved config (``model_configs``), else from the parameters' ``zoo.models``."""
    configs = dict(tables.get("model_configs") or {})
    parameters = tables.get("parameters") or {}
    zoo_models = (parameters.get("zoo") or {}).get("models") or {}
    summary = table_of(tables, "zoo_summary")
    names = list(summary["model"]) if summary is not None else list(configs or zoo_models)
    facts = {}
    for name in names:
        config = configs.get(name) or zoo_models.get(name)
        if config:
            facts[str(name)] = zoo_model(str(name), config)
    return facts


def _run_tables(tables: Mapping[str, Any]) -> RunTables:
    """What every section's ``collect`` reads from the loaded ``tables``: the roles worked out once (from the saved
    model configs, else the parameters' ``zoo.models``) and the untrained controls (the MLEM and embedding findings
    are about trained models)."""
    parameters = tables.get("parameters") or {}
    return RunTables(tables, parameters, model_roles(model_facts(tables)), tuple(untrained_models(parameters)))


def run_context(tables: Mapping[str, Any]) -> dict[str, Any]:
    """The findings a question reads besides its method's section (:data:`~thinkalike.reports.findings.scorecard.CONTEXT`):
    the zoo's roles, from the loaded ``tables``, and the papers' numbers."""
    return json.loads(json.dumps(jsonable({"roles": _run_tables(tables).roles, "literature": LITERATURE})))


def collect_section(section: ReportSection, tables: Mapping[str, Any]) -> dict[str, Any]:
    """One section's numbers from the loaded ``tables`` (``parameters`` among them), as plain JSON (NaN is ``None``;
    a table without what the section needs gives ``{"error": …}``): what the node of the section's pipeline saves as
    :func:`~thinkalike.reports.experiments.findings_dataset` (:mod:`thinkalike.pipelines.section_findings`)."""
    if section.collect is None:
        raise ValueError(f"report section {section.section!r} collects nothing")
    return json.loads(json.dumps(jsonable(guarded(section.collect, _run_tables(tables))), allow_nan=False))


def collect_findings(
    tables: Mapping[str, Any], outline: ReportOutline, saved: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Every number of the findings paragraphs (module docstring): the machine, the zoo's roles, then each section of
    ``outline``. With ``saved`` (section → its saved numbers, ``None``: never saved), a section saved there is taken
    as saved: nothing is collected again. Every other section is collected from the tables: the run's timings (saved
    when the run ends), a section none of whose tables this configuration makes (so the section says which are
    missing), outputs older than the saved sections. Plain JSON."""
    run = _run_tables(tables)
    findings: dict[str, Any] = {
        "machine": {
            "cpu_count": os.cpu_count(),
            "system": platform.system(),
            "architecture": platform.machine(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "literature": LITERATURE,
        "budget_seconds": RUN_BUDGET_SECONDS,
        "roles": run.roles,
    }
    for section in outline.sections:
        if saved is not None and isinstance(saved.get(section.section), Mapping):
            findings[section.section] = saved[section.section]
        elif section.collect is not None:
            findings[section.section] = guarded(section.collect, run)
    return json.loads(json.dumps(jsonable(findings), allow_nan=False))


def untrained_models(parameters: Mapping[str, Any]) -> list[str]:
    """The models of ``activations.models`` that are zoo initialisations (``zoo:<m>?weights=initial``): untrained
    controls, kept out of the findings about trained models."""
    specs = (parameters.get("activations") or {}).get("models") or {}
    return sorted(name for name, spec in specs.items() if isinstance(spec, str) and is_initialisation(spec))


def collect_errors(findings: Any, where: str = "") -> list[str]:
    """``"<section>: <error>"`` for every section that could not be collected."""
    if isinstance(findings, Mapping):
        found = [f"{where or 'findings'}: {findings['error']}"] if "error" in findings else []
        return found + [
            e for key, value in findings.items() for e in collect_errors(value, f"{where}.{key}".strip("."))
        ]
    return []


def missing_tables(findings: Any) -> list[str]:
    """The tables a findings dict says were missing, in any section (sorted, once each)."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, Mapping):
            found.update(value.get("missing") or [])
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(findings)
    return sorted(found)


def _guarded_claims(claims_of_section: Any) -> Any:
    """A section's claims function that gives no claims, with a logged warning, where it fails (one pipeline's
    claims must not take the report down)."""

    def guarded_claims(findings: Mapping[str, Any]) -> list[Claim]:
        try:
            return list(claims_of_section(findings))
        except Exception as error:  # noqa: BLE001 - one pipeline's claims must not take the report down
            logger.warning("claims of %s: %s: %s", claims_of_section.__qualname__, type(error).__name__, error)
            return []

    return guarded_claims


def claims_of(findings: Mapping[str, Any], outline: ReportOutline) -> list[Claim]:
    """Every claim of one run's findings (:mod:`.claims`), section by section of ``outline``; each id starts with its
    section's name (``cka.…``), so ids are unique across sections. A section whose claims cannot be read gives none,
    with a logged warning. The findings are read with their keys sorted, so the claims' order never depends on how a
    dict was ordered (a JSON round trip may sort it)."""
    findings = json.loads(json.dumps(findings, sort_keys=True))
    claims: list[Claim] = []
    seen: set[str] = set()
    for section in outline.sections:
        if section.claims is None:
            continue
        for claim in _guarded_claims(section.claims)(findings):
            if claim.id in seen:
                raise ValueError(f"claim id {claim.id!r} is not unique")
            seen.add(claim.id)
            claims.append(claim)
    return claims


def findings_document(
    replicates: Sequence[Mapping[str, Any]],
    outline: ReportOutline,
    runs: Sequence[Mapping[str, Any] | None] | None = None,
    real: Sequence[Mapping[str, Any]] | None = None,
    with_claims: bool = True,
    real_nli: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The findings of one or more independent replicates (each :func:`collect_findings`' dict; ``runs``: each
    replicate's run record, :mod:`thinkalike.replicates`) with the papers' scorecard and the merged claims:
    ``{"scorecard": [...], "claims": [...], "replicates": [{"replicate", "run", "findings"}, ...]}`` — the scorecard's
    rows (:func:`~thinkalike.reports.findings.scorecard.scorecard`), and every proposition that holds in at least
    one replicate, one margin per replicate, its noise and its status
    (:func:`~thinkalike.reports.findings.claims.merge_claims`). ``real``: the real checkpoints' replicates
    (``{"replicate", "run", "findings"}`` each, ``conf/real``), kept as ``real_replicates`` and answered in the
    scorecard's real-model column (its rows' ``real``); ``real_nli``: conf/real_nli's replicates (fine-tuned copies of
    one real encoder), kept as ``real_nli_replicates`` and answering that column's NLI row. ``outline``: the report's sections (:func:`claims_of`).
    ``with_claims=False``: the replicates' document (docs/findings.json), which holds the scorecard, its parts and the
    exploratory observations but no claims (descriptive sentences no verdict rests on: one run's report keeps
    them)."""
    runs = list(runs) if runs is not None else [None] * len(replicates)
    real_entries = [dict(entry) for entry in real or []]
    real_nli_entries = [dict(entry) for entry in real_nli or []]
    plan_file = package_plan_path()
    rows = scorecard(
        replicates,
        [entry["findings"] for entry in real_entries] or None,
        load_plan(plan_file),
        [entry["findings"] for entry in real_nli_entries] or None,
    )
    return {
        "scorecard": rows,
        "exploratory": exploratory(rows),
        "analysis_plan": {"path": str(PLAN_PATH), "sha256": plan_digest(plan_file)},
        **({"real_replicates": real_entries} if real_entries else {}),
        **({"real_nli_replicates": real_nli_entries} if real_nli_entries else {}),
        **(
            {"claims": merge_claims([single_run(claims_of(findings, outline)) for findings in replicates])}
            if with_claims
            else {}
        ),
        "replicates": [
            {"replicate": (run or {}).get("replicate", index), "run": run, "findings": findings}
            for index, (findings, run) in enumerate(zip(replicates, runs, strict=True))
        ],
    }


def _median_seconds(replicates: Sequence[Mapping[str, Any]]) -> float | None:
    """The replicates' median run time (their run records' ``seconds``), None when none recorded it."""
    seconds = [float(s) for r in replicates if (s := (r.get("run") or {}).get("seconds"))]
    return statistics.median(seconds) if seconds else None


def _first_findings(entries: Sequence[Mapping[str, Any]] | None) -> Mapping[str, Any] | None:
    return entries[0]["findings"] if entries else None


def rederived(document: Mapping[str, Any], outline: ReportOutline) -> dict[str, Any]:
    """A findings document with its scorecard and claims made again by this code from its replicates' saved
    findings (a round-off run, which earlier documents counted as a replicate, is left out: it is no new draw).
    ``analysis_plan`` names the plan it is derived by now; when that plan was amended since (its ``amendments``), its
    ``earlier`` lists each plan the document was collected under (sha256 and the collecting commit)."""
    kept = [r for r in document["replicates"] if not (r.get("run") or {}).get("roundoff")]
    made = findings_document(
        [r["findings"] for r in kept],
        outline,
        [r.get("run") for r in kept],
        document.get("real_replicates"),
        with_claims=False,
        real_nli=document.get("real_nli_replicates"),
    )
    before = document.get("analysis_plan") or {}
    if before.get("earlier"):  # derived again before: the plan it was collected under is named already
        made["analysis_plan"] = {**made["analysis_plan"], "earlier": before["earlier"]}
    elif before.get("sha256") and before["sha256"] != made["analysis_plan"]["sha256"]:
        # the plan was amended after these replicates were collected: say which plan they were collected under
        earlier = [{"sha256": before["sha256"], "git_commit": document.get("git_commit")}]
        made["analysis_plan"] = {**made["analysis_plan"], "earlier": earlier}
    return {**{k: v for k, v in document.items() if k != "claims"}, **made}


def render_findings(findings: Mapping[str, Any], outline: ReportOutline) -> str:
    """One run's findings as markdown (the experiments report): its claims that hold in this run, and
    :func:`render_document` of a one-replicate document."""
    return render_document(findings_document([findings], outline), outline)


def provenance(document: Mapping[str, Any]) -> str:
    """Where the findings of a document come from: one run, or the replicates with their commits, seeds and cost."""
    replicates = document["replicates"]
    claims = document.get("claims") or []
    held = sum(c["status"] == HOLDS for c in claims)
    mixed = sum(c["status"] == MIXED for c in claims)
    first = replicates[0]["findings"]
    machine = first.get("machine") or {}
    where = (
        f"{machine.get('cpu_count', 'n/a')} CPU cores, {machine.get('system', '')} {machine.get('architecture', '')}"
    ).strip()
    if len(replicates) == 1:
        return (
            f"**One run** ({where}). A run is one replicate: each sentence below is a claim that holds in this "
            f"run ({held} claims; its margin is in the run's MLflow metrics as `claims/<id>`). Which claims hold "
            "across replicates, and so on another machine, is what `python -m thinkalike.replicates` decides "
            "(`docs/findings.json` of the repository)."
        )
    commit = document.get("git_commit") or "an uncommitted tree"
    unresolved = sum(c["status"] == UNRESOLVED for c in claims)
    seconds = [(r.get("run") or {}).get("seconds") for r in replicates]
    known = [s for s in seconds if s is not None]
    each = (
        seconds_text(min(known))
        if known and seconds_text(min(known)) == seconds_text(max(known))
        else f"{seconds_text(min(known))}–{seconds_text(max(known))}"
        if known
        else ""
    )
    cost = f"; each replicate's `kedro run` took {each}, {seconds_text(sum(known))} in all" if known else ""
    run_commits = sorted(
        {str((r.get("run") or {}).get("git_commit"))[:12] for r in replicates if (r.get("run") or {}).get("git_commit")}
    )
    ran = (
        f"run at commit {', '.join(f'`{c}`' for c in run_commits)} (`python -m thinkalike.replicates`), "
        if run_commits
        else ""
    )
    if "claims" not in document:
        plan = document.get("analysis_plan") or {}
        return (
            f"**Where these findings come from.** {len(replicates)} independent replicates of the default run, {ran}"
            f"replicate r moving every seed but the data's by r × 1000 — zoo initialisation and data order, φ, the "
            f"NLI encoder and copies, MLEM, the measures' row samples, the embedding fine-tune — while the corpus and "
            f"the NLI pairs stay the same; collected at commit `{str(commit)[:12]}` by "
            f"`{document.get('command') or 'n/a'}`, {document.get('generated_at', 'n/a')}, on {where}{cost}. Every "
            f"verdict above rests on these {len(replicates)} draws, decided by the plan `{plan.get('path', 'n/a')}` "
            f"(sha256 `{str(plan.get('sha256', 'n/a'))[:12]}`); `docs/findings.json` has every part's effects, "
            "intervals and verdict, and `python -m thinkalike.findings_cli --check` checks a run against them."
        )
    return (
        f"**Where these findings come from.** {len(replicates)} independent replicates of the default run, {ran}"
        f"replicate r moving every seed but the data's by r × 1000 — zoo initialisation and data order, φ, the NLI "
        f"encoder and copies, MLEM, the measures' row samples, the embedding fine-tune — while the corpus and the "
        f"NLI pairs stay the same; collected at commit `{str(commit)[:12]}` by `{document.get('command') or 'n/a'}`, "
        f"{document.get('generated_at', 'n/a')}, on {where}{cost}. Every finding below rests on these "
        f"{len(replicates)} draws. {held + mixed + unresolved} distinct propositions hold in at least one replicate "
        f"(a statement and its negation, or one proposition written twice, count once): {held} are findings — "
        f"> 0 in every replicate by more than {NOISE_FACTOR:g} × the spread of their margin — stated with each "
        f"number's range over the replicates; {unresolved} hold in every replicate but within that noise (or with a "
        f"margin that never varies) and are listed as unresolved; {mixed} hold in some replicates only. "
        "`docs/findings.json` has every proposition's margins, noise and status; `python -m "
        "thinkalike.findings_cli --claims` prints a run's own, `--check` checks it against these."
    )


def _most_timed(replicates: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The findings of the first replicate whose run timed the most pipelines (a replicate whose later partial
    re-run, e.g. ``--pipelines scaling,embedding``, replaced its run timings quotes only those)."""

    def timed(replicate: Mapping[str, Any]) -> int:
        pipelines = ((replicate["findings"].get("timing") or {}).get("pipelines")) or {}
        return len(pipelines) if isinstance(pipelines, Mapping) else 0

    return max(replicates, key=timed)["findings"]


def render_document(document: Mapping[str, Any], outline: ReportOutline) -> str:
    """The findings region's markdown from a findings document (:func:`findings_document`), laid out by the template
    ``findings.md.j2`` (:mod:`thinkalike.reports.templating`): the papers' scorecard first, the deviations, each
    question's parts, where the findings come from with the timing paragraph of the replicate that timed the most,
    the exploratory observations, then (a document with claims) each section under its own heading with its claims
    (:func:`~thinkalike.reports.findings.claims.render_claims`: the findings, then the unresolved and varying ones),
    each paragraph wrapped like the rest of the docs."""
    replicates = document["replicates"]
    first = replicates[0]["findings"]
    rows = document.get("scorecard") or scorecard([r["findings"] for r in replicates])
    amended = amendments_text(
        load_plan(package_plan_path()).amendments, (document.get("analysis_plan") or {}).get("earlier", [])
    )
    roundoff = document.get("roundoff")
    return render_template(
        "findings.md.j2",
        filters={"wrap": wrap, "prose": lambda text: wrap(" ".join(text.split()))},
        scorecard=render_scorecard(rows).rstrip("\n"),
        pilot=_pilot_sentence(document),
        deviations=deviations_table(first, _first_findings(document.get("real_nli_replicates"))),
        amended=amended,
        parts=render_parts(rows, _median_seconds(replicates)).rstrip("\n"),
        provenance=provenance(document),
        timing=render_timing(_most_timed(replicates), outline.pipelines, outline.timing_labels),
        exploratory=_exploratory_rows(document.get("exploratory") or []) if "claims" not in document else [],
        sections=_claim_sections(document, outline),
        roundoff=render_roundoff(roundoff, document.get("claims") or []) if roundoff else "",
    )


def _claim_sections(document: Mapping[str, Any], outline: ReportOutline) -> list[dict[str, Any]]:
    """A document with claims (the replicates' before the analysis plan): each section's title and paragraphs, its
    claims (those round-off could turn over withheld), or why it has none; a document without claims has none."""
    if "claims" not in document:
        return []
    claims = document["claims"]
    word = "replicates" if len(document["replicates"]) > 1 else "runs"
    first = document["replicates"][0]["findings"]
    roundoff = document.get("roundoff")
    withheld = frozenset(at_risk(roundoff, claims)) if roundoff else frozenset()
    grouped = by_section(claims)
    sections = []
    for section in (s for s in outline.sections if s.claims is not None):
        held = grouped.get(section.section, [])
        if not held and not section.listed_without_claims:
            continue
        if held:
            paragraphs = list(render_claims(held, word, withheld))
        else:
            collected = first.get(section.section) or {}
            message = not_run_sentence(section.title, collected) if isinstance(collected, Mapping) else None
            paragraphs = [message or "No claim holds in any replicate."]
        sections.append({"title": section.title, "paragraphs": paragraphs})
    return sections


def _pilot_sentence(document: Mapping[str, Any]) -> str:
    """Which replicates these are: the plan's pilot (they informed δ and the estimands) or its deciding ones."""
    plan = load_plan(package_plan_path())
    if document.get("git_commit") == plan.pilot.commit:
        return (
            f"These {len(document['replicates'])} zoo replicates are the analysis plan's pilot (commit "
            f"{plan.pilot.commit[:7]}): they informed its δ and estimands, so their verdicts are not confirmatory; "
            f"the deciding replicates ({plan.deciding.zoo_replicates} new seeds from replicate "
            f"{plan.deciding.first_replicate} on) are not run yet."
        )
    return f"Decided by the plan {PLAN_PATH} on new seeds (not the pilot's)."


def _exploratory_rows(observations: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The plan's exploratory observations (secondary parts, at most 20) as the page's table rows: each an estimate
    with its 95 % interval, n and the size of the family it was picked from; none enters a verdict."""
    rows = []
    for o in observations:
        ci = o.get("ci95")
        interval = f" [{ci[0]:+.3g}, {ci[1]:+.3g}]" if ci and ci[0] != ci[1] else ""
        estimate = f"{o['mean']:+.3g}{interval}".replace("-", "−")
        rows.append(
            {"question": o["question"], "part": o["part"], "estimate": estimate, "n": o["n"], "family": o["family"]}
        )
    return rows


def at_risk(roundoff: Mapping[str, Any], claims: Sequence[Mapping[str, Any]]) -> list[str]:
    """The claims that hold in every replicate by no more than round-off moved their own margin (against replicate
    0, :func:`roundoff_comparison`): another CPU could turn them over, so they are not stated as findings."""
    changes = roundoff.get("margin_changes") or {}
    return sorted(
        c["id"]
        for c in claims
        if c["status"] == HOLDS and min(m for m in c["margin"] if m is not None) <= changes.get(c["id"], 0.0)
    )


def _roundoff_against_replicates(roundoff: Mapping[str, Any], claims: Sequence[Mapping[str, Any]]) -> str:
    """How many of the claims that hold do so by no more than round-off moves them (:func:`at_risk`)."""
    held = [c for c in claims if c["status"] == HOLDS]
    if not held:
        return ""
    within = at_risk(roundoff, claims)
    text = (
        f" Of the {len(held)} claims that hold in every replicate, {len(within)} hold by no more than round-off "
        f"moved their own margin here"
    )
    return text + (
        f" ({', '.join(f'`{i}`' for i in within)}): another CPU could turn them over, so they are not stated above."
        if within
        else ": round-off alone would not turn any of them over."
    )


def render_roundoff(roundoff: Mapping[str, Any], claims: Sequence[Mapping[str, Any]] = ()) -> str:
    """The paragraph on what float round-off alone moves (:func:`roundoff_comparison`), against the claims' margins."""
    flipped = roundoff.get("claims_changed") or []
    changed = (
        "no claim changed side"
        if not flipped
        else f"{plural_text(len(flipped), 'claim')} changed side: " + ", ".join(f"`{c}`" for c in flipped)
    )
    return (
        f"**Round-off alone** (replicate 0 again with the same seeds and other float kernels, "
        f"`{roundoff['setting']}`, standing in for another CPU): {roundoff['n_changed']:,} of "
        f"{roundoff['n_numbers']:,} collected numbers moved, the median by {roundoff['median_change']:.2g} and the "
        f"largest by {roundoff['max_change']:.2g} (`{roundoff['max_path']}`); of the {roundoff['n_claims']} claims "
        f"of replicate 0, {changed} ({roundoff['n_margins_moved']} margins moved at all). Bit for bit the same: a "
        "run on one machine, whatever the runner or the load (the Dask parity test checks every output; a training loop "
        "at 1 and 2 threads gave identical weights too). Not the same: across CPUs, whose vector units and BLAS kernels differ, the numbers "
        "move at round-off and training amplifies it. This run has replicate 0's seeds, so it is no new draw and "
        "not counted among the replicates; it bounds what another CPU moves."
        + _roundoff_against_replicates(roundoff, claims)
    )


def roundoff_comparison(
    reference: Mapping[str, Any], other: Mapping[str, Any], setting: str, outline: ReportOutline
) -> dict[str, Any]:
    """What float round-off alone moves between two runs with the same seeds: how many of the collected numbers differ
    (and by how much, absolutely), and which claims of ``reference`` change side in ``other``."""
    a, b = dict(_numbers_of(reference)), dict(_numbers_of(other))
    common = sorted(set(a) & set(b))
    changes = {path: abs(a[path] - b[path]) for path in common if a[path] != b[path]}
    ordered = sorted(changes.values())
    claims_a = {c.id: c.margin for c in claims_of(reference, outline)}
    claims_b = {c.id: c.margin for c in claims_of(other, outline)}
    from thinkalike.reports.findings.claims import holds

    flipped = sorted(i for i in claims_a if holds(claims_a[i]) != holds(claims_b.get(i)))
    margin_changes = {
        i: round(abs(a_margin - b_margin), 9)
        for i, a_margin in claims_a.items()
        if a_margin is not None and (b_margin := claims_b.get(i)) is not None
    }
    largest = max(changes, key=changes.__getitem__) if changes else "none"
    return {
        "setting": setting,
        "n_numbers": len(common),
        "n_changed": len(changes),
        "median_change": ordered[len(ordered) // 2] if ordered else 0.0,
        "max_change": ordered[-1] if ordered else 0.0,
        "max_path": largest,
        "n_claims": len(claims_a),
        "claims_changed": flipped,
        "n_margins_moved": sum(change > 0 for change in margin_changes.values()),
        "margin_changes": margin_changes,
    }


def _numbers_of(value: Any, path: str = "") -> list[tuple[str, float]]:
    """Every number of a findings dict with its dotted path (timing and the machine left out: they are not results)."""
    if isinstance(value, Mapping):
        return [
            pair
            for key, item in value.items()
            if not (path == "" and key in ("timing", "machine", "roles"))
            for pair in _numbers_of(item, f"{path}.{key}".strip("."))
        ]
    if isinstance(value, list):
        return [pair for i, item in enumerate(value) for pair in _numbers_of(item, f"{path}[{i}]")]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [(path, float(value))]
    return []
