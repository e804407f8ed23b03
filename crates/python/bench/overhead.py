"""The cost of driving a simulation from Python (issue #29's benchmark; a benchmark, not a test).

Times 10 steps of a 16384-body Plummer sphere (direct summation, leapfrog, f64, dt = 1/128)
through `mote.Gravity.integrate`, and the same steps through the library's Rust API (`mote bench
api`, which builds the simulation with the same function and steps it with the same loop),
alternating the two several times; reports the best and median of each and the overhead. Then
checks that reading every component array copies nothing (the views' data pointers are the
engine's, stable across reads, and reading them costs microseconds at any N).

    python crates/python/bench/overhead.py [--mote target/release/mote] [--n 16384]

Build both optimised first: `pip install ./crates/python` and `cargo build --release -p mote`.
"""

import argparse
import re
import statistics
import subprocess
import time
from pathlib import Path

import numpy as np

import mote

REPO = Path(__file__).resolve().parents[3]


def python_times(n: int, steps: int, repeat: int) -> list:
    sim = mote.Gravity.plummer(n=n, seed=1)
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        sim.integrate(sim.time + steps * sim.dt)
        out.append(time.perf_counter() - t0)
    return out


def rust_times(program: Path, n: int, steps: int, repeat: int) -> tuple:
    done = subprocess.run(
        [str(program), "bench", "api", "--particles", str(n), "--steps", str(steps),
         "--repeat", str(repeat)],
        check=True, capture_output=True, text=True,
    )
    best, median = map(float, re.search(r"best ([0-9.]+) s, median ([0-9.]+) s", done.stdout).groups())
    return best, median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mote", type=Path, default=REPO / "target" / "release" / "mote")
    parser.add_argument("--n", type=int, default=16384)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3, help="alternations of the two")
    parser.add_argument("--repeat", type=int, default=5, help="measurements per round")
    args = parser.parse_args()

    py, rust_best, rust_median = [], [], []
    for _ in range(args.rounds):
        py += python_times(args.n, args.steps, args.repeat)
        b, m = rust_times(args.mote, args.n, args.steps, args.repeat)
        rust_best.append(b)
        rust_median.append(m)
    pb, pm = min(py), statistics.median(py)
    rb, rm = min(rust_best), statistics.median(rust_median)
    print(f"{args.n} bodies, {args.steps} steps: Python best {pb:.4f} s, median {pm:.4f} s; "
          f"Rust API best {rb:.4f} s, median {rm:.4f} s; overhead {100 * (pb / rb - 1):+.2f} % "
          f"(best), {100 * (pm / rm - 1):+.2f} % (median)")

    # Reading every component array: views, not copies.
    sim = mote.Gravity.plummer(n=args.n, seed=1)
    names = ["x", "y", "z", "vx", "vy", "vz", "ax", "ay", "az", "mass"]
    first = {k: sim.view(k).__array_interface__["data"][0] for k in names}
    sim.integrate(sim.dt)
    t0 = time.perf_counter()
    arrays = [sim.view(k) for k in names] + [sim.ids]
    elapsed = time.perf_counter() - t0
    same = all(sim.view(k).__array_interface__["data"][0] == first[k] for k in names)
    owns = any(a.flags.owndata for a in arrays)
    total = sum(a.nbytes for a in arrays)
    print(f"reading all {len(arrays)} arrays ({total / 1e6:.2f} MB): {elapsed * 1e6:.0f} us, "
          f"same memory as before the step: {same}, any copy: {owns}")
    del arrays
    checksum = float(np.sum(sim.copy_positions()))
    print(f"(checksum {checksum:.6e})")


if __name__ == "__main__":
    main()
