"""The HTML blocks the experiments report is made of (no Kedro): markdown sentences, a figure — an embedded PNG or an
interactive plotly figure — beside the sentences that read it, and small tables of numbers.

An interactive figure is a ``<div>`` and the script that draws it into the div with the page's one copy of plotly.js
(:func:`plotly_script`, in the page's head): :func:`plotly_figure` never embeds plotly.js itself.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go
import plotly.offline
from markdown_it import MarkdownIt

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
    return "<div class='claims'>" + "".join(markdown_html(sentence) for sentence in sentences) + "</div>"


def png_figure(caption: str, image: bytes) -> str:
    """A saved PNG, embedded as base64 (the file stands alone), with its caption."""
    encoded = base64.b64encode(image).decode("ascii")
    return (
        f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{encoded}">'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )


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
    return (
        f"<figure class='interactive'>{body}<figcaption>{html.escape(caption)} Interactive: hover for the "
        "values.</figcaption></figure>"
    )


def plotly_script() -> str:
    """The one copy of plotly.js the page embeds (offline: nothing is fetched)."""
    return f"<script type='text/javascript'>{plotly.offline.get_plotlyjs()}</script>"


def reading(figure_html: str, sentences: Sequence[str]) -> str:
    """A figure beside the sentences that read it (stacked on a narrow screen)."""
    if not sentences:
        return f"<div class='reading alone'>{figure_html}</div>"
    return f"<div class='reading'>{figure_html}{sentences_html(sentences)}</div>"


def numbers_table(rows: Sequence[tuple[str, str]], caption: str = "Key numbers") -> str:
    """A two-column table of (what, value), the values as written (markdown: inline code); empty when no rows."""
    if not rows:
        return ""
    body = "".join(
        f"<tr><th scope='row'>{html.escape(label)}</th><td>{_inline(value)}</td></tr>" for label, value in rows
    )
    return f"<table class='numbers'><caption>{html.escape(caption)}</caption>{body}</table>"


def frame_table(frame: pd.DataFrame, caption: str) -> str:
    """A small data frame as an HTML table (its cells as they print; numbers right-aligned)."""
    if frame.empty:
        return ""
    head = "".join(f"<th scope='col'>{html.escape(str(column))}</th>" for column in frame.columns)
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(value))}</td>" for value in row) + "</tr>"
        for row in frame.itertuples(index=False)
    )
    return f"<table class='numbers wide'><caption>{html.escape(caption)}</caption><tr>{head}</tr>{rows}</table>"


def _inline(text: str) -> str:
    """One line of markdown as inline HTML (no paragraph)."""
    return _MARKDOWN.renderInline(text)
