"""The online loop end to end (issue 38's "done when"), as `python -m benchmarks.online_loop` runs it:
two promoted demo runs served 50/50 to scripted users who rate by F1, the online report, harvest, and the gate
on the harvested set."""

import json
import subprocess
import sys

import pytest

from tests.support.paths import ROOT


@pytest.mark.slow
def test_production_ratings_pick_the_offline_winner_and_its_failures_become_a_failing_gate(tmp_path):
    done = subprocess.run([sys.executable, "-m", "benchmarks.online_loop", "--work", str(tmp_path),
                           "--questions", "300", "--users", "30"], cwd=ROOT, capture_output=True, text=True,
                          timeout=3000)
    assert done.stdout.strip(), done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["checks"] == {"at_least_300_questions": True, "report_significant": True,
                                 "same_direction_as_offline": True, "candidates_load": True,
                                 "gate_fails_the_worse": True}, json.dumps(summary, indent=2)
    assert done.returncode == 0
    assert summary["online"]["ratings_accepted"] == summary["online"]["asked"]
    assert summary["online"]["traces"]["dropped"] == 0
    assert set(summary["online"]["by_variant"]) == {"champion", "challenger"}
