"""Routers that pick a question's path (no retrieval, clarify, decompose, multi-step)."""
