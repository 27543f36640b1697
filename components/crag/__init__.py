"""Corrective RAG: the retrieval evaluator and its passage scorers."""
