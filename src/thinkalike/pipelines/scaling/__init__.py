"""The ``scaling`` pipeline (:mod:`.pipeline`): CKA across a width/depth family (Brown et al. 2023 §5); which models
form the family (:mod:`.family`)."""
