"""mote.Gravity: physics, zero-copy views, errors, interruption."""

import gc
import subprocess

import numpy as np
import pytest

import mote


def test_kepler_orbit_closes_after_one_period_with_the_energy_conserved():
    # a = 1, total mass 1: the period is 2 pi; yoshida4 at 2000 steps per period.
    sim = mote.Gravity.kepler(semi_major_axis=1.0, eccentricity=0.5, m1=0.5, m2=0.5,
                              integrator="yoshida4", dt=2 * np.pi / 2000)
    start = sim.copy_positions()
    # At pericentre the separation is a (1 - e) = 0.5.
    assert np.linalg.norm(start[0] - start[1]) == pytest.approx(0.5, rel=1e-12)
    energy = sim.diagnostics()["total"]
    assert energy == pytest.approx(-0.5 * 0.5 / 2.0, rel=1e-12)  # -m1 m2 / 2a
    sim.integrate(2 * np.pi)
    assert sim.steps == 2000
    closing = np.abs(sim.copy_positions() - start).max()
    assert closing < 1e-7
    assert abs(sim.energy_error()) < 1e-10
    # The orbit closes to 4th order: half the steps, 16 times the error.
    coarse = mote.Gravity.kepler(eccentricity=0.5, integrator="yoshida4", dt=2 * np.pi / 1000)
    coarse.integrate(2 * np.pi)
    ratio = np.abs(coarse.copy_positions() - start).max() / closing
    assert 12 < ratio < 20, ratio
    # Half a period later the bodies are at apocentre, a (1 + e) = 1.5 apart.
    sim.integrate(3 * np.pi)
    p = sim.copy_positions()
    assert np.linalg.norm(p[0] - p[1]) == pytest.approx(1.5, rel=1e-7)


def test_plummer_sphere_starts_and_stays_in_virial_equilibrium():
    sim = mote.Gravity.plummer(n=2048, seed=3, softening=0.01)
    d = sim.diagnostics()
    assert d["mass"] == pytest.approx(1.0, rel=1e-12)
    assert np.abs(d["momentum"]).max() < 1e-12  # centre-of-mass frame
    assert d["virial_ratio"] == pytest.approx(1.0, abs=0.08)
    sim.integrate(1.0)
    d = sim.diagnostics()
    assert d["virial_ratio"] == pytest.approx(1.0, abs=0.1)
    assert abs(d["energy_error"]) < 1e-3
    assert np.abs(d["momentum"]).max() < 1e-12


def test_a_write_through_a_view_changes_the_next_step_and_the_view_is_the_engines_memory():
    a = mote.Gravity.plummer(n=256, seed=5)
    b = mote.Gravity.plummer(n=256, seed=5)
    vx = a.vx
    # The engine's memory, the same every time it is asked for: a view, not a copy.
    assert vx.__array_interface__["data"][0] == a.data_pointer("vx")
    assert a.x.__array_interface__["data"][0] == a.data_pointer("x")
    assert vx.__array_interface__["data"][0] == a.vx.__array_interface__["data"][0]
    assert not vx.flags.owndata
    vx[0] += 0.1  # written into the engine
    a.integrate(0.25)
    b.integrate(0.25)
    assert not np.array_equal(a.copy_positions(), b.copy_positions())
    # And exactly as if the state had been built that way.
    p0 = mote.Gravity.plummer(n=256, seed=5)
    pos, vel, mass = p0.copy_positions(), p0.copy_velocities(), np.array(p0.mass)
    vel[0, 0] += 0.1
    c = mote.Gravity(pos, vel, mass)
    c.integrate(0.25)
    assert np.array_equal(a.copy_positions(), c.copy_positions())
    # The view follows the engine's state (no stale copy).
    assert np.array_equal(np.asarray(a.x), a.copy_positions()[:, 0])


def test_views_keep_the_simulation_alive_and_block_a_change_of_particle_count():
    x = mote.Gravity.plummer(n=128, seed=1).x  # the simulation has no other reference
    gc.collect()
    assert np.isfinite(x).all() and x.shape == (128,)
    sim = mote.Gravity.plummer(n=128, seed=1)
    held = sim.x[:10]  # a slice keeps its base view alive
    ids = sim.ids
    assert not ids.flags.writeable
    with pytest.raises(ValueError):
        ids[0] = 7
    assert sim.live_views == 2
    with pytest.raises(RuntimeError, match=r"view\(s\) of the particle arrays are alive"):
        sim.add(np.ones((1, 3)), np.zeros((1, 3)), [1e-3])
    with pytest.raises(RuntimeError, match=r"view\(s\) of the particle arrays are alive"):
        sim.remove([0])
    assert len(sim) == 128 and held.sum() == held.sum()  # still readable, nothing moved
    del held, ids
    gc.collect()
    assert sim.live_views == 0
    new = sim.add(np.ones((2, 3)), np.zeros((2, 3)), [1e-3, 1e-3])
    assert list(new) == [128, 129] and len(sim) == 130
    assert sim.x.shape == (130,)
    sim.remove([3, 128])
    gc.collect()
    assert len(sim) == 128 and 3 not in sim.ids and 128 not in sim.ids
    with pytest.raises(ValueError, match="no body has id 3"):
        sim.remove([3])
    sim.integrate(0.1)  # the solver and the integrator follow the new count
    assert np.isfinite(sim.copy_positions()).all()


def test_a_body_added_feels_and_exerts_gravity():
    sim = mote.Gravity(np.array([[0.0, 0, 0]]), np.zeros((1, 3)), [1.0], softening=0.0)
    sim.add(np.array([[2.0, 0, 0]]), np.zeros((1, 3)), [1.0])
    # Accelerations recomputed at once: G m / r^2 = 1/4 towards each other.
    assert np.allclose(sim.copy_accelerations()[:, 0], [0.25, -0.25], rtol=1e-12)
    assert sim.diagnostics()["potential"] == pytest.approx(-0.5, rel=1e-12)


def test_precision_f32_gives_float32_views():
    sim = mote.Gravity.plummer(n=64, precision="f32")
    double = mote.Gravity.plummer(n=64)
    assert sim.precision == "f32" and sim.x.dtype == np.float32
    assert double.x.dtype == np.float64
    # The same bodies, rounded once: the energies agree to single precision.
    assert np.array_equal(sim.x, double.x.astype(np.float32))
    e32, e64 = sim.diagnostics()["total"], double.diagnostics()["total"]
    assert e32 == pytest.approx(e64, rel=1e-5) and e32 != e64


def test_the_tree_solver_agrees_with_direct_summation():
    direct = mote.Gravity.plummer(n=4096, seed=2, softening=0.01)
    tree = mote.Gravity.plummer(n=4096, seed=2, softening=0.01, solver="tree", theta=0.4)
    a, b = direct.copy_accelerations(), tree.copy_accelerations()
    err = np.linalg.norm(a - b, axis=1) / np.linalg.norm(a, axis=1)
    assert np.median(err) < 2e-3
    assert "tree" in tree.solver


def test_configuration_mistakes_are_value_errors_naming_the_key():
    with pytest.raises(ValueError, match="solver.softening"):
        mote.Gravity.plummer(n=16, softening=-1.0)
    with pytest.raises(ValueError, match="integrator.kind"):
        mote.Gravity.plummer(n=16, integrator="euler")
    with pytest.raises(ValueError, match="unknown setting `sofening`"):
        mote.Gravity.plummer(n=16, sofening=0.1)
    with pytest.raises(ValueError, match="eccentricity"):
        mote.Gravity.kepler(eccentricity=1.5)
    with pytest.raises(ValueError, match="masses: index 1 is -1"):
        mote.Gravity(np.zeros((2, 3)), np.zeros((2, 3)), [1.0, -1.0])
    with pytest.raises(ValueError, match="positions: index 0"):
        mote.Gravity(np.full((2, 3), np.nan), np.zeros((2, 3)), [1.0, 1.0])
    with pytest.raises(ValueError, match="repeats id"):
        mote.Gravity(np.eye(3), np.zeros((3, 3)), np.ones(3), ids=[4, 5, 4])
    with pytest.raises(ValueError, match=r"expected \(N, 3\)"):
        mote.Gravity(np.zeros((2, 2)), np.zeros((2, 3)), [1.0, 1.0])
    with pytest.raises(ValueError, match="rows"):
        mote.Gravity(np.zeros((2, 3)), np.zeros((3, 3)), [1.0, 1.0])


def test_a_memory_limit_too_small_is_a_memory_error_with_the_byte_counts():
    with pytest.raises(MemoryError, match=r"bytes requested, \d+ bytes available"):
        mote.Gravity.plummer(n=1_000_000, memory_limit="1 MiB")


def test_a_blown_up_state_is_a_simulation_error_naming_the_particle_and_the_step():
    sim = mote.Gravity.plummer(n=64, seed=1)
    sim.vy[17] = np.inf
    with pytest.raises(mote.SimulationError, match=r"step 1, .*particle id \d+ \(index \d+\)"):
        sim.integrate(sim.dt)
    assert issubclass(mote.SimulationError, RuntimeError)


def test_ctrl_c_stops_integrate_at_a_step_boundary_with_a_consistent_state(ctrl_c):
    # About 10 s uninterrupted: a Ctrl-C that did not stop it fails below, not by hanging.
    sim = mote.Gravity.plummer(n=2048, seed=1, dt=1 / 1024)
    ctrl_c(0.3)
    with pytest.raises(KeyboardInterrupt):
        sim.integrate(4.0)
    assert 0 < sim.steps < 1024 * 4
    assert sim.time == pytest.approx(sim.steps / 1024, rel=1e-12)  # on the step grid
    assert np.isfinite(sim.copy_positions()).all()
    t = sim.time
    sim.integrate(t + 4 / 1024)  # and it goes on
    assert sim.steps * (1 / 1024) == pytest.approx(sim.time)


def test_integrate_refuses_going_back_in_time():
    sim = mote.Gravity.kepler()
    sim.integrate(0.5)
    with pytest.raises(ValueError, match="not before the current time"):
        sim.integrate(0.25)


def test_a_simulation_from_python_is_bitwise_the_program_run(mote_cli, tmp_path):
    settings = dict(n=512, seed=9, softening=0.02, dt=1 / 64, integrator="leapfrog")
    sim = mote.Gravity.plummer(**settings)
    sim.integrate(0.5)
    # The configuration the simulation was built from, run by the program to the same end.
    config = tmp_path / "plummer.toml"
    config.write_text(sim.config())
    out = tmp_path / "cli"
    subprocess.run([str(mote_cli), "run", str(config), "--out", str(out), "--quiet",
                    "--set", "run.end_time=0.5", "--set", "output.snapshots=1"], check=True)
    # The checkpoint at the end holds the full-precision state.
    end = mote.load(out / "checkpoint.mote")
    assert end.time == 0.5
    for name in ["x", "y", "z", "vx", "vy", "vz", "mass"]:
        assert np.array_equal(end[name], sim.view(name)), name
    # And mote.run runs the same.
    result = mote.run(config, set={"run.end_time": 0.5, "output.snapshots": 1},
                      out=tmp_path / "py")
    again = mote.load(result.dir / "checkpoint.mote")
    assert np.array_equal(again["x"], end["x"]) and np.array_equal(again["vz"], end["vz"])
