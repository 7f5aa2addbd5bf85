"""What a run records about itself: its clock (:mod:`.clock`: each node's wall, CPU, load and save time and peak
memory), the hooks that save it as the ``run_timings`` table (:mod:`.timing_hooks`), and its MLflow run
(:mod:`.tracking`: settings, run names and tags, parameters, metrics and artifacts)."""
