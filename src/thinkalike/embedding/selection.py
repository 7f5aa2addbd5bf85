"""Which blocks and heads the embedding-space readings cover (no Kedro).

Reading every head of a large model is expensive: each head's top pairs of ``E′W_VO E`` and
``E′W_QK E′ᵀ`` cost a ``V × d_head`` by ``d_head × V`` product scan (V²·d_head multiply-adds per head and
group; ``benchmarks/embedding_speed.py`` times one), so a 30-layer, 16-head model would take minutes. The
``auto`` selection keeps small models whole and narrows large ones:

* blocks: every block of a model with at most ``max_blocks`` blocks, else ``max_blocks`` blocks evenly
  spaced from the first to the last (``numpy.linspace``, rounded, duplicates dropped);
* heads: every head while ``blocks × heads ≤ max_head_products``, else the first
  ``max(1, max_head_products // blocks)`` heads of each block.

``None`` selects everything; a list names block (or head) indices; an int is a number of first heads.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

AUTO = "auto"
MAX_BLOCKS = 12
MAX_HEAD_PRODUCTS = 96


def select_blocks(
    n_blocks: int, setting: Sequence[int] | str | None, *, what: str = "layers", max_blocks: int = MAX_BLOCKS
) -> list[int]:
    """Block indices (0-based, ascending) for ``setting`` (module docstring); ``ValueError`` naming ``what`` for an
    index outside ``0 … n_blocks − 1``."""
    if setting is None:
        return list(range(n_blocks))
    if setting == AUTO:
        if n_blocks <= max_blocks:
            return list(range(n_blocks))
        return sorted({int(round(x)) for x in np.linspace(0, n_blocks - 1, max_blocks)})
    if isinstance(setting, str):
        raise ValueError(f"{what}: {setting!r} is not 'auto', null or a list of block indices")
    chosen = sorted({int(index) for index in setting})
    bad = [index for index in chosen if not 0 <= index < n_blocks]
    if bad:
        raise ValueError(f"{what}: blocks {bad} outside 0 … {n_blocks - 1}")
    return chosen


def select_heads(
    n_heads: int,
    n_selected_blocks: int,
    setting: Sequence[int] | int | str | None,
    *,
    what: str = "heads",
    max_head_products: int = MAX_HEAD_PRODUCTS,
) -> list[int]:
    """Head indices read in each selected block for ``setting`` (module docstring); ``ValueError`` naming ``what``
    for an index outside ``0 … n_heads − 1``."""
    if setting is None:
        return list(range(n_heads))
    if setting == AUTO:
        if n_selected_blocks * n_heads <= max_head_products:
            return list(range(n_heads))
        return list(range(min(n_heads, max(1, max_head_products // max(n_selected_blocks, 1)))))
    if isinstance(setting, str):
        raise ValueError(f"{what}: {setting!r} is not 'auto', null, a number of heads or a list of head indices")
    if isinstance(setting, int):
        return list(range(min(int(setting), n_heads)))
    chosen = sorted({int(index) for index in setting})
    bad = [index for index in chosen if not 0 <= index < n_heads]
    if bad:
        raise ValueError(f"{what}: heads {bad} outside 0 … {n_heads - 1}")
    return chosen
