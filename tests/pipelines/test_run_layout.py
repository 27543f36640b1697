"""A job folder as the runner writes it and the Optuna study and the benchmarks read it back."""

import json
from pathlib import Path

from pipelines.run_layout import METRICS_FILE, PER_QUESTION_FILE, RUN_INFO_FILE, JobFolder


def test_a_job_folder_reads_back_what_it_wrote(tmp_path: Path):
    job = JobFolder(tmp_path)
    assert (job.finished, job.run_id, job.per_question()) == (False, None, None)
    job.write_per_question([{"id": "q1", "answer": "北京"}, {"id": "q2"}])
    job.write_metrics({"eval/questions": 2, "answer/f1": 0.5})
    job.write_run_info({"run_id": "abc", "index_fingerprint": "f" * 8})
    assert job.finished and job.run_id == "abc" and job.run_info()["index_fingerprint"] == "f" * 8
    assert job.metrics() == {"eval/questions": 2, "answer/f1": 0.5}
    assert job.per_question() == [{"id": "q1", "answer": "北京"}, {"id": "q2"}]
    # the formats runs already on disk have: sorted, indented metrics; one unescaped JSON record a line
    assert (tmp_path / METRICS_FILE).read_text() == json.dumps({"answer/f1": 0.5, "eval/questions": 2}, indent=2)
    assert (tmp_path / PER_QUESTION_FILE).read_text(encoding="utf-8").splitlines()[0] == '{"id": "q1", "answer": "北京"}'
    assert json.loads((tmp_path / RUN_INFO_FILE).read_text())["run_id"] == "abc"
