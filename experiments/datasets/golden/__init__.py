"""A golden set: its items (`items`), the golden JSONL parsed strictly (`parsing`), and each item's evidence
quotes located in the corpus (`evidence`, whose `load_golden` does both).

A broken golden set silently skews every metric, so all problems are collected and raised together before any run
starts.
"""
