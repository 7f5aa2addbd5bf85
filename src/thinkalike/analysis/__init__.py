"""The replication analysis (no Kedro, no MLflow): the pre-registered plan (:mod:`~thinkalike.analysis.plan`), the
verdict rule over independent replicates (:mod:`~thinkalike.analysis.rule`) and the prediction intervals that
``--check`` holds a rerun to (:mod:`~thinkalike.analysis.prediction`)."""
