"""Fitting settings to a golden set: CRAG calibration, the grader and the Optuna study."""
