//! Initial conditions in N-body units (G = 1), all seeded and bit-reproducible across
//! platforms (see [`crate::rng`]): positions and velocities are generated in `f64` and rounded
//! once to the run's precision.

mod galaxy;
mod kepler;
mod spheres;

pub use galaxy::{
    DiscGalaxy, GalaxyCollision, disc_galaxy, disc_galaxy_rows, galaxy_collision,
    galaxy_collision_rows,
};
pub use kepler::{Kepler, kepler};
pub use spheres::{
    cold_collapse, plummer, plummer_half_mass_radius, plummer_rows, plummer_scale, uniform_sphere,
    uniform_sphere_rows,
};

use crate::error::GravityError;

use std::ops::Range;

use mote_core::comm::{Comm, SingleProcess};
use mote_core::sum::ExactSum;
use mote_core::{ParticleData, Real};

/// Which bodies of a generated system a process makes: all of them, or on several ranks this
/// rank's rows of the one-process order (its bodies' ids), the other ranks making the rest.
///
/// A generator walks its random stream through the bodies before the rows (the draws per body
/// vary: rejection sampling), keeps the rows' bodies and stops after them: O(N) draws, memory
/// for the rows only. The centre-of-mass corrections are exact sums over the ranks
/// ([`ExactSum`]), so every row is the one-process body bit for bit on any number of ranks.
#[derive(Clone, Copy, Debug)]
pub struct Rows<'a> {
    /// The first body made.
    pub start: usize,
    /// One past the last body made.
    pub end: usize,
    /// The ranks making the others (every rank calls the generator: its sums are collective).
    pub comm: &'a dyn Comm,
}

impl Rows<'static> {
    /// All `n` bodies, on one process.
    pub fn all(n: usize) -> Self {
        Rows {
            start: 0,
            end: n,
            comm: &SingleProcess,
        }
    }
}

impl<'a> Rows<'a> {
    /// The bodies `range` (this rank's rows), the others made by the other ranks of `comm`.
    pub fn new(range: Range<usize>, comm: &'a dyn Comm) -> Self {
        Rows {
            start: range.start,
            end: range.end,
            comm,
        }
    }

    /// The bodies made.
    pub fn range(&self) -> Range<usize> {
        self.start..self.end
    }

    /// These rows among the `n` bodies from `offset` on (one galaxy of two), counted from
    /// `offset`.
    pub(crate) fn within(&self, offset: usize, n: usize) -> Rows<'a> {
        let cut = |i: usize| i.clamp(offset, offset + n) - offset;
        Rows {
            start: cut(self.start),
            end: cut(self.end),
            comm: self.comm,
        }
    }

    /// Refuses rows beyond the `n` bodies of a system (a caller's error).
    pub(crate) fn check(&self, n: usize) -> Result<(), GravityError> {
        if self.start > self.end || self.end > n {
            return Err(GravityError::invalid(
                "rows",
                format!("{}..{}", self.start, self.end),
                "a range within the system's bodies",
            ));
        }
        Ok(())
    }
}

/// Particles from `f64` positions, velocities and masses (set-up only), with ids from `first`.
pub(crate) fn from_f64<R: Real>(
    pos: &[[f64; 3]],
    vel: &[[f64; 3]],
    mass: &[f64],
    first: usize,
) -> ParticleData<R> {
    assert!(pos.len() == vel.len() && vel.len() == mass.len());
    let n = pos.len();
    let column =
        |value: &dyn Fn(usize) -> f64| -> Vec<R> { (0..n).map(|i| R::cast(value(i))).collect() };
    let columns: [Vec<R>; mote_core::COMPONENTS] = std::array::from_fn(|k| match k {
        0..3 => column(&|i| pos[i][k]),
        3..6 => column(&|i| vel[i][k - 3]),
        6..9 => vec![R::zero(); n],
        _ => column(&|i| mass[i]),
    });
    let ids: Vec<u64> = (first as u64..(first + n) as u64).collect();
    ParticleData::restore(std::array::from_fn(|k| &columns[k][..]), &ids)
}

/// Mass-weighted mean of `v` over every rank's bodies: exact sums of the terms, rounded once
/// (the same number on any number of ranks). Collective.
pub(crate) fn weighted_mean(v: &[[f64; 3]], mass: &[f64], comm: &dyn Comm) -> [f64; 3] {
    let mut sums: [ExactSum; 4] = std::array::from_fn(|_| ExactSum::new());
    for (x, &m) in v.iter().zip(mass) {
        for k in 0..3 {
            sums[k].add(m * x[k]);
        }
        sums[3].add(m);
    }
    ExactSum::reduce(&mut sums, comm);
    let total = sums[3].value();
    std::array::from_fn(|k| sums[k].value() / total)
}

/// Subtracts the mass-weighted mean over every rank's bodies from `v`. Collective.
pub(crate) fn remove_mean(v: &mut [[f64; 3]], mass: &[f64], comm: &dyn Comm) {
    let c = weighted_mean(v, mass, comm);
    for x in v.iter_mut() {
        for k in 0..3 {
            x[k] -= c[k];
        }
    }
}

/// Moves `p` into its centre-of-mass frame: the mass-weighted mean position and velocity become
/// zero (to round-off). Returns the position and velocity that were subtracted.
pub fn to_centre_of_mass_frame<R: Real>(p: &mut ParticleData<R>) -> ([f64; 3], [f64; 3]) {
    let m: Vec<f64> = p.masses().iter().map(|m| m.as_f64()).collect();
    let gather = |s: mote_core::Vec3Span<'_, R>| -> Vec<[f64; 3]> {
        let (x, y, z) = s.components();
        (0..x.len())
            .map(|i| [x[i].as_f64(), y[i].as_f64(), z[i].as_f64()])
            .collect()
    };
    let c = weighted_mean(&gather(p.positions()), &m, &SingleProcess);
    let u = weighted_mean(&gather(p.velocities()), &m, &SingleProcess);
    let v = p.view_mut();
    let shift = |span: mote_core::Vec3SpanMut<'_, R>, d: [f64; 3]| {
        let (x, y, z) = span.components_mut();
        for (a, dk) in [x, y, z].into_iter().zip(d) {
            a.iter_mut().for_each(|e| *e = R::cast(e.as_f64() - dk));
        }
    };
    shift(v.position, c);
    shift(v.velocity, u);
    (c, u)
}
