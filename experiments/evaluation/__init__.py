"""Scoring a golden set: the metrics of every layer, the diagnosis, traces and the report."""
