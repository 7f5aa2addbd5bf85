"""The ``embedding`` pipeline: Dar et al. 2022 (parameters in the vocabulary space) on the zoo and configured models."""
