//! The Kepler two-body problem from orbital elements.

use mote_core::{ParticleData, Real};

use super::from_f64;
use crate::error::GravityError;

/// A bound two-body orbit: semi-major axis, eccentricity and the two masses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Kepler {
    /// Semi-major axis `a > 0`.
    pub semi_major_axis: f64,
    /// Eccentricity `0 <= e < 1`.
    pub eccentricity: f64,
    /// Mass of the first body.
    pub m1: f64,
    /// Mass of the second body.
    pub m2: f64,
}

impl Kepler {
    /// The orbital period `2 pi sqrt(a^3 / G M)`.
    pub fn period(&self) -> f64 {
        2.0 * std::f64::consts::PI * (self.semi_major_axis.powi(3) / (self.m1 + self.m2)).sqrt()
    }

    /// The total energy `-G m1 m2 / 2a`.
    pub fn energy(&self) -> f64 {
        -self.m1 * self.m2 / (2.0 * self.semi_major_axis)
    }

    /// Checks the elements.
    pub fn validate(&self) -> Result<(), GravityError> {
        if !(self.semi_major_axis.is_finite() && self.semi_major_axis > 0.0) {
            return Err(GravityError::invalid(
                "semi-major axis",
                self.semi_major_axis,
                "finite and > 0",
            ));
        }
        if !(0.0..1.0).contains(&self.eccentricity) {
            return Err(GravityError::invalid(
                "eccentricity",
                self.eccentricity,
                "in [0, 1) for a bound orbit",
            ));
        }
        for m in [self.m1, self.m2] {
            if !(m.is_finite() && m > 0.0) {
                return Err(GravityError::invalid("mass", m, "finite and > 0"));
            }
        }
        Ok(())
    }

    /// Positions and velocities at pericentre, in the centre-of-mass frame, with the orbit in the
    /// x-y plane and pericentre on the x axis (body 1 at negative x).
    pub fn state(&self) -> ([[f64; 3]; 2], [[f64; 3]; 2]) {
        let Kepler {
            semi_major_axis: a,
            eccentricity: e,
            m1,
            m2,
        } = *self;
        let m = m1 + m2;
        let r = a * (1.0 - e);
        let v = (m * (1.0 + e) / (a * (1.0 - e))).sqrt();
        let (f1, f2) = (m2 / m, m1 / m);
        (
            [[-f1 * r, 0.0, 0.0], [f2 * r, 0.0, 0.0]],
            [[0.0, -f1 * v, 0.0], [0.0, f2 * v, 0.0]],
        )
    }
}

/// Two bodies on the orbit `k`, starting at pericentre (see [`Kepler::state`]).
pub fn kepler<R: Real>(k: &Kepler) -> Result<ParticleData<R>, GravityError> {
    k.validate()?;
    let (pos, vel) = k.state();
    Ok(from_f64(&pos, &vel, &[k.m1, k.m2], 0))
}
