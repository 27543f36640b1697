"""Ingestion steps: our splitters (sentence windows, semantic), chunk spans, the chunk guard, heading prefixes."""
