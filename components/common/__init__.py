"""Shared rules: language and tokenising, words, sentences, paths, pass-through, llama.cpp logs."""
