"""A Plummer star cluster from Python: energy conservation and virial equilibrium.

Builds a 2048-body Plummer sphere (N-body units), integrates it to t = 2 with the leapfrog
integrator in steps of 1/128, records the relative energy error and the virial ratio 2T/|W|
every 1/8, and plots them (plummer_energy.png). The cluster starts in virial equilibrium and
stays there; leapfrog's energy error oscillates without drift.

    python examples/python/plummer_energy.py [--n 2048] [--out DIR]
"""

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display needed: the picture goes to a file
import matplotlib.pyplot as plt
import numpy as np

import mote


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=2048, help="bodies")
    parser.add_argument("--end", type=float, default=2.0, help="end time")
    parser.add_argument("--out", type=Path, default=Path("."), help="where the picture goes")
    args = parser.parse_args()

    sim = mote.Gravity.plummer(n=args.n, seed=1, softening=0.01, dt=1 / 128)
    print(sim)
    times, errors, virial = [0.0], [0.0], [sim.diagnostics()["virial_ratio"]]
    for t in np.arange(1, int(round(args.end * 8)) + 1) / 8:
        sim.integrate(t)
        d = sim.diagnostics()
        times.append(sim.time)
        errors.append(d["energy_error"])
        virial.append(d["virial_ratio"])
    errors, virial = np.array(errors), np.array(virial)
    print(f"t = {sim.time}: {sim.steps} steps, max |dE/E| = {np.abs(errors).max():.2e}, "
          f"virial ratio {virial.min():.3f} .. {virial.max():.3f}")

    fig, (a, b) = plt.subplots(2, 1, sharex=True, figsize=(6, 5))
    a.plot(times, errors)
    a.set_ylabel("relative energy error")
    a.set_title(f"Plummer sphere, N = {args.n}, leapfrog, dt = 1/128")
    b.plot(times, virial)
    b.axhline(1.0, color="grey", lw=0.5)
    b.set_ylabel("virial ratio 2T/|W|")
    b.set_xlabel("time (N-body units)")
    fig.tight_layout()
    args.out.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out / "plummer_energy.png", dpi=100)

    # What a run of this cluster must show (the test suite runs this file).
    assert np.abs(errors).max() < 2e-3, "energy not conserved"
    assert 0.8 < virial.min() and virial.max() < 1.2, "the cluster left virial equilibrium"


if __name__ == "__main__":
    main()
