"""Answerers (extractive, span, LLM), the rule choosing a span or a sentence, the citation verifier, refusals and the
self-check."""
