"""MLflow metric names of the nli pipeline's accuracy tables (no Kedro; used by the project's MLflow hook)."""

from __future__ import annotations

import pandas as pd

#: Summary tables of ``models.nli`` logged to MLflow as CSV.
TABLES = frozenset({"accuracy", "groups", "sweep", "stitching_groups", "cka_group_distances", "cka_group_curves"})


def accuracy_metrics(prefix: str, table: pd.DataFrame) -> dict[str, float]:
    """``{<prefix>.<model>.<split>_<subcase>_<label>: accuracy}`` for every row of an accuracy table, e.g.
    ``nli.copy_00.ood_passive_non_entailed`` (``<prefix>.<model>`` is the namespace for one copy's table)."""
    return {f"{prefix}.{row.model}.{row.split}_{row.subcase}_{row.label}": float(row.accuracy)
            for row in table.itertuples()}
