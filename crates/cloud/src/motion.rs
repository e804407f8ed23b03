//! Moving clouds: how particles move. A [`Motion`] gives every particle's velocity from its
//! position, the time and its state; a simulation with a motion moves the particles with the
//! same Runge-Kutta stages as the state, redoes the neighbour search and the MLS moment
//! matrices at every stage (each stage has its own geometry), and exchanges ALE fluxes
//! `F - u w` between pairs (see [`crate::scheme::Muscl::moving_flux_pass`]).
//!
//! Written per particle ([`PointMotion`]) and run over the whole cloud by the blanket
//! implementation: one dynamic call per stage, none per particle.

use mote_core::{CpuBackend, Real, SplitOutputs};

use crate::cloud::MAX_VARIABLES;
use crate::error::CloudError;

/// Particle velocities for a whole cloud.
pub trait Motion<R: Real, const D: usize>: Send + Sync {
    /// A short name, for messages and reports.
    fn name(&self) -> &str;

    /// The velocity of every particle at time `t` into `out` (`D` arrays), from positions `x`
    /// and states `u` (one slice per variable).
    fn velocities(&self, t: f64, x: [&[R]; D], u: &[&[R]], out: [&mut [R]; D], backend: CpuBackend);
}

/// A motion written for one particle.
pub trait PointMotion<R: Real, const D: usize>: Send + Sync {
    /// A short name.
    fn name(&self) -> &str;

    /// The velocity of a particle at `x` with state `u` at time `t`.
    fn velocity(&self, t: f64, x: [R; D], u: &[R]) -> [R; D];
}

impl<R: Real, const D: usize, P: PointMotion<R, D>> Motion<R, D> for P {
    fn name(&self) -> &str {
        PointMotion::name(self)
    }

    fn velocities(
        &self,
        t: f64,
        x: [&[R]; D],
        u: &[&[R]],
        out: [&mut [R]; D],
        backend: CpuBackend,
    ) {
        let m = u.len();
        let out: Vec<&mut [R]> = out.into_iter().collect();
        backend.for_each_block(out, 1024, |first, mut blk| {
            let mut s = [R::zero(); MAX_VARIABLES];
            for k in 0..SplitOutputs::len(&blk) {
                let i = first + k;
                for v in 0..m {
                    s[v] = u[v][i];
                }
                let w = self.velocity(t, std::array::from_fn(|d| x[d][i]), &s[..m]);
                for d in 0..D {
                    blk[d][k] = w[d];
                }
            }
        });
    }
}

/// A velocity field prescribed as a function of position and time (`f64` set-up arithmetic,
/// converted once per particle).
pub struct Prescribed<F> {
    name: String,
    field: F,
}

impl<F> Prescribed<F> {
    /// The motion `dx/dt = field(x, t)`.
    pub fn new(name: impl Into<String>, field: F) -> Self {
        Self {
            name: name.into(),
            field,
        }
    }
}

impl<R: Real, const D: usize, F> PointMotion<R, D> for Prescribed<F>
where
    F: Fn([f64; D], f64) -> [f64; D] + Send + Sync,
{
    fn name(&self) -> &str {
        &self.name
    }

    #[inline]
    fn velocity(&self, t: f64, x: [R; D], _u: &[R]) -> [R; D] {
        (self.field)(x.map(R::as_f64), t).map(R::cast)
    }
}

/// A physical mover: particles move with a velocity derived from their state (the advection
/// speed, the fluid velocity), scaled by `fraction` (1: Lagrangian, 0: at rest).
pub struct StateVelocity<F> {
    name: String,
    fraction: f64,
    velocity: F,
}

impl<F> StateVelocity<F> {
    /// Particles move with `fraction` times `velocity(u)`.
    pub fn new(name: impl Into<String>, fraction: f64, velocity: F) -> Result<Self, CloudError> {
        if !fraction.is_finite() {
            return Err(CloudError::invalid(
                "mover fraction",
                fraction,
                "a finite number",
            ));
        }
        Ok(Self {
            name: name.into(),
            fraction,
            velocity,
        })
    }
}

impl<R: Real, const D: usize, F> PointMotion<R, D> for StateVelocity<F>
where
    F: Fn(&[R]) -> [R; D] + Send + Sync,
{
    fn name(&self) -> &str {
        &self.name
    }

    #[inline]
    fn velocity(&self, _t: f64, _x: [R; D], u: &[R]) -> [R; D] {
        let f = R::cast(self.fraction);
        (self.velocity)(u).map(|w| f * w)
    }
}

/// A named built-in motion on a box with lower corner `lo` and side lengths `len`, for the CLI
/// and benchmarks: `rotation` (periodic counter-rotating cells: `w = a (sin(2 pi x') cos(2 pi
/// y'), -cos(2 pi x') sin(2 pi y'))` in coordinates scaled to the box, divergence-free, every
/// particle turning about its cell's centre; in 1-D `a sin(2 pi x')`, in 3-D with `w_z = 0`) or
/// `shear` (`w_x = a sin(2 pi y')`, the other components 0; in 1-D a uniform translation
/// `w = a`). `a` is the peak speed.
#[derive(Clone, Debug, PartialEq)]
pub struct Builtin<const D: usize> {
    rotation: bool,
    amplitude: f64,
    lo: [f64; D],
    len: [f64; D],
}

/// [`Builtin`] by name: `rotation` or `shear`, peak speed `amplitude`.
pub fn builtin<const D: usize>(
    name: &str,
    amplitude: f64,
    lo: [f64; D],
    len: [f64; D],
) -> Result<Builtin<D>, CloudError> {
    let rotation = match name {
        "rotation" => true,
        "shear" => false,
        _ => return Err(CloudError::invalid("motion", name, "rotation or shear")),
    };
    if !amplitude.is_finite() {
        return Err(CloudError::invalid(
            "motion amplitude",
            amplitude,
            "a finite speed",
        ));
    }
    if len.iter().any(|&l| !(l.is_finite() && l > 0.0)) {
        return Err(CloudError::invalid(
            "motion box",
            format!("{len:?}"),
            "positive, finite side lengths",
        ));
    }
    Ok(Builtin {
        rotation,
        amplitude,
        lo,
        len,
    })
}

impl<R: Real, const D: usize> PointMotion<R, D> for Builtin<D> {
    fn name(&self) -> &str {
        if self.rotation { "rotation" } else { "shear" }
    }

    #[inline]
    fn velocity(&self, _t: f64, x: [R; D], _u: &[R]) -> [R; D] {
        let tau = std::f64::consts::TAU;
        let a = self.amplitude;
        let s: [f64; D] = std::array::from_fn(|d| tau * (x[d].as_f64() - self.lo[d]) / self.len[d]);
        let mut w = [0.0; D];
        match (self.rotation, D) {
            (true, 1) => w[0] = a * s[0].sin(),
            (true, _) => {
                w[0] = a * s[0].sin() * s[1].cos();
                w[1] = -a * s[0].cos() * s[1].sin();
            }
            (false, 1) => w[0] = a,
            (false, _) => w[0] = a * s[1].sin(),
        }
        w.map(R::cast)
    }
}
