"""The package's docstrings and comments state reasons, not machine measurements (issue 57).

A timing taken on one machine ("71 ms against 38 ms on this 2-core CPU", "2.6× faster here") or a piece of history
("the metric name it had before …") goes stale as the code and the machines change, and nothing checks it. The
reason a measurement backed (the mechanism, the formula, the design decision) stays true; the measurement itself
lives with its benchmark (``benchmarks/*.py``, results in ``docs/benchmarks/``), dated, with its machine.

This test reads every module of ``src/thinkalike``: every string statement (module, class and function docstrings,
attribute docstrings) through :mod:`ast`, every comment (consecutive comment lines as one block) through
:mod:`tokenize`, and fails on the patterns of :data:`PATTERNS`, naming file:line and the text. The patterns are
narrow: a duration next to the words of a timing (took, per step, against …), a speed ratio or percentage, "measured
on this …", an N-core machine, and a few phrasings of history. Sizes ("32 MB"), settings ("a 60 s timeout"),
formulas and accuracy bounds ("|ΔCKA| < 1e-8") do not match. A line that matches and is right to stay is listed in
:data:`ALLOWED` with its reason.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "thinkalike"

_NUMBER = r"\d+(?:[.,]\d+)?(?:\s?[–-]\s?\d+(?:[.,]\d+)?)?"
_DURATION = _NUMBER + r"\s?(?:ms|µs|us|ns|s|seconds?|min|minutes?)\b"
_MACHINE_UNIT = r"(?:step|pair|call|token|batch|layer pair|head|element|multiply-add|permutation)s?"

#: What a statement of a machine measurement looks like (case-insensitive, whitespace of a block collapsed to one
#: space, so a phrase broken over two lines matches).
PATTERNS: dict[str, re.Pattern[str]] = {
    name: re.compile(pattern, re.IGNORECASE)
    for name, pattern in {
        "timing: took/takes a duration": r"\b(?:took|takes|taking|spent)\b[^.;]{0,40}?\b" + _DURATION,
        "timing: finished in a duration": r"\b(?:trained|ran|finished|completed)\sin\s(?:about\s)?" + _DURATION,
        "timing: a duration per unit of work": _DURATION + r"\s(?:per|a|an|each)\s" + _MACHINE_UNIT + r"\b",
        "timing: a duration against another": _NUMBER
        + r"(?:\s?(?:ms|µs|us|ns|s))?\s(?:against|vs\.?|versus)\s(?:about\s)?"
        + _DURATION,
        "timing: a duration to do something": _DURATION + r"\sto\s(?:pickle|unpickle|draw|render|train|fit)\b",
        "timing: a duration on N threads/cores": _DURATION + r"\son\s(?:one|two|\d+)\s(?:threads?|cores?)\b",
        "timing: a duration at a size": _DURATION + r"\sat\sn\s=",
        "timing: costs a duration": r"\bcost(?:s|ing)?\s(?:about\s|~)?" + _DURATION,
        "timing: a duration each or of CPU": _DURATION + r"\s(?:each\b|of\sCPU\b)",
        "timing: half a second more": r"\bhalf\sa\s(?:second|minute)\s(?:more|less|longer)\b",
        "ratio: N× faster/slower": _NUMBER
        + r"\s?[×x]\s(?:faster|slower|longer|shorter|quicker|their\sseparate|the\s(?:time|cost)|a\sstep)\b",
        "ratio: N % faster/slower/more CPU": _NUMBER
        + r"\s?%\s(?:faster|slower|longer|shorter|more\s(?:CPU|time|wall)|less\s(?:CPU|time|wall)"
        + r"|of\s(?:its|their|the)\stime|of\sthe\sbest)\b",
        "machine: measured on this/here/a date": r"\bmeasured\s(?:on\s(?:this|an?|one|the\sdefault\srun)\b"
        + r"|per\s|\d{4}-\d{2}-\d{2})|(?<!not\s)\bmeasured\shere\b",
        "machine: an N-core machine": r"\bon\s(?:this|an?|one)\s(?:\(?shared\)?\s)?\d+-core\b"
        + r"|\b\d+-core\s(?:CPU|machine)\b",
        "history: what it was before": r"\b(?:it|they)\shad\sbefore\b|\bbefore\sthe\snext\schange\b"
        + r"|\b(?:was|were)\sonce\b|\bsince\san\searlier\schange\b|\bused\sto\sbe\b|\bformerly\b"
        + r"|\bbefore\sthe\s(?:option|metric\sgroups|groups)\b",
    }.items()
}

#: (path relative to src/thinkalike, a fragment of the matched text) → why it stays. Files other changes are editing
#: at the same time are listed as "edited by another change" until those changes land.
ALLOWED: dict[tuple[str, str], str] = {}


def _string_blocks(tree: ast.AST) -> Iterator[tuple[int, list[str]]]:
    """(first line, lines) of every string statement: docstrings of modules, classes and functions, and attribute
    docstrings (a string right after an assignment)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            yield node.value.lineno, node.value.value.splitlines()


def _comment_blocks(source: str) -> Iterator[tuple[int, list[str]]]:
    """(first line, lines) of every comment, consecutive comment lines as one block."""
    start, lines, last = 0, [], -1
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        row = token.start[0]
        if lines and row != last + 1:
            yield start, lines
            lines = []
        if not lines:
            start = row
        lines.append(token.string.lstrip("#:").strip())
        last = row
    if lines:
        yield start, lines


def findings(path: Path) -> Iterator[tuple[int, str, str]]:
    """(line, pattern name, matched block) of every docstring or comment of ``path`` that states a measurement."""
    source = path.read_text(encoding="utf-8")
    for first, lines in (*_string_blocks(ast.parse(source)), *_comment_blocks(source)):
        text, starts = "", []
        for line in lines:
            starts.append(len(text))
            text += " ".join(line.split()) + " "
        for name, pattern in PATTERNS.items():
            for match in pattern.finditer(text):
                index = max(i for i, offset in enumerate(starts) if offset <= match.start())
                yield first + index, name, match.group(0)


def test_no_docstring_or_comment_states_a_machine_measurement():
    found, used = [], set()
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        for line, name, text in findings(path):
            allowed = [key for key in ALLOWED if key[0] == relative and key[1] in text]
            if allowed:
                used.update(allowed)
                continue
            found.append(f"src/thinkalike/{relative}:{line}: {name}: {text!r}")
    assert not found, (
        "docstrings and comments state the reason, not a measurement of this machine (the measurement belongs in "
        "benchmarks/ and docs/benchmarks/):\n" + "\n".join(found)
    )
    assert used == set(ALLOWED), f"allow-list entries that match nothing any more: {sorted(set(ALLOWED) - used)}"


@pytest.mark.parametrize(
    "text",
    [
        "71 ms through the bridge, 38 ms here (measured on this 2-core CPU)",
        "a 300-step zoo model at 2 threads took 13× longer beside one busy process",
        "about 4× faster than rankdata's",
        "1.56 against 2.07 ms per step",
        "the gram form's 50 permutations took 6.3 s a pair",
        "a 1-worker cluster took 12 % more CPU",
        "workers spent 45 % of their time in the kernel, a model trained 2.7× slower",
        "gathering 1,024 pairs' distances took 0.2 ms on one thread and 25–40 ms on two",
        "1.6 s against 0.45 s per pair",
        "(the metric name it had before the run's metrics were grouped)",
        "at 1 thread the same model trained in 18 s at a load average of 7",
        "0.15 ms at n = 255 in float64",
        "4 blocks at n = 1024: within 3% of the best on 2 CPU cores",
        "about 1.3 s per head and group for V = 49k on 2 CPU cores",
        "fusing two seeds cost 0.85–1.05× their separate steps",
        "eleven of them took half a second more per pair",
        "Costs about 0.05 s (1,000 stimuli, 1,024 pairs, CPU).",
        "(about 30 ms each, two per pair)",
        "imports the project again (5–7 s of CPU each here)",
    ],
)
def test_the_patterns_find_measurements(text):
    assert any(pattern.search(text) for pattern in PATTERNS.values()), text


@pytest.mark.parametrize(
    "text",
    [
        "n × n float64 arrays of 32 MB",
        "a 60 s timeout (dask.timeout), then the run stops",
        "every 10 ms by Dask's defaults",
        "|ΔCKA| < 1e-8 on Gaussian-like features (largest measured 2e-13, at n = 4)",
        "the first {count} took {seconds:.1f} s",
        "about twice as fast as float64 on CPU",
        "the evaluation split it was measured on",
        "The default run's time budget on 2 idle CPU cores",
        "Numbers from the papers the findings are compared with (not measured here).",
        "a timeout of 60 s, checked every 0.5 s on a terminal",
    ],
)
def test_the_patterns_leave_legitimate_statements(text):
    assert not any(pattern.search(text) for pattern in PATTERNS.values()), text
