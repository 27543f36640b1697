"""Runs, data sets, evaluation, comparison and tuning: everything that measures a pipeline."""
