"""Binding per-model constants (a model's name, its spec) to node functions."""

from collections.abc import Callable
from functools import partial, update_wrapper
from typing import Any


def bind(function: Callable[..., Any], **constants: Any) -> Callable[..., Any]:
    """``partial(function, **constants)`` that keeps the function's name and docstring (for Kedro and kedro-viz)."""
    return update_wrapper(partial(function, **constants), function)
