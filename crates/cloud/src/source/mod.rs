//! Source terms `du/dt = ... + S(u)` for the IMEX steppers ([`crate::time::imex`]): an explicit
//! part added to the transport slope and an implicit part that solves its own stage equation.
//!
//! A source is usually written per particle ([`PointSource`]: a particle's variables in, its
//! source out), and the blanket implementation runs it over the whole state on the chosen
//! backend, with the particle's variables gathered into a stack array (no allocation, no dynamic
//! dispatch per particle: the stepper calls [`Source`] once per stage).

pub mod relaxation;

pub use relaxation::KineticRelaxation;

use std::sync::atomic::{AtomicUsize, Ordering};

use mote_core::{CpuBackend, Real, SplitOutputs};

use crate::error::CloudError;

/// The most variables a [`PointSource`] handles per particle (the size of the stack array a
/// particle's state is gathered into).
pub const MAX_POINT_VARIABLES: usize = crate::cloud::MAX_VARIABLES;

/// A source term over the whole state (one slice per variable).
pub trait Source<R: Real>: Send + Sync {
    /// A short name, for messages.
    fn name(&self) -> &'static str;

    /// Number of variables it acts on (the state's).
    fn variables(&self) -> usize;

    /// Whether [`add_explicit`](Self::add_explicit) adds anything (by default it does not).
    fn has_explicit(&self) -> bool {
        false
    }

    /// Adds the explicit part of the source at time `t` to `out` (by default there is none).
    fn add_explicit(&self, _t: f64, _u: &[&[R]], _out: Vec<&mut [R]>, _backend: CpuBackend) {}

    /// The implicit part `S_I(u)` at time `t` into `out`. The IMEX stepper calls it only for a
    /// stage whose implicit coefficient is 0 (it takes the slope of a solved stage from the
    /// solve).
    fn implicit(&self, t: f64, u: &[&[R]], out: Vec<&mut [R]>, backend: CpuBackend);

    /// Solves `x - h S_I(x) = rhs` at time `t` for every particle: `u` holds `rhs` on entry and
    /// `x` on return. `Err(i)`: particle `i` (the first, by index) has no solution
    /// ([`solve_error`](Self::solve_error) says so).
    fn solve(&self, t: f64, h: R, u: Vec<&mut [R]>, backend: CpuBackend) -> Result<(), usize>;

    /// The error for a failed solve of particle `index` (of the whole cloud).
    fn solve_error(&self, index: usize) -> CloudError {
        CloudError::invalid(
            "implicit source solve",
            format!("particle index {index}, source {}", self.name()),
            "a converged, admissible solution",
        )
    }
}

/// A source term written for one particle: its `M` variables in, its source out.
pub trait PointSource<R: Real>: Send + Sync {
    /// A short name, for messages.
    fn name(&self) -> &'static str;

    /// Number of variables `M` (at most [`MAX_POINT_VARIABLES`]).
    fn variables(&self) -> usize;

    /// Whether [`explicit_at`](Self::explicit_at) adds anything.
    fn has_explicit(&self) -> bool {
        false
    }

    /// The explicit part at `u` and time `t` into `out` (both of length `M`).
    fn explicit_at(&self, _t: f64, _u: &[R], out: &mut [R]) {
        out.fill(R::zero());
    }

    /// The implicit part at `u` and time `t` into `out`.
    fn implicit_at(&self, t: f64, u: &[R], out: &mut [R]);

    /// Solves `x - h S_I(x) = u` in place (closed form or iteration). `false` when the solve
    /// failed (no convergence, no admissible solution).
    fn solve_at(&self, t: f64, h: R, u: &mut [R]) -> bool;
}

impl<R: Real, P: PointSource<R>> Source<R> for P {
    fn name(&self) -> &'static str {
        PointSource::name(self)
    }

    fn variables(&self) -> usize {
        PointSource::variables(self)
    }

    fn has_explicit(&self) -> bool {
        PointSource::has_explicit(self)
    }

    fn add_explicit(&self, t: f64, u: &[&[R]], out: Vec<&mut [R]>, backend: CpuBackend) {
        if PointSource::has_explicit(self) {
            per_particle(u, out, backend, true, |x, s| self.explicit_at(t, x, s));
        }
    }

    fn implicit(&self, t: f64, u: &[&[R]], out: Vec<&mut [R]>, backend: CpuBackend) {
        per_particle(u, out, backend, false, |x, s| self.implicit_at(t, x, s));
    }

    fn solve(&self, t: f64, h: R, u: Vec<&mut [R]>, backend: CpuBackend) -> Result<(), usize> {
        let m = u.len();
        // `with_source` checked the variables against the cloud's.
        assert!(
            m <= MAX_POINT_VARIABLES,
            "a per-particle source of at most {MAX_POINT_VARIABLES} variables"
        );
        // The smallest failing index: the same whatever the thread count.
        let failed = AtomicUsize::new(usize::MAX);
        backend.for_each_block(u, 256, |first, mut blk| {
            let mut x = [R::zero(); MAX_POINT_VARIABLES];
            for k in 0..SplitOutputs::len(&blk) {
                for v in 0..m {
                    x[v] = blk[v][k];
                }
                if !self.solve_at(t, h, &mut x[..m]) {
                    failed.fetch_min(first + k, Ordering::Relaxed);
                }
                for v in 0..m {
                    blk[v][k] = x[v];
                }
            }
        });
        match failed.into_inner() {
            usize::MAX => Ok(()),
            i => Err(i),
        }
    }
}

/// Runs `f(state, source)` for every particle, its variables gathered from `u` into a stack
/// array, and writes (or, with `add`, adds) the source into `out`.
fn per_particle<R: Real>(
    u: &[&[R]],
    out: Vec<&mut [R]>,
    backend: CpuBackend,
    add: bool,
    f: impl Fn(&[R], &mut [R]) + Sync,
) {
    let m = u.len();
    backend.for_each_block(out, 256, |first, mut blk| {
        let mut x = [R::zero(); MAX_POINT_VARIABLES];
        let mut s = [R::zero(); MAX_POINT_VARIABLES];
        for k in 0..SplitOutputs::len(&blk) {
            for v in 0..m {
                x[v] = u[v][first + k];
            }
            f(&x[..m], &mut s[..m]);
            for v in 0..m {
                blk[v][k] = if add { blk[v][k] + s[v] } else { s[v] };
            }
        }
    });
}
