"""The HTML blocks the experiments report is made of (no Kedro): markdown sentences, a figure — an embedded PNG or an
interactive plotly figure — beside the sentences that read it, and small tables of numbers.

An interactive figure is a ``<div>`` and the script that draws it into the div with the page's one copy of plotly.js
(:func:`plotly_script`, in the page's head): :func:`plotly_figure` never embeds plotly.js itself. Each block's markup is
a macro of ``templates/blocks.html.j2``, which escapes every value but the HTML made here (markdown's, plotly's).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import plotly.offline
from markdown_it import MarkdownIt

from thinkalike.reports.templating import template_macros

_MARKDOWN = MarkdownIt("commonmark")
#: Plotly's options for every interactive figure: no link to Plotly's site, no "edit in Chart Studio".
PLOTLY_CONFIG = {"displaylogo": False, "responsive": True, "showLink": False, "toImageButtonOptions": {"scale": 2}}
#: The height of an interactive figure without its own (px).
PLOTLY_HEIGHT = 520


def markdown_html(text: str) -> str:
    """``text`` (CommonMark: the findings' sentences quote names as inline code) as HTML."""
    return _MARKDOWN.render(text)


def sentences_html(sentences: Sequence[str]) -> str:
    """The sentences of the findings (markdown), one paragraph each, in a ``claims`` block."""
    return str(_blocks().claims([markdown_html(sentence) for sentence in sentences]))


def png_figure(caption: str, image: bytes) -> str:
    """A saved PNG, embedded as base64 (the file stands alone), with its caption."""
    return str(_blocks().png_figure(caption, base64.b64encode(image).decode("ascii")))


def plotly_figure(caption: str, figure: go.Figure, div_id: str) -> str:
    """An interactive figure (hover for the values) drawn by the page's plotly.js, in a div of id ``div_id``, with
    its caption. Its height is the figure's own, else :data:`PLOTLY_HEIGHT`; its width follows the page."""
    height = int(figure.layout.height or PLOTLY_HEIGHT)
    figure = go.Figure(figure).update_layout(height=height, width=None, autosize=True)
    body = figure.to_html(
        include_plotlyjs=False,
        full_html=False,
        div_id=div_id,
        config=PLOTLY_CONFIG,
        default_width="100%",
        default_height=f"{height}px",
    )
    return str(_blocks().interactive_figure(caption, body))


def plotly_script() -> str:
    """The one copy of plotly.js the page embeds (offline: nothing is fetched)."""
    return str(_blocks().script(plotly.offline.get_plotlyjs()))


def reading(figure_html: str, sentences: Sequence[str]) -> str:
    """A figure beside the sentences that read it (stacked on a narrow screen)."""
    return str(_blocks().reading(figure_html, sentences_html(sentences) if sentences else ""))


def numbers_table(rows: Sequence[tuple[str, str]], caption: str = "Key numbers") -> str:
    """A two-column table of (what, value), the values as written (markdown: inline code); empty when no rows."""
    if not rows:
        return ""
    return str(_blocks().numbers_table([(label, _inline(value)) for label, value in rows], caption))


def frame_table(frame: pd.DataFrame, caption: str) -> str:
    """A small data frame as an HTML table (its cells as they print; numbers right-aligned)."""
    if frame.empty:
        return ""
    rows = [[str(value) for value in row] for row in frame.itertuples(index=False)]
    return str(_blocks().frame_table([str(column) for column in frame.columns], rows, caption))


def missing_block(command: str, items: Sequence[tuple[str, str, int | None]]) -> str:
    """The inputs never saved: ``items`` (name, its pipeline, its number of pairs or None) and the ``command``'s
    pipelines (``kedro run --pipelines …``; empty: none known)."""
    return str(_blocks().missing(command, items))


def dimensions_block(sentences: Sequence[str]) -> str:
    """The measures' dimensions compared: one list item per sentence (markdown, inline)."""
    return str(_blocks().dimensions([_inline(sentence) for sentence in sentences]))


def _blocks() -> Any:
    """The block macros (``templates/blocks.html.j2``)."""
    return template_macros("blocks.html.j2")


def _inline(text: str) -> str:
    """One line of markdown as inline HTML (no paragraph)."""
    return _MARKDOWN.renderInline(text)
