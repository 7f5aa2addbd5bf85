"""Pure maths of representation similarity (torch + numpy, no Kedro).

The submodules are the API (``from thinkalike.measures import cka`` gives the CKA module);
the most used names are re-exported here. The function ``cka.cka`` is deliberately not
re-exported so that it cannot shadow the module name.
"""

from thinkalike.measures.cka import (
    CKAAccumulator,
    CKAResult,
    HSICTerms,
    cka_matrix,
    hsic_terms,
)
from thinkalike.measures.distances import (
    arccos_cka,
    group_distance_table,
    layer_cka_curves,
    match_layers_by_relative_depth,
    model_distance,
    product_distance,
)
from thinkalike.measures.significance import (
    ConfidenceInterval,
    aggregate,
    bootstrap_ci,
    cka_from_hsic,
    permutation_p_values,
)

__all__ = [
    "CKAAccumulator",
    "CKAResult",
    "ConfidenceInterval",
    "HSICTerms",
    "aggregate",
    "arccos_cka",
    "bootstrap_ci",
    "cka_from_hsic",
    "cka_matrix",
    "group_distance_table",
    "hsic_terms",
    "layer_cka_curves",
    "match_layers_by_relative_depth",
    "model_distance",
    "permutation_p_values",
    "product_distance",
]
