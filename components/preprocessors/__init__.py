"""Ingestion steps after splitting: chunk spans, heading prefixes."""
