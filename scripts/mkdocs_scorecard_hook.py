"""MkDocs hook (mkdocs.yml ``hooks:``): the home page shows the papers' scorecard from the findings page, never a
copy typed by hand.

docs/findings.md is generated (``python -m thinkalike.findings_cli --write``) between its
``<!-- findings:start -->`` and ``<!-- findings:end -->`` comments, so no snippet section marker can be placed around
its scorecard. Instead, when the site is built, the line :data:`MARKER` of a page is replaced by the section of
docs/findings.md under the heading :data:`HEADING` (its body, up to the next ``## `` heading). A page with the marker
and a findings page without that section fail the build, so the home page never silently loses its table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: The line a page puts where the scorecard goes.
MARKER = "<!-- scorecard: the papers' questions, from findings.md -->"
#: The findings page's heading of the scorecard.
HEADING = "## The papers' questions"
FINDINGS = "findings.md"


def scorecard_section(findings: str) -> str:
    """The body of ``findings``' section :data:`HEADING`: the lines after it, up to the next ``## `` heading (or
    the generated region's end); a ``ValueError`` when the page has no such section."""
    lines = findings.splitlines()
    try:
        start = lines.index(HEADING) + 1
    except ValueError:
        raise ValueError(f"{FINDINGS} has no heading {HEADING!r}: the home page's scorecard has no source") from None
    end = next(
        (i for i in range(start, len(lines)) if lines[i].startswith("## ") or lines[i] == "<!-- findings:end -->"),
        len(lines),
    )
    body = "\n".join(lines[start:end]).strip()
    if "|---" not in body:
        raise ValueError(f"{FINDINGS}'s section {HEADING!r} holds no table")
    return body


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER not in markdown:
        return markdown
    findings = Path(config["docs_dir"]) / FINDINGS
    return markdown.replace(MARKER, scorecard_section(findings.read_text(encoding="utf-8")))
