"""`ragtune audit`: can a principal ever see a document it may not, on any serving path? run.py says how."""
