//! Initial conditions in N-body units (G = 1), all seeded and bit-reproducible across
//! platforms (see [`crate::rng`]): positions and velocities are generated in `f64` and rounded
//! once to the run's precision.

mod galaxy;
mod kepler;
mod spheres;

pub use galaxy::{DiscGalaxy, GalaxyCollision, disc_galaxy, galaxy_collision};
pub use kepler::{Kepler, kepler};
pub use spheres::{
    cold_collapse, plummer, plummer_half_mass_radius, plummer_scale, uniform_sphere,
};

use mote_core::{ParticleData, Real};

/// Particles from `f64` positions, velocities and masses (set-up only).
pub(crate) fn from_f64<R: Real>(
    pos: &[[f64; 3]],
    vel: &[[f64; 3]],
    mass: &[f64],
) -> ParticleData<R> {
    assert!(pos.len() == vel.len() && vel.len() == mass.len());
    let mut p = ParticleData::<R>::zeroed(pos.len());
    let mut v = p.view_mut();
    for i in 0..pos.len() {
        v.position.set(i, pos[i].map(R::cast));
        v.velocity.set(i, vel[i].map(R::cast));
        v.mass[i] = R::cast(mass[i]);
    }
    p
}

/// Mass-weighted mean of `v` (f64).
pub(crate) fn weighted_mean(v: &[[f64; 3]], mass: &[f64]) -> [f64; 3] {
    let total: f64 = mass.iter().sum();
    let mut s = [0.0; 3];
    for (x, &m) in v.iter().zip(mass) {
        for k in 0..3 {
            s[k] += m * x[k];
        }
    }
    s.map(|c| c / total)
}

/// Subtracts the mass-weighted mean from `v`.
pub(crate) fn remove_mean(v: &mut [[f64; 3]], mass: &[f64]) {
    let c = weighted_mean(v, mass);
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
    let c = weighted_mean(&gather(p.positions()), &m);
    let u = weighted_mean(&gather(p.velocities()), &m);
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
