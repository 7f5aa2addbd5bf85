"""Node functions with some arguments fixed at build time (a model's name, its typed settings)."""

from collections.abc import Callable
from functools import partial, update_wrapper
from typing import Any


def with_fixed_arguments(function: Callable[..., Any], **constants: Any) -> Callable[..., Any]:
    """``partial(function, **constants)`` that keeps the function's name and docstring (for Kedro and kedro-viz)."""
    return update_wrapper(partial(function, **constants), function)
