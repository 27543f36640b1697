"""Retrievers: BM25s, matrix embeddings, multi-query, Weaviate's, and their filter masks."""
