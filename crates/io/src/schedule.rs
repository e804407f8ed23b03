//! When a run writes: output targets that are reached at step boundaries, never by shortening
//! a step, so that the output schedule cannot change the physics (a run with snapshots or
//! checkpoints takes the same steps as one without, and a resumed run the same as an
//! uninterrupted one); and the wall-clock interval between safety checkpoints.

use std::time::{Duration, Instant};

/// The targets `k * spacing` for `k = 1, 2, ..., count`, each reached at the first step
/// boundary at or after it (to a relative rounding tolerance of 1e-12).
#[derive(Clone, Debug)]
pub struct Targets {
    spacing: f64,
    count: u64,
    next: u64,
}

/// Whether time `t` has reached `target` (to rounding).
fn reached(target: f64, t: f64) -> bool {
    t >= target - 1e-12 * target.abs().max(1.0)
}

impl Targets {
    /// `count` targets spaced by `spacing`; those already reached at time `after` are passed.
    pub fn new(spacing: f64, count: u64, after: f64) -> Self {
        let mut t = Targets {
            spacing,
            count,
            next: 1,
        };
        if spacing > 0.0 && spacing.is_finite() && after > 0.0 {
            // Start near the answer, then settle it with the same test `due` uses.
            t.next = ((after / spacing).floor() as u64).saturating_sub(1).max(1);
            while t.next <= t.count && reached(t.target(t.next), after) {
                t.next += 1;
            }
        }
        t
    }

    /// `count` evenly spaced targets up to `end` (snapshot times).
    pub fn evenly(end: f64, count: u64, after: f64) -> Self {
        Self::new(
            if count > 0 { end / count as f64 } else { 0.0 },
            count,
            after,
        )
    }

    /// Targets every `interval` without end (checkpoint times), or none.
    pub fn every(interval: Option<f64>, after: f64) -> Self {
        match interval {
            Some(i) => Self::new(i, u64::MAX, after),
            None => Self::new(0.0, 0, after),
        }
    }

    fn target(&self, k: u64) -> f64 {
        k as f64 * self.spacing
    }

    /// Whether the step that ended at `t` reached one or more targets not reached before;
    /// passes them.
    pub fn due(&mut self, t: f64) -> bool {
        let mut hit = false;
        while self.next <= self.count && reached(self.target(self.next), t) {
            self.next += 1;
            hit = true;
        }
        hit
    }
}

/// Safety checkpoints by the wall clock: due when `interval` has passed since the last one.
struct WallClock {
    interval: Option<Duration>,
    last: Instant,
}

impl WallClock {
    /// A clock that starts now; `None`: never due.
    fn new(interval: Option<Duration>) -> Self {
        WallClock {
            interval,
            last: Instant::now(),
        }
    }

    /// Whether a checkpoint is due.
    fn due(&self) -> bool {
        self.interval.is_some_and(|i| self.last.elapsed() >= i)
    }

    /// A checkpoint was written now.
    fn reset(&mut self) {
        self.last = Instant::now();
    }
}

/// What a run writes after each step, decided in one place for both families: diagnostics rows
/// every `diagnostics_every` steps, snapshots and checkpoints at their targets (and
/// checkpoints by the wall clock), everything at the end, and a stop when one was requested
/// ([`crate::interrupt`]).
pub struct Outputs {
    end: f64,
    diagnostics_every: u64,
    snapshots: Targets,
    checkpoints: Targets,
    wall: WallClock,
}

/// What is due after one step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Due {
    /// A diagnostics row.
    pub row: bool,
    /// A snapshot.
    pub snapshot: bool,
    /// A checkpoint.
    pub checkpoint: bool,
    /// A requested stop (the signal number), before the end: checkpoint, then stop.
    pub stop: Option<usize>,
}

impl Due {
    /// Makes every rank of a distributed run act alike: a checkpoint or stop due on any rank
    /// (the wall clock and signals reach ranks at different moments) is due on all of them
    /// (collective; nothing is exchanged on one process).
    pub fn agree(&mut self, comm: &dyn mote_core::comm::Comm) {
        if comm.size() == 1 {
            return;
        }
        let mut v = [self.checkpoint as u64, self.stop.unwrap_or(0) as u64];
        comm.max_u64(&mut v);
        self.checkpoint = v[0] != 0;
        self.stop = (v[1] != 0).then_some(v[1] as usize);
        self.row |= self.checkpoint;
    }
}

impl Outputs {
    /// The schedule of a run to `end` with `snapshots` evenly spaced snapshots, checkpoints
    /// every `checkpoint_interval` of simulated time and every `wall` of wall-clock time, and a
    /// diagnostics row every `diagnostics_every` steps; targets up to `after` (a resumed run's
    /// start) are passed.
    pub fn new(
        end: f64,
        snapshots: u64,
        checkpoint_interval: Option<f64>,
        wall: Option<Duration>,
        diagnostics_every: u64,
        after: f64,
    ) -> Self {
        Outputs {
            end,
            diagnostics_every,
            snapshots: Targets::evenly(end, snapshots, after),
            checkpoints: Targets::every(checkpoint_interval, after),
            wall: WallClock::new(wall),
        }
    }

    /// What is due after the step that reached step count `step` at `time`.
    pub fn after_step(&mut self, step: u64, time: f64) -> Due {
        let at_end = time >= self.end;
        let snapshot = self.snapshots.due(time);
        let stop = crate::interrupt::requested().filter(|_| !at_end);
        let checkpoint = self.checkpoints.due(time) || self.wall.due() || at_end || stop.is_some();
        Due {
            row: step.is_multiple_of(self.diagnostics_every) || snapshot || checkpoint,
            snapshot,
            checkpoint,
            stop,
        }
    }

    /// A checkpoint was written now (the wall clock starts again).
    pub fn saved(&mut self) {
        self.wall.reset();
    }
}

/// Parses `output.checkpoint_wall_interval`: a duration such as `"10m"`, `"30s"` or `"2h"`,
/// or `"off"`.
pub fn parse_wall_interval(text: &str) -> Result<Option<Duration>, String> {
    let t = text.trim();
    if t == "off" {
        return Ok(None);
    }
    let d = humantime::parse_duration(t).map_err(|e| {
        format!("`{text}` is not a duration ({e}): write e.g. \"10m\", \"30s\", \"2h\" or \"off\"")
    })?;
    if d.is_zero() {
        return Err("0 is not allowed: a duration > 0, or \"off\"".into());
    }
    Ok(Some(d))
}

/// The default wall-clock interval between safety checkpoints: a killed run loses at most
/// this much work.
pub const DEFAULT_WALL_INTERVAL: &str = "10m";
