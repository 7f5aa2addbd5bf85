"""``mlem``: per-model MLEM feature profiles, then feature-based and RSA layer similarity and MDS maps."""
