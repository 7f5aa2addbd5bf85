"""One CPU thread policy for a whole run (no Kedro): how many threads torch's intra-op pool and the BLAS / OpenMP
pools of numpy and scipy use.

The zoo's models are tiny: a training step is mostly fixed overhead, and torch's intra-op pool synchronises its
threads at every operation. With one thread per core, a single other busy process on the machine leaves one of
the pool's threads waiting for a core at every barrier, and the work slows by an order of magnitude; one thread
has no barrier to wait at and shares the cores with the other process. So the project runs with **one** thread by
default: robust, and on an idle machine it loses only what the second thread gave these tiny operations (the
measurements: ``docs/benchmarks/threads.md``; ``benchmarks/default_run.py`` times the default run idle and beside
one busy process).

``THINKALIKE_THREADS`` sets the policy: a positive integer, or ``auto`` (each library's own default, one thread
per core). A section's own ``threads`` setting (``nli.threads``, ``embedding.threads``) still applies inside its
nodes.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch

ENVIRONMENT_VARIABLE = "THINKALIKE_THREADS"
DEFAULT_THREADS = 1
AUTO = "auto"


def thread_policy(value: str | None = None) -> int | None:
    """Threads per pool from ``value`` (default: ``$THINKALIKE_THREADS``, else :data:`DEFAULT_THREADS`); ``None`` for
    ``auto``. A value that is neither ``auto`` nor a positive integer is a ``ValueError`` naming the variable."""
    raw = os.environ.get(ENVIRONMENT_VARIABLE) if value is None else value
    if raw is None or not str(raw).strip():
        return DEFAULT_THREADS
    text = str(raw).strip().lower()
    if text == AUTO:
        return None
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{ENVIRONMENT_VARIABLE}: expected a positive number of threads or 'auto', got {raw!r}")
    return int(text)


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """``torch.set_num_threads(n)`` inside the block (nothing with ``None``), the previous count restored after."""
    previous = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@contextlib.contextmanager
def limited_threads(n: int | None) -> Iterator[None]:
    """torch's intra-op pool and every BLAS / OpenMP pool (``threadpoolctl``) at ``n`` threads inside the block
    (``None``: unchanged); the previous settings restored after."""
    if n is None:
        yield
        return
    from threadpoolctl import threadpool_limits

    with torch_threads(n), threadpool_limits(limits=int(n)):
        yield
