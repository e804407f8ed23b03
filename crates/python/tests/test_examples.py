"""The examples in examples/python run as they are documented (each asserts its own physics),
with a non-interactive matplotlib backend, at sizes that keep CI short."""

import os
import subprocess
import sys

import pytest

from conftest import EXAMPLES

CASES = {
    "plummer_energy.py": ["--n", "1024", "--end", "1"],
    "sod.py": ["--resolution", "200"],
    "custom_state.py": ["--ring", "64"],
    "density_wave.py": ["--resolution", "24", "--single"],
}


@pytest.mark.parametrize("script", sorted(CASES))
def test_example_runs_and_draws_its_picture(script, tmp_path):
    env = dict(os.environ, MPLBACKEND="Agg")
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "python" / script), "--out", str(tmp_path), *CASES[script]],
        env=env, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    picture = tmp_path / script.replace(".py", ".png")
    assert picture.stat().st_size > 10_000
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_python_examples_are_all_tested():
    assert sorted(p.name for p in (EXAMPLES / "python").glob("*.py")) == sorted(CASES)
