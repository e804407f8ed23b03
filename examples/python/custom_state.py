"""A custom initial state from NumPy arrays: a ring of light bodies around a heavy one.

Builds the state by hand (a central body of mass 1 and 256 test bodies of mass 1e-12 on circular
orbits of radius 1 to 2), integrates for one orbital period of the outer edge with the
4th-order Yoshida integrator, and checks what Kepler says: every ring body keeps its radius,
and the energy is conserved. The particle arrays are zero-copy NumPy views of the engine's
memory, read after the run without a copy; the orbits are plotted (custom_state.png).

    python examples/python/custom_state.py [--out DIR]
"""

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import mote


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ring", type=int, default=256, help="ring bodies")
    parser.add_argument("--out", type=Path, default=Path("."), help="where the picture goes")
    args = parser.parse_args()

    rng = np.random.default_rng(7)
    r = rng.uniform(1.0, 2.0, args.ring)
    phi = rng.uniform(0.0, 2 * np.pi, args.ring)
    speed = np.sqrt(1.0 / r)  # circular speed around a unit mass (G = 1)
    positions = np.zeros((args.ring + 1, 3))
    velocities = np.zeros((args.ring + 1, 3))
    positions[1:, 0], positions[1:, 1] = r * np.cos(phi), r * np.sin(phi)
    velocities[1:, 0], velocities[1:, 1] = -speed * np.sin(phi), speed * np.cos(phi)
    masses = np.full(args.ring + 1, 1e-12)
    masses[0] = 1.0

    period = 2 * np.pi * 2.0**1.5  # of the outer edge
    sim = mote.Gravity(positions, velocities, masses, integrator="yoshida4", dt=2e-3,
                       softening=0.0)
    print(sim)
    track = []
    for t in np.linspace(0, period, 65)[1:]:
        sim.integrate(t)
        track.append(sim.copy_positions()[1:, :2])
    x, y = sim.x, sim.y  # views: no copy
    radius = np.hypot(x[1:] - x[0], y[1:] - y[0])
    drift = np.abs(radius / r - 1).max()
    error = sim.energy_error()
    print(f"after {sim.steps} steps (t = {sim.time:.3f}): max radius change {drift:.2e}, "
          f"energy error {error:.2e}")

    track = np.array(track)
    fig, ax = plt.subplots(figsize=(5, 5))
    for k in range(0, args.ring, 8):
        ax.plot(track[:, k, 0], track[:, k, 1], lw=0.6)
    ax.plot([0], [0], "k*")
    ax.set_aspect("equal")
    ax.set_title("test bodies on circular orbits (one outer period)")
    fig.tight_layout()
    args.out.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out / "custom_state.png", dpi=100)

    assert drift < 1e-6, "circular orbits did not stay circular"
    assert abs(error) < 1e-9, "energy not conserved"


if __name__ == "__main__":
    main()
