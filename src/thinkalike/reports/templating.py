"""The report's and the findings page's layout as Jinja2 templates (``thinkalike/reports/templates/``): each page's
structure and fixed prose are written in its template; the numbers, and the sentences computed from them, come from
the code that renders it. No Kedro import.

Why Jinja2 and not f-strings: a page's layout reads top to bottom in one file, and the HTML templates escape every
value by default (``autoescape``), so only what is marked as already-made HTML (``|safe``) goes in unescaped.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import jinja2

#: The templates' package and folder (shipped as package data: pyproject.toml's ``tool.setuptools.package-data``).
TEMPLATES = ("thinkalike.reports", "templates")


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader(*TEMPLATES),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",), default_for_string=False),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render_template(name: str, filters: Mapping[str, Callable[..., str]] | None = None, **values: Any) -> str:
    """Template ``name`` rendered with ``values``; ``filters``: the template's own filters (e.g. the docs' line
    wrapping). HTML templates (``*.html.j2``) escape every value not marked ``|safe``; any undefined name is an
    error (:class:`jinja2.StrictUndefined`), so a template never renders a blank where a value is missing."""
    environment = _environment()
    environment.filters.update(filters or {})
    return environment.get_template(name).render(**values)


@functools.cache
def template_macros(name: str) -> Any:
    """The macros of template ``name`` (e.g. ``blocks.html.j2``), each a function of its arguments that returns its
    HTML (a :class:`markupsafe.Markup`); loaded once, as the package's templates do not change while it runs."""
    return _environment().get_template(name).module
