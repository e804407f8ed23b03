//! Plummer softening: one definition shared by the force and the potential.
//!
//! The potential of a source of mass `m` at distance `r` is `-m / sqrt(r^2 + eps^2)`; the
//! acceleration it causes is `m * d / (r^2 + eps^2)^(3/2)`, computed as `m * d * f^3` with the
//! *same* factor `f = 1 / sqrt(r^2 + eps^2)` ([`inverse_distance`], [`force_factor`]), so that the
//! force is exactly the negative gradient of the potential (tested by finite differences).
//! `eps = 0` (the default) is exact point-mass gravity.

use mote_core::Real;

use crate::error::GravityError;

/// The Plummer softening length `epsilon >= 0`.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Softening(f64);

impl Softening {
    /// Point masses: no softening.
    pub const NONE: Softening = Softening(0.0);

    /// Softening length `epsilon`; it must be finite and non-negative.
    pub fn new(epsilon: f64) -> Result<Self, GravityError> {
        if epsilon.is_finite() && epsilon >= 0.0 {
            Ok(Softening(epsilon))
        } else {
            Err(GravityError::invalid(
                "softening",
                epsilon,
                "a finite length >= 0",
            ))
        }
    }

    /// The softening length.
    pub fn epsilon(self) -> f64 {
        self.0
    }

    /// `epsilon^2` in the run's precision.
    pub fn epsilon2<R: Real>(self) -> R {
        R::cast(self.0 * self.0)
    }
}

/// `1 / sqrt(r2 + eps2)`: the potential's factor. Returns 0 where `r2 + eps2 == 0` (a particle
/// and itself, or coincident point masses), which removes the self-interaction.
#[inline(always)]
pub fn inverse_distance<R: Real>(r2: R, eps2: R) -> R {
    let s = r2 + eps2;
    if s > R::zero() {
        R::one() / s.sqrt()
    } else {
        R::zero()
    }
}

/// The force factor: the cube of the potential's factor `inv = 1 / sqrt(r^2 + eps^2)`.
#[inline(always)]
pub fn force_factor<R: Real>(inv: R) -> R {
    inv * inv * inv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_negative_and_nan() {
        assert!(Softening::new(-1e-3).is_err());
        assert!(Softening::new(f64::NAN).is_err());
        assert_eq!(Softening::new(0.01).unwrap().epsilon2::<f64>(), 0.01 * 0.01);
    }

    #[test]
    fn force_is_the_negative_gradient_of_the_potential() {
        // Potential of a unit source at the origin seen at x; compare the analytic force with
        // central differences of the potential along each axis.
        let eps2 = 0.05f64 * 0.05;
        let phi = |x: [f64; 3]| -inverse_distance(x[0] * x[0] + x[1] * x[1] + x[2] * x[2], eps2);
        for x in [[0.3, -0.2, 0.1], [1.5, 0.7, -2.0], [0.01, 0.02, -0.015]] {
            let r2 = x[0] * x[0] + x[1] * x[1] + x[2] * x[2];
            let f = force_factor(inverse_distance(r2, eps2));
            for k in 0..3 {
                let analytic = -x[k] * f; // acceleration toward the source
                let h = 1e-5 * (r2 + eps2).sqrt();
                let (mut xp, mut xm) = (x, x);
                xp[k] += h;
                xm[k] -= h;
                let numeric = -(phi(xp) - phi(xm)) / (2.0 * h);
                let rel = ((analytic - numeric) / analytic).abs();
                assert!(
                    rel < 1e-7,
                    "x = {x:?}, axis {k}: {analytic} vs {numeric} ({rel:e})"
                );
            }
        }
    }

    #[test]
    fn self_interaction_vanishes_without_softening() {
        assert_eq!(inverse_distance(0.0f32, 0.0), 0.0);
        assert_eq!(inverse_distance(0.0f64, 0.25), 2.0);
    }
}
