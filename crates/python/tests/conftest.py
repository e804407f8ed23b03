"""Shared fixtures: the repository's paths and the command-line program to compare with."""

import os
import shutil
import signal
import threading
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


@pytest.fixture
def ctrl_c():
    """Sends SIGINT to this process after a delay, with Python's own handler installed (a
    process started in the background by a non-interactive shell inherits SIGINT ignored, and
    Python then installs no handler); restores the handler afterwards."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timers = []

    def after(seconds: float) -> None:
        t = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
        timers.append(t)
        t.start()

    yield after
    for t in timers:
        t.cancel()
    signal.signal(signal.SIGINT, previous)
