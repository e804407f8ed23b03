"""mote: particle simulations (self-gravitating N-body systems, meshless conservation laws).

The engine is Rust; this package drives it from Python without giving up its speed:

- :class:`Gravity`: an N-body system built from NumPy arrays or the built-in initial
  conditions (``Gravity.plummer(n=4096, seed=1)``), advanced with ``integrate(t)``; its particle
  arrays are NumPy views of the engine's memory (no copy).
- :class:`Meshless`: a conservation law on a point cloud (``Meshless("sod", resolution=200)``),
  stepped with ``step()`` and ``run_to(t)``; its conserved variables are writable views.
- :func:`run`: a configured run, exactly what ``mote run CONFIG`` runs, writing the same run
  directory; returns a :class:`RunResult` with the diagnostics as arrays and the snapshots.
- :func:`load`: the arrays of a snapshot (``.hdf5``, ``.vtu``) or a checkpoint (``.mote``).

Errors are Python exceptions carrying the program's messages: a configuration mistake is a
``ValueError`` naming the key, a memory limit a ``MemoryError`` with the byte counts, a state
that blew up a :class:`SimulationError` naming the particle and the step, Ctrl-C a
``KeyboardInterrupt`` at a step boundary.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple, Union

import numpy as np

from ._mote import Gravity, Meshless, SimulationError, build_info, load_file, run_config

__all__ = [
    "Gravity",
    "Meshless",
    "RunResult",
    "SimulationError",
    "Snapshot",
    "load",
    "run",
    "__version__",
    "commit",
    "has_hdf5",
]

__version__, commit, has_hdf5 = build_info()

PathLike = Union[str, "os.PathLike[str]"]


class Snapshot(Mapping[str, np.ndarray]):
    """The arrays of one file read by :func:`load`, by name (a read-only mapping).

    Attributes:
        path: the file.
        kind: ``"hdf5"``, ``"vtu"`` or ``"checkpoint"``.
        time: the simulated time the file records.
        config: the run's resolved configuration (TOML), where the file carries it.
    """

    def __init__(self, path: Path, kind: str, time: Optional[float],
                 arrays: Dict[str, np.ndarray], config: Optional[str]) -> None:
        self.path = path
        self.kind = kind
        self.time = time
        self.config = config
        self._arrays = arrays

    def __getitem__(self, name: str) -> np.ndarray:
        try:
            return self._arrays[name]
        except KeyError:
            raise KeyError(f"{self.path}: no array {name!r}; it has {', '.join(self._arrays)}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._arrays)

    def __len__(self) -> int:
        return len(self._arrays)

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}{list(v.shape)}" for k, v in self._arrays.items())
        return f"<mote.Snapshot {self.path.name} ({self.kind}, t = {self.time}): {shapes}>"


def load(path: PathLike) -> Snapshot:
    """Reads a snapshot (``.hdf5``/``.h5``, ``.vtu``) or a checkpoint (``checkpoint.mote``) into
    NumPy arrays, with mote's own readers.

    An HDF5 snapshot's datasets keep their names, types and shapes (``Coordinates`` is (N, 3));
    a ``.vtu``'s arrays are float64 (``Points`` (N, 3)); a gravity checkpoint gives the arrays
    under the names of the :class:`Gravity` views (``x``, ..., ``mass``, ``ids``), a meshless
    one ``ids`` and the conserved variables ``u0``, ``u1``, ...

    Raises ``FileNotFoundError`` for a missing file and ``ValueError`` for one that is not a
    snapshot or is corrupt (or an HDF5 file when the module was built without HDF5).
    """
    p = Path(path)
    kind, time, arrays, config = load_file(p)
    arrays = dict(arrays)
    if time is None and "TimeValue" in arrays:  # mote's .vtu files carry their time
        time = float(arrays["TimeValue"][0])
    return Snapshot(p, kind, time, arrays, config)


class RunResult:
    """What :func:`run` returns: the run directory and what the run wrote into it.

    Attributes:
        dir: the run directory.
        summary: the run's summary (``steps``, ``time``, ``particles``, ``wall_seconds``;
            gravity: ``energy_error``, ``virial_ratio``; meshless: ``problem``,
            ``mood_reductions`` and, where the problem has an exact solution, ``error_l1``).
        diagnostics: the columns of ``diagnostics.csv`` as float64 arrays, by name.
        snapshots: ``(time, path)`` of every snapshot written, in order.
    """

    def __init__(self, summary: Dict[str, Any]) -> None:
        self.summary = summary
        self.dir = Path(summary["dir"])
        self.diagnostics = _read_csv(self.dir / "diagnostics.csv")
        self.snapshots = _snapshot_list(self.dir)

    @property
    def config(self) -> str:
        """The resolved configuration the run ran (``config.toml`` of the run directory)."""
        return (self.dir / "config.toml").read_text()

    def snapshot(self, index: int = -1) -> Snapshot:
        """Loads snapshot ``index`` (default: the last) with :func:`load`."""
        if not self.snapshots:
            raise ValueError(f"{self.dir}: the run wrote no snapshot")
        return load(self.snapshots[index][1])

    def __repr__(self) -> str:
        return (f"<mote.RunResult {self.dir}: {self.summary.get('steps')} steps to "
                f"t = {self.summary.get('time')}, {len(self.snapshots)} snapshots>")


def _read_csv(path: Path) -> Dict[str, np.ndarray]:
    if not path.exists():
        return {}
    with open(path, newline="") as f:
        rows = [row for row in csv.reader(f) if row and not row[0].startswith("#")]
    if not rows:
        return {}
    header, body = rows[0], rows[1:]
    columns = np.array(body, dtype=float).reshape(len(body), len(header))
    return {name: columns[:, k].copy() for k, name in enumerate(header)}


def _snapshot_list(run_dir: Path) -> List[Tuple[float, Path]]:
    """The snapshots of a run: from ``snapshots.json`` (HDF5) and ``snapshots.pvd`` (VTK),
    one entry per output time (a run writing both formats lists the HDF5 file)."""
    found: Dict[float, Path] = {}
    pvd = run_dir / "snapshots.pvd"
    if pvd.exists():
        import xml.etree.ElementTree as ET

        for ds in ET.parse(pvd).getroot().iter("DataSet"):
            found[float(ds.get("timestep", "nan"))] = run_dir / ds.get("file", "")
    index = run_dir / "snapshots.json"
    if index.exists():
        for entry in json.loads(index.read_text()).get("snapshots", []):
            found[float(entry["time"])] = run_dir / entry["file"]
    return sorted(found.items())


def run(config: Optional[PathLike] = None, set: Optional[Mapping[str, Any]] = None,
        out: Optional[PathLike] = None, force: bool = False,
        threads: Optional[int] = None) -> RunResult:
    """Runs a configuration file, exactly as ``mote run CONFIG`` does.

    Args:
        config: the TOML file (``None``: the built-in default, a 4096-body Plummer sphere).
        set: overrides by key, as ``--set`` takes them: ``{"run.end_time": 0.1}``.
        out: the run directory (default ``runs/<config name>``); it must not exist or be empty.
        force: replace an earlier run in ``out`` (never a directory that is not a run).
        threads: worker threads (default: all cores).

    The interpreter is released while the run goes; Ctrl-C stops it at a step boundary after
    writing its checkpoint (``KeyboardInterrupt``; ``mote resume`` continues it).

    Raises:
        ValueError: a configuration mistake (the message names the key) or bad initial
            conditions; FileExistsError: ``out`` holds something and ``force`` is not set;
            MemoryError: the run does not fit its memory limit (with the byte counts);
            SimulationError: the state blew up (naming the particle and the step).
    """
    summary = run_config(
        None if config is None else Path(config),
        None if set is None else dict(set),
        None if out is None else Path(out),
        force,
        threads,
    )
    return RunResult(dict(summary))
