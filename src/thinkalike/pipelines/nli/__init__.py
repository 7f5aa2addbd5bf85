"""The nli pipeline: generalizing vs heuristic NLI copies (Brown et al. 2023 §4)."""
