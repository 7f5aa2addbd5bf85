"""Top-k entries of a matrix product ``M = L R`` (``L``: m × r, ``R``: r × n) without forming ``M``.

``M`` is scanned in blocks of rows: block ``M[i:i+b] = L[i:i+b] R`` (b × n) is formed, its ``k`` best entries
are merged into a running top-k (values and flat indices ``row · n + column``), and the block is dropped.
Peak extra memory is ``O(b · n + k)`` whatever ``m`` is; the work is the same ``m · n · r`` multiply-adds as
the dense product plus one pass over the ``m · n`` entries: once the running top-k is full, only rows
whose maximum beats its k-th value get a row-wise top-k (torch's CPU top-k of a flattened block would
allocate 16 bytes per entry). ``b`` is chosen from a byte budget (:data:`DEFAULT_BLOCK_BYTES`) unless
given. This is what TransformerLens' ``FactoredMatrix`` keeps (the
factors), with the scan it does not do. "Best" is largest (default) or smallest; ``exclude_diagonal`` drops
the entries ``(i, i)`` (pairs ``(x, x)``, as the paper's lists may).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

#: Byte budget of one block of rows of the product (32 MiB).
DEFAULT_BLOCK_BYTES = 32 * 2**20


@dataclass(frozen=True)
class TopEntries:
    """The ``k`` best entries of a matrix, best first: row and column indices and values (1-D tensors)."""

    rows: torch.Tensor
    columns: torch.Tensor
    values: torch.Tensor

    def __len__(self) -> int:
        return int(self.values.numel())


def rows_per_block(n_columns: int, element_size: int, block_bytes: int = DEFAULT_BLOCK_BYTES) -> int:
    """How many rows of ``n_columns`` entries of ``element_size`` bytes fit in ``block_bytes`` (at least 1)."""
    return max(1, block_bytes // max(1, n_columns * element_size))


def top_k_of_product(
    left: torch.Tensor,
    right: torch.Tensor,
    k: int,
    *,
    largest: bool = True,
    exclude_diagonal: bool = False,
    block_rows: int | None = None,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> TopEntries:
    """The ``k`` largest (or smallest) entries of ``left @ right`` scanned by row blocks (module docstring).

    ``left``: ``(m, r)``, ``right``: ``(r, n)``, same dtype and device. Raises ``ValueError`` for mismatched
    shapes or ``k`` outside ``1 … m·n`` (minus the diagonal when it is excluded). Ties at the k-th value are
    broken arbitrarily.
    """
    if left.dim() != 2 or right.dim() != 2 or left.shape[1] != right.shape[0]:
        raise ValueError(f"factors of shapes {tuple(left.shape)} and {tuple(right.shape)} do not multiply")
    m, n = left.shape[0], right.shape[1]
    available = m * n - (min(m, n) if exclude_diagonal else 0)
    if not 1 <= k <= available:
        raise ValueError(
            f"k={k} outside 1 … {available} (entries of the {m} × {n} product"
            f"{' off the diagonal' if exclude_diagonal else ''})"
        )
    if block_rows is None:
        block_rows = rows_per_block(n, left.element_size(), block_bytes)
    per_row = min(k, n)
    dtype = torch.promote_types(left.dtype, right.dtype)
    left, right = left.to(dtype), right.to(dtype)
    buffer = torch.empty(min(block_rows, m), n, dtype=dtype, device=left.device)  # reused: one block's memory
    best_values = torch.empty(0, dtype=dtype, device=left.device)
    best_index = torch.empty(0, dtype=torch.int64, device=left.device)
    for start in range(0, m, block_rows):
        factor = left[start : start + block_rows]
        block = torch.matmul(factor, right, out=buffer[: factor.shape[0]])
        if not largest:
            block.neg_()
        rows = torch.arange(block.shape[0], device=block.device)
        if exclude_diagonal:
            on_diagonal = rows + start < n
            block[rows[on_diagonal], rows[on_diagonal] + start] = -torch.inf
        if best_values.numel() == k:  # only rows that can still enter the running top-k
            rows = (block.amax(dim=1) > best_values.min()).nonzero().squeeze(1)
        if rows.numel() == 0:
            continue
        candidates = block if rows.numel() == block.shape[0] else block[rows]
        values, columns = candidates.topk(per_row, dim=1, sorted=False)  # a row-wise pass: no m·n-sized buffer
        del candidates
        index = (rows + start).unsqueeze(1) * n + columns
        best_values = torch.cat([best_values, values.reshape(-1)])
        best_index = torch.cat([best_index, index.reshape(-1)])
        if best_values.numel() > k:
            best_values, keep = best_values.topk(k, sorted=False)
            best_index = best_index[keep]
    order = best_values.argsort(descending=True)
    best_values, best_index = best_values[order], best_index[order]
    sign = 1.0 if largest else -1.0
    return TopEntries(best_index // n, best_index % n, sign * best_values)
