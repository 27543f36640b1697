"""Query rewriting: history rewriting, expansion and the sequential decomposer."""
