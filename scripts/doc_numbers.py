"""The run times, sizes and counts the documentation quotes, from one generated source: the saved results, never
typed by hand.

Every time, memory size and count of a run's output that a page quotes comes from committed, generated JSON:

* the latest ``docs/benchmarks/results/default_run-<date>.json`` (``python benchmarks/default_run.py --json …``):
  the default run idle and beside one busy process, with the machine probe, each pipeline's peak RSS, and the commit
  and machine it ran on;
* ``docs/findings.json`` (``python -m thinkalike.findings_cli``): each replicate's ``kedro run`` time;
* ``docs/benchmarks/results/outside-observations.json``: times reported from other machines (an issue's words,
  with their source), kept apart from the project's own measurements.

A page puts the text between ``<!-- numbers:<name> -->`` and ``<!-- numbers:end -->`` (:data:`REGIONS` names
what each region holds); ``python scripts/doc_numbers.py --write`` rewrites every region of README.md
and docs/ from the JSON, and without ``--write`` it lists the regions that differ and exits 1.
``tests/docs/test_quoted_numbers.py`` checks that every region is what this renders and that no page quotes a time
(:data:`TIME`), a size (:data:`SIZE`) or a count of a run's output (:data:`COUNT`) outside a region, bar the sizes
and counts it allows by name as settings or hardware facts.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from thinkalike.run_record.clock import format_seconds

RESULTS = Path("docs/benchmarks/results")
FINDINGS_JSON = Path("docs/findings.json")
OUTSIDE_JSON = RESULTS / "outside-observations.json"
DEFAULT_RUN_PAGE = Path("docs/benchmarks/default-run.md")
#: A saved default-run result: ``default_run-YYYY-MM-DD.json`` (a suffix after the date for a second one that day).
RESULT_NAME = re.compile(r"default_run-(\d{4}-\d{2}-\d{2})(-[\w-]+)?\.json")
REGION = re.compile(r"<!-- numbers:([a-z-]+) -->\n(.*?)<!-- numbers:end -->", re.DOTALL)
COMMAND = "python scripts/doc_numbers.py --write"
#: A time as the pages write one: ``7 min 20 s``, ``16 min``, ``4.1 s``, ``3.64 ms``, ``10 minutes``, ``7½ minutes``.
TIME = re.compile(
    r"\b\d+(?:[.,]\d+)?½? ?(?:min(?:utes?)?(?: \d+(?:\.\d+)? s)?|s|ms|seconds?|hours?|h)\b|\d+½ ?minutes?\b"
)
#: A memory or disk size: ``1.4 GiB``, ``290 MB``, ``512 MiB``, ``64 KB``, ``4 bytes``.
SIZE = re.compile(r"(?<![\w.,])\d[\d,]*(?:\.\d+)? ?(?:[KMGTP]i?B|kB|bytes?)\b")
_COUNT_NUMBER = r"(?<![\w.,/=-])(?!(?:19|20)\d\d\b)\d[\d,]*"
#: A count of what a run produces: ``235 claims``, ``260 of them claims``, ``67 unresolved findings``, ``3 of 4
#: replicates``, ``57–60 of 61 model layers``, ``212 passed``, ``18 zoo models`` (a year is not a count).
COUNT = re.compile(
    _COUNT_NUMBER + r" (?:of (?:them|\d[\d,]*) )?(?:[a-z][\w-]* )?"
    r"(?:claims?|metrics?|findings?|verdicts?|replicates?|rows?|artifacts?|tests?|checks?|warnings?|errors?)\b"
    r"|" + _COUNT_NUMBER + r" (?:passed|failed|skipped|xfailed)\b"
    r"|" + _COUNT_NUMBER + r"(?:[–-]\d+)? of \d[\d,]* [a-z][\w-]*"
    r"|" + _COUNT_NUMBER + r" zoo models\b|\bzoo of \d+"
)


def latest_default_run(root: Path) -> Path:
    """The newest saved result of the default run itself (by the date in its name, then its name): one of the
    README's command, not a smoke run (``--env``) or a part (``--pipelines``)."""
    found = sorted(
        (match.group(1), path.name, path)
        for path in (root / RESULTS).glob("default_run-*.json")
        if (match := RESULT_NAME.fullmatch(path.name))
        and not {"--env", "--pipelines"} & set(_read(path).get("command", []))
    )
    if not found:
        raise FileNotFoundError(
            f"no {RESULTS}/default_run-<date>.json: run `python benchmarks/default_run.py --json …`"
        )
    return found[-1][2]


#: A saved run of the real checkpoints' environment (``python benchmarks/default_run.py --env real … --json``).
REAL_RUN_NAME = re.compile(r"real_run-(\d{4}-\d{2}-\d{2})(-[\w-]+)?\.json")
#: A saved run of the real-encoder NLI environment (``python benchmarks/default_run.py --env real_nli … --json``).
REAL_NLI_RUN_NAME = re.compile(r"real_nli_run-(\d{4}-\d{2}-\d{2})(-[\w-]+)?\.json")
REAL_MODELS_PAGE = Path("docs/real-models.md")


def latest_real_run(root: Path, name: re.Pattern[str] = REAL_RUN_NAME) -> Path | None:
    """The newest saved result whose file name matches ``name`` (the real checkpoints' run by default; by the date in
    its name), or None."""
    found = sorted(
        (match.group(1), path.name, path)
        for path in (root / RESULTS).glob("*.json")
        if (match := name.fullmatch(path.name))
    )
    return found[-1][2] if found else None


def _saved_run(root: Path, name: re.Pattern[str], replicates: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The numbers of the newest saved run matching ``name`` (where, when, at which commit, by which command, its
    idle time and per-pipeline totals) and the run times of ``replicates``; None when none was saved."""
    path = latest_real_run(root, name)
    if path is None:
        return None
    result = _read(path)
    provenance = result.get("provenance") or {}
    return {
        "file": path.relative_to(root).as_posix(),
        "date": name.fullmatch(path.name).group(1),  # type: ignore[union-attr]
        "commit": (provenance.get("git_commit") or "")[:7] or None,
        "machine": _machine_text(provenance.get("machine") or "a machine"),
        "cpu_count": result["cpu_count"],
        "command": "kedro " + " ".join(result["command"][result["command"].index("run") :]),
        "seconds": result["runs"]["idle"]["process_seconds"],
        "totals": result["totals"]["idle"],
        "replicate_seconds": [r["run"]["seconds"] for r in replicates if (r.get("run") or {}).get("seconds")],
    }


def _read(path: Path) -> Any:
    # default_run.py writes NaN for a missing peak RSS (json.dumps' default), which json.loads reads back
    return json.loads(path.read_text(encoding="utf-8"))


def _machine_text(machine: Any) -> str:
    if isinstance(machine, str):
        return machine
    cores = f"{machine.get('cpu_count')}-core"
    cpu = machine.get("cpu_model") or "CPU model not recorded"
    flags = machine.get("cpu_flags")
    flags_text = f", {'/'.join(flags)}" if flags else ""
    return f"a {cores} {machine.get('system', '')} {machine.get('architecture', '')} machine ({cpu}{flags_text})"


def collect(root: Path) -> dict[str, Any]:
    """Every number the regions quote, each with where it comes from."""
    path = latest_default_run(root)
    result = _read(path)
    provenance = result.get("provenance") or {}
    runs = result["runs"]
    idle, busy = runs["idle"], runs["busy"]
    peaks = [row["peak_rss_mb"] for row in result["totals"]["idle"] if not math.isnan(float(row["peak_rss_mb"]))]
    numbers: dict[str, Any] = {
        "file": path.relative_to(root).as_posix(),
        "date": RESULT_NAME.fullmatch(path.name).group(1),  # type: ignore[union-attr]
        "commit": (provenance.get("git_commit") or "")[:7] or None,
        "machine": _machine_text(provenance.get("machine") or f"a {result['cpu_count']}-core machine"),
        "cpu_count": result["cpu_count"],
        "command": "kedro " + " ".join(result["command"][result["command"].index("run") :]),
        "idle_seconds": idle["process_seconds"],
        "busy_seconds": busy["process_seconds"],
        "probe_ms": idle["probe_ms_before"],
        "peak_rss_mb": max(peaks) if peaks else None,
        "totals": result["totals"],
        "probes": {condition: (run["probe_ms_before"], run["probe_ms_after"]) for condition, run in runs.items()},
        "runs": runs,
    }
    findings_path = root / FINDINGS_JSON
    replicates = _read(findings_path)["replicates"] if findings_path.exists() else []
    numbers["replicate_seconds"] = [r["run"]["seconds"] for r in replicates if r.get("run", {}).get("seconds")]
    numbers["replicate_cores"] = sorted(
        {r["findings"]["machine"]["cpu_count"] for r in replicates if "machine" in r.get("findings", {})}
    )
    outside_path = root / OUTSIDE_JSON
    numbers["outside"] = _read(outside_path)["observations"] if outside_path.exists() else []
    document = _read(findings_path) if findings_path.exists() else {}
    numbers["real"] = _saved_run(root, REAL_RUN_NAME, document.get("real_replicates", []))
    numbers["real_nli"] = _saved_run(root, REAL_NLI_RUN_NAME, document.get("real_nli_replicates", []))
    return numbers


def _link(page: Path, target: Path) -> str:
    return Path(os.path.relpath(target, page.parent)).as_posix()


def render_run_time(numbers: Mapping[str, Any], page: Path) -> str:
    """The default run's time: idle and busy, on which machine, at which commit, by which command; the range of the
    saved runs on 2-core machines; the outside observations."""
    commit = f" at commit {numbers['commit']}" if numbers["commit"] else " (commit not recorded)"
    peak = numbers["peak_rss_mb"]
    memory = "" if peak is None else f" (peak memory {peak / 1024:.1f} GiB: the largest peak RSS of its nodes)"
    text = (
        f"The default run (`{numbers['command']}`) took **{format_seconds(numbers['idle_seconds'])}** on "
        f"{numbers['cpu_count']} idle CPU cores{memory} and {format_seconds(numbers['busy_seconds'])} beside one other busy "
        f"process: measured by `python benchmarks/default_run.py` on {numbers['date']}{commit}, on "
        f"{numbers['machine']}, whose machine probe read {numbers['probe_ms']:.2f} ms a step "
        f"([default run]({_link(page, DEFAULT_RUN_PAGE)}), `{numbers['file']}`)."
    )
    saved = [numbers["idle_seconds"], *numbers["replicate_seconds"]]
    if numbers["replicate_seconds"] and numbers["replicate_cores"] == [numbers["cpu_count"]]:
        text += (
            f" The saved runs of it on {numbers['cpu_count']}-core machines took {format_seconds(min(saved))} to "
            f"{format_seconds(max(saved))} (that idle run and the `kedro run` of the findings' "
            f"{len(numbers['replicate_seconds'])} replicates, `{FINDINGS_JSON.as_posix()}`)."
        )
    for seen in numbers["outside"]:
        text += (
            f" Outside observation ({seen['source']}): on {seen['machine']} the same run took "
            f"{format_seconds(seen['process_seconds'])}"
            + (f" ({format_seconds(seen['run_seconds'])} inside Kedro)" if seen.get("run_seconds") else "")
            + "."
        )
    return _wrap(text) + "\n"


def render_default_run_current(numbers: Mapping[str, Any], page: Path) -> str:
    """The default-run benchmark's current summary: :func:`render_run_time` and the latest result's table."""
    idle = {row["pipeline"]: row for row in numbers["totals"]["idle"]}
    busy = {row["pipeline"]: row for row in numbers["totals"]["busy"]}
    labels = {"(run)": "(start: validation, MLflow run, catalog)", "total": "**run** (run_seconds)"}
    lines = [
        "| pipeline | nodes | idle | busy | busy / idle | CPU s idle | CPU s busy | peak RSS idle (MiB) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, row in idle.items():
        other = busy.get(name)
        seconds_busy = other["seconds"] if other else float("nan")
        ratio = f"{seconds_busy / row['seconds']:.2f}×" if other and row["seconds"] > 0 else "–"
        peak = float(row["peak_rss_mb"])
        lines.append(
            f"| {labels.get(name, name)} | {row['nodes']} | {format_seconds(row['seconds'])} | "
            f"{format_seconds(seconds_busy)} | {ratio} | {row['cpu_seconds']:.1f} | "
            f"{other['cpu_seconds'] if other else float('nan'):.1f} | {'–' if math.isnan(peak) else f'{peak:.0f}'} |"
        )
    runs = numbers["runs"]
    process_idle, process_busy = runs["idle"]["process_seconds"], runs["busy"]["process_seconds"]
    lines.append(
        f"| `kedro run` process | | {format_seconds(process_idle)} | {format_seconds(process_busy)} | "
        f"{process_busy / process_idle:.2f}× | | | |"
    )
    probes = "; ".join(
        f"{condition} {before:.2f} → {after:.2f}" for condition, (before, after) in numbers["probes"].items()
    )
    return (
        render_run_time(numbers, page)
        + "\n"
        + "\n".join(lines)
        + f"\n\nMachine probe (ms a step, just before → just after each run): {probes}.\n"
    )


def _render_saved_run(real: Mapping[str, Any] | None, env: str, what: str) -> str:
    """A saved run of ``env`` (:func:`_saved_run`): its time and peak memory idle, per pipeline, on which machine, at
    which commit, by which command; the range of its replicates' runs (``what`` they answer)."""
    if real is None:
        return f"Not measured yet: no saved `python benchmarks/default_run.py --env {env} … --json` result.\n"
    peaks = [float(row["peak_rss_mb"]) for row in real["totals"] if not math.isnan(float(row["peak_rss_mb"]))]
    commit = f" at commit {real['commit']}" if real["commit"] else ""
    text = (
        f"`{real['command']}` took **{format_seconds(real['seconds'])}** on {real['cpu_count']} idle CPU cores, "
        f"peak memory {max(peaks) / 1024:.1f} GiB (the largest peak RSS of a pipeline's nodes): measured by "
        f"`python benchmarks/default_run.py --env {env} --pipelines … --conditions idle` on {real['date']}{commit}, "
        f"on {real['machine']} (`{real['file']}`)."
    )
    if real["replicate_seconds"]:
        seconds = real["replicate_seconds"]
        text += (
            f" The {len(seconds)} replicates behind {what} took {format_seconds(min(seconds))}"
            f" to {format_seconds(max(seconds))} each, beside other work on the same {real['cpu_count']} cores."
        )
    labels = {"(run)": "(start: validation, MLflow run, catalog)", "total": "**run** (run_seconds)"}
    lines = [
        "| pipeline | nodes | time (its nodes, summed over the worker processes) | CPU s | peak RSS (GiB) |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in real["totals"]:
        peak = float(row["peak_rss_mb"])
        lines.append(
            f"| {labels.get(row['pipeline'], row['pipeline'])} | {row['nodes']} | {format_seconds(row['seconds'])} | "
            f"{row['cpu_seconds']:.1f} | {'–' if math.isnan(peak) else f'{peak / 1024:.1f}'} |"
        )
    return _wrap(text) + "\n\n" + "\n".join(lines) + "\n"


def render_real_run(numbers: Mapping[str, Any], page: Path) -> str:
    """The real checkpoints' run (``conf/real``)."""
    return _render_saved_run(numbers.get("real"), "real", "the scorecard's real-model column")


def render_real_nli_run(numbers: Mapping[str, Any], page: Path) -> str:
    """The real-encoder NLI run (``conf/real_nli``)."""
    return _render_saved_run(numbers.get("real_nli"), "real_nli", "the real-model column's NLI row")


#: What each region holds: its name → the function that renders it for a page.
REGIONS: dict[str, Callable[[Mapping[str, Any], Path], str]] = {
    "run-time": render_run_time,
    "default-run-current": render_default_run_current,
    "real-run": render_real_run,
    "real-nli-run": render_real_nli_run,
}


def _wrap(text: str, width: int = 118) -> str:
    """``text`` in lines of at most ``width`` characters, broken at spaces outside backticks and links."""
    lines: list[str] = []
    line = ""
    text = TIME.sub(lambda match: match.group(0).replace(" ", "\0"), text)  # a time stays on one line
    for word in re.findall(r"(?:`[^`]*`|\[[^\]]*\]\([^)]*\)|\S)+", text):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "\n".join([*lines, line]).replace("\0", " ")


def pages(root: Path) -> list[Path]:
    """README.md and every page under docs/."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def regions(text: str) -> Iterator[re.Match[str]]:
    return REGION.finditer(text)


def rendered(text: str, page: Path, numbers: Mapping[str, Any]) -> str:
    """``text`` with every region rewritten; ``KeyError`` for a region name :data:`REGIONS` does not know."""

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in REGIONS:
            raise KeyError(f"{page}: unknown numbers region {name!r} (known: {', '.join(REGIONS)})")
        return f"<!-- numbers:{name} -->\n{REGIONS[name](numbers, page)}<!-- numbers:end -->"

    return REGION.sub(fill, text)


def stale_pages(root: Path) -> dict[Path, str]:
    """Each page whose regions differ from what the JSON renders, with its rendered text."""
    numbers = collect(root)
    stale = {}
    for page in pages(root):
        text = page.read_text(encoding="utf-8")
        new = rendered(text, page.relative_to(root), numbers)
        if new != text:
            stale[page] = new
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="the repository (default: cwd)")
    parser.add_argument("--write", action="store_true", help="rewrite the regions (default: list the stale ones)")
    args = parser.parse_args(argv)
    stale = stale_pages(args.repo)
    for page, text in stale.items():
        if args.write:
            page.write_text(text, encoding="utf-8")
        print(f"{'updated' if args.write else 'stale'}: {page.relative_to(args.repo)}")
    return 0 if args.write or not stale else 1


if __name__ == "__main__":
    sys.exit(main())
