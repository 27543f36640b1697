"""Comparing runs: tables, paired significance tests and the quality gate."""
