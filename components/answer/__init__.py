"""Answerers (extractive, span, LLM), the citation verifier, refusals and the self-check."""
