"""ThinkAlike: do two language models represent language alike — where, and why?"""

import os

# Nothing is sent anywhere: MLflow 3 looks up its telemetry host on every run unless told not to
# (DO_NOT_TRACK is not enough). Set before any module of this package imports mlflow.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
