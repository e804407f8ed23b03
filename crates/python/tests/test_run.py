"""mote.run and mote.load: configured runs from Python, identical to the program's."""

import subprocess

import numpy as np
import pytest

import mote
from conftest import EXAMPLES


def test_a_configured_run_returns_its_diagnostics_and_snapshots(tmp_path):
    result = mote.run(EXAMPLES / "kepler.toml", out=tmp_path / "kepler",
                      set={"run.end_time": 6.283185307179586, "output.snapshots": 4})
    assert result.summary["physics"] == "gravity" and result.summary["steps"] == 1000
    d = result.diagnostics
    assert d["time"][0] == 0.0 and d["time"][-1] == pytest.approx(2 * np.pi)
    # The example's own claim: the energy error stays below 5e-8 over the orbit.
    assert np.abs(d["relative_energy_error"]).max() < 5e-8
    assert [t for t, _ in result.snapshots] == pytest.approx(np.linspace(0, 2 * np.pi, 5))
    assert all(p.exists() for _, p in result.snapshots)
    assert "end_time = 6.283185307179586" in result.config


def test_sod_from_python_has_the_documented_error_and_is_bitwise_the_programs(mote_cli, tmp_path):
    overrides = {"problem.resolution": 200, "output.snapshots": 2}
    result = mote.run(EXAMPLES / "sod.toml", set=overrides, out=tmp_path / "py")
    # The example's documented L1 density error at 200 particles.
    assert 8.5e-3 <= result.summary["error_l1"] <= 1.1e-2
    last = result.snapshot()
    cli = tmp_path / "cli"
    args = [str(mote_cli), "run", str(EXAMPLES / "sod.toml"), "--out", str(cli), "--quiet"]
    for k, v in overrides.items():
        args += ["--set", f"{k}={v}"]
    subprocess.run(args, check=True)
    theirs = mote.load(cli / "snapshots" / last.path.name)
    assert set(theirs) == set(last)
    for name in last:
        assert np.array_equal(last[name], theirs[name]), name
    ours, cli_state = mote.load(result.dir / "checkpoint.mote"), mote.load(cli / "checkpoint.mote")
    for name in ours:
        assert np.array_equal(ours[name], cli_state[name]), name


@pytest.mark.skipif(not mote.has_hdf5, reason="built without HDF5")
def test_hdf5_snapshots_load_with_their_names_types_and_shapes(tmp_path):
    result = mote.run(EXAMPLES / "plummer.toml", out=tmp_path / "p",
                      set={"run.end_time": 0.0625, "output.format": "hdf5",
                           "output.snapshots": 1, "initial_conditions.particles": 300,
                           "run.precision": "f32"})
    snap = result.snapshot()
    assert snap.kind == "hdf5" and snap.time == pytest.approx(0.0625)
    assert snap["Coordinates"].shape == (300, 3) and snap["Coordinates"].dtype == np.float32
    assert snap["ParticleIDs"].dtype == np.uint64
    assert 'physics = "gravity"' in snap.config


def test_a_configuration_mistake_is_a_value_error_naming_the_key(tmp_path):
    with pytest.raises(ValueError, match="run.cfl"):
        mote.run(EXAMPLES / "sod.toml", set={"run.cfl": -1.0}, out=tmp_path / "x")
    with pytest.raises(ValueError, match="scheme.order"):
        mote.run(EXAMPLES / "sod.toml", set={"scheme.order": 7}, out=tmp_path / "x")
    assert not (tmp_path / "x").exists()  # refused before anything was written
    with pytest.raises(FileNotFoundError):
        mote.run(tmp_path / "missing.toml")


def test_an_existing_directory_is_not_replaced_without_force(tmp_path):
    out = tmp_path / "run"
    mote.run(EXAMPLES / "kepler.toml", set={"run.end_time": 0.1}, out=out)
    with pytest.raises(FileExistsError, match="--force"):
        mote.run(EXAMPLES / "kepler.toml", set={"run.end_time": 0.1}, out=out)
    mote.run(EXAMPLES / "kepler.toml", set={"run.end_time": 0.1}, out=out, force=True)
    keep = tmp_path / "mine"
    keep.mkdir()
    (keep / "thesis.tex").write_text("precious")
    with pytest.raises(FileExistsError):
        mote.run(EXAMPLES / "kepler.toml", set={"run.end_time": 0.1}, out=keep, force=True)
    assert (keep / "thesis.tex").read_text() == "precious"


def test_a_memory_limit_too_small_is_a_memory_error(tmp_path):
    with pytest.raises(MemoryError, match="bytes"):
        mote.run(EXAMPLES / "plummer.toml", set={"run.memory_limit": "64 KiB"},
                 out=tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_load_refuses_what_is_not_a_snapshot(tmp_path):
    with pytest.raises(FileNotFoundError):
        mote.load(tmp_path / "nothing.hdf5")
    bad = tmp_path / "checkpoint.mote"
    bad.write_bytes(b"not a checkpoint at all")
    with pytest.raises(ValueError, match="not a mote checkpoint"):
        mote.load(bad)
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(ValueError, match="not a snapshot"):
        mote.load(text)


def test_ctrl_c_stops_a_configured_run_with_its_checkpoint(ctrl_c, tmp_path):
    ctrl_c(0.5)
    # About 10 s uninterrupted.
    with pytest.raises(KeyboardInterrupt, match="checkpoint written"):
        mote.run(EXAMPLES / "plummer.toml", out=tmp_path / "long",
                 set={"run.end_time": 16.0, "initial_conditions.particles": 2048})
    state = mote.load(tmp_path / "long" / "checkpoint.mote")
    assert 0 < state.time < 16.0 and np.isfinite(state["x"]).all()
    # One Ctrl-C, one exception: Python's own handler ran already, nothing is left pending.
    assert sum(range(100000)) == 4999950000
