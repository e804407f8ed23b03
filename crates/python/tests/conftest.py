"""Shared fixtures: the repository's paths and the command-line program to compare with."""

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"


@pytest.fixture(scope="session")
def mote_cli():
    """The `mote` program built from this checkout (the test build's, else a release build,
    else one on PATH). Missing: the comparison is skipped, or fails where CI requires it
    (MOTE_REQUIRE_CLI=1)."""
    candidates = [REPO / "target" / "debug" / "mote", REPO / "target" / "release" / "mote"]
    target = os.environ.get("CARGO_TARGET_DIR")
    if target:
        candidates[:0] = [Path(target) / "debug" / "mote", Path(target) / "release" / "mote"]
    for c in candidates:
        if c.is_file():
            return c
    found = shutil.which("mote")
    if found:
        return Path(found)
    if os.environ.get("MOTE_REQUIRE_CLI") == "1":
        pytest.fail("no `mote` program found (build it with cargo build -p mote)")
    pytest.skip("no `mote` program to compare with")
