"""Pipeline spec fragments shared by builder and evaluation tests."""

REFUSALS = {"en": "I cannot answer this from the provided documents."}


def answer_stage(**overrides):
    stage = {
        "components": {
            "context_window": {"_target_": "components.context.context_window.ContextWindow", "top_k": 1},
            "extractor": {"_target_": "components.answer.extractive_answerer.ExtractiveAnswerer", "refusals": REFUSALS, "min_score": 0.2},
            "answer": {"_target_": "components.answer.citation_verifier.CitationVerifier", "refusals": REFUSALS},
        },
        "connections": [["context_window.documents", "extractor.documents"], ["context_window.documents", "answer.documents"],
                        ["extractor.replies", "answer.replies"]],
        "inputs": {"context": ["context_window.documents"], "question": ["extractor.query", "answer.query"]},
        "context_output": "context_window.documents",
        "answer_output": "answer.answers",
    }
    return stage | overrides
