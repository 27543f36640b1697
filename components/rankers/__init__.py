"""Rerankers: the e5 cross-scorer and a calibrated wrapper around any ranker."""
