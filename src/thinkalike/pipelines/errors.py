"""The error every parameter check raises (no Kedro import): its own module, so that helpers the schema uses
(pair planning, namespaces) can raise it without importing the schema."""

from __future__ import annotations


class ParameterError(ValueError):
    """A bad parameter; the message starts with the parameter's full key."""
