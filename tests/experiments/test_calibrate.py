import json

import pytest
import yaml

from experiments.tuning.calibrate import CalibrationError, Graded, auc, fit, main


def test_a_separable_set_gets_the_separating_thresholds():
    graded = [
        Graded(True, [0.9, 0.6], [True, False]),
        Graded(True, [0.85, 0.75], [True, False]),
        Graded(True, [0.7, 0.5], [False, False]),
        Graded(False, [0.5, 0.3], [False, False]),
        Graded(False, [0.4], [False]),
    ]
    result = fit(graded, max_false_refusals=0.1)
    # lower: the highest threshold that refuses no answerable question (1/3 > 0.1 would be refused at 0.75)
    assert (result.lower, result.refusal_rate, result.false_refusal_rate, result.question_auc) == (0.7, 1.0, 0.0, 1.0)
    # upper: every passage with evidence kept, none of the others
    assert (result.upper, result.passage_tpr, result.passage_fpr, result.passage_auc) == (0.85, 1.0, 0.0, 1.0)
    assert (result.answerable, result.unanswerable, result.relevant_passages, result.other_passages) == (3, 2, 2, 7)


def test_a_looser_false_refusal_budget_refuses_more():
    graded = [Graded(True, [s], [True]) for s in (0.9, 0.8, 0.6, 0.55)] + [Graded(False, [s], [False]) for s in (0.7, 0.5)]
    assert fit(graded, 0.0).lower == 0.55 and fit(graded, 0.0).refusal_rate == 0.5
    loose = fit(graded, 0.5)
    assert loose.lower == 0.8 and (loose.refusal_rate, loose.false_refusal_rate) == (1.0, 0.5)
    assert loose.upper >= loose.lower  # upper never below lower
    assert auc([0.9, 0.8, 0.6, 0.55], [0.7, 0.5]) == pytest.approx(6 / 8)


def test_a_set_without_unanswerable_questions_cannot_calibrate():
    with pytest.raises(CalibrationError, match="got 1 answerable and 0 unanswerable"):
        fit([Graded(True, [0.9], [True])], 0.1)


def test_the_cli_scores_a_real_index_and_writes_its_thresholds(tmp_path, capsys):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "leave.txt").write_text("Full-time employees accrue 20 days of paid annual leave per year.", encoding="utf-8")
    (corpus / "travel.txt").write_text("The nightly hotel limit is $310 in London.", encoding="utf-8")
    (corpus / "zh.txt").write_text("员工出差住宿标准为一线城市每晚不超过600元。", encoding="utf-8")
    golden = [
        {"id": "q1", "question": "How many days of paid annual leave do full-time employees accrue?",
         "evidence": ["accrue 20 days of paid annual leave"]},
        {"id": "q2", "question": "What is the hotel limit per night in London?", "evidence": ["hotel limit is $310"]},
        {"id": "q3", "question": "一线城市出差每晚住宿不超过多少钱？", "evidence": ["一线城市每晚不超过600元"]},
        {"id": "u1", "question": "Can I bring my dog to the office?", "answerable": False},
    ]
    (tmp_path / "golden.jsonl").write_text("".join(json.dumps(g, ensure_ascii=False) + "\n" for g in golden), encoding="utf-8")
    overrides = ["dataset=local", f"dataset.corpus_dir={corpus}", f"dataset.golden={tmp_path / 'golden.jsonl'}",
                 "dataset.name=tiny", f"paths.cache={tmp_path / 'cache'}"]
    assert main([*overrides, "--out", str(tmp_path / "out"), "--max-false-refusals", "0"]) == 0
    written = yaml.safe_load((tmp_path / "out" / "tiny-e5.yaml").read_text(encoding="utf-8"))
    assert (written["answerable"], written["unanswerable"]) == (3, 1) and written["false_refusal_rate"] == 0.0
    assert written["lower"] <= written["upper"] and written["overrides"] == f"crag.upper={written['upper']} crag.lower={written['lower']}"
    assert (tmp_path / "out" / "tiny-e5.png").stat().st_size > 10_000
    assert f"python run.py pipeline=crag {' '.join(overrides)} crag.upper=" in capsys.readouterr().out


def test_the_cli_names_a_pipeline_without_a_grader(capsys, tmp_path):
    assert main(["pipeline=hybrid_rag", f"paths.cache={tmp_path}", "--out", str(tmp_path)]) == 2
    assert "pipeline 'hybrid_rag' has no grader" in capsys.readouterr().err
