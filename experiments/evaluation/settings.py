"""The `eval` config group as typed records: conf/eval/*.yaml extend them, and these defaults are the only ones."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipelines.errors import require


@dataclass
class JudgeSettings:
    """`eval.judge`: an OpenAI-compatible endpoint that runs RAGAS Faithfulness and AnswerRelevancy."""

    # The judge model, as the endpoint names it.
    model: str = "gpt-4o-mini"
    # Any OpenAI-compatible server (vLLM, Ollama, llama.cpp server, DeepSeek, OpenAI).
    base_url: str = "https://api.openai.com/v1"
    # The variable that holds the key; the key itself is never in config or logs.
    api_key_env: str | None = "OPENAI_API_KEY"
    # Seconds per request, and retries of a failed request.
    timeout: float = 60.0
    max_retries: int = 2
    # The longest judge reply RAGAS may ask for.
    max_tokens: int = 512


@dataclass
class EvalSettings:
    """`eval`: how every run scores its golden set."""

    # Cut-offs for every rank metric. A k beyond retriever.top_k only repeats @top_k, and a warning says so: add 50
    # with eval.ks=[1,3,5,10,20,50] when you sweep retriever.top_k=50.
    ks: list[int] = field(default_factory=lambda: [1, 3, 5, 10, 20])
    # A chunk covers an evidence quote when their spans overlap by at least this share of the quote.
    min_overlap: float = 0.5
    # An answerable question passes the diagnosis when its answer reaches this token F1 with no unsupported sentence.
    pass_f1: float = 0.5
    # Context chunks this similar (rapidfuzz ratio, 0-1) to a higher-ranked chunk count as redundant.
    redundancy_threshold: float = 0.9
    # Confidence level of the bootstrap intervals logged for headline metrics.
    confidence: float = 0.95
    # Questions (spread over the set) whose pipeline run is logged as an MLflow trace: the run's Traces tab shows
    # each component's inputs, outputs and time. 0 turns tracing off.
    trace_sample: int = 20
    # A trace keeps documents as id, score, span and their first 160 characters (the first 5 of each list), and cuts
    # strings at 2000 characters: about 20-40 KB a question. true keeps everything (about 1.4 MB a question).
    trace_full: bool = False
    # An LLM judge (eval/judge=openai_compatible); null: none.
    judge: JudgeSettings | None = None

    def check(self) -> None:
        require(bool(self.ks) and all(k > 0 for k in self.ks), "eval.ks", f"must be positive integers, got {self.ks}")
        require(0 < self.min_overlap <= 1, "eval.min_overlap", "must be in (0, 1]")
        require(0 <= self.pass_f1 <= 1, "eval.pass_f1", "must be in [0, 1]")
        require(0 < self.redundancy_threshold <= 1, "eval.redundancy_threshold", "must be in (0, 1]")
        require(0 < self.confidence < 1, "eval.confidence", "must be in (0, 1)")
        require(self.trace_sample >= 0, "eval.trace_sample", "must be >= 0 (0 turns tracing off)")
