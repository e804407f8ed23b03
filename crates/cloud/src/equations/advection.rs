//! Linear advection: `F_d(u) = A_d u` with constant `M x M` matrices; `M = 1` and `A_d = a_d`
//! is scalar advection with velocity `a`.

use mote_core::Real;

use super::Equation;
use crate::error::CloudError;
use crate::formula::scalar as formula;
use crate::formula::{Lanes, splat};

/// Linear advection `du/dt + sum_d A_d du/dx_d = 0`.
#[derive(Clone, Debug, PartialEq)]
pub struct LinearAdvection<const D: usize> {
    variables: usize,
    /// `matrices[d][r * M + c]`.
    matrices: Vec<Vec<f64>>,
    /// Whether every `A_d` is `a_d I`: then the flux is a scaling.
    velocity: Option<[f64; D]>,
}

impl<const D: usize> LinearAdvection<D> {
    /// Every one of `variables` variables advected with velocity `a`.
    pub fn scalar(velocity: [f64; D], variables: usize) -> Self {
        let matrices = (0..D)
            .map(|d| {
                let mut m = vec![0.0; variables * variables];
                for r in 0..variables {
                    m[r * variables + r] = velocity[d];
                }
                m
            })
            .collect();
        Self {
            variables,
            matrices,
            velocity: Some(velocity),
        }
    }

    /// A system with matrices `A_d` (`D` of them, row-major `M x M`). The matrix pencil must be
    /// real diagonalisable (hyperbolic); the wave-speed bound used is the infinity norm of
    /// `sum_d n_d A_d`, an upper bound of its spectral radius.
    pub fn system(matrices: Vec<Vec<f64>>) -> Result<Self, CloudError> {
        if matrices.len() != D {
            return Err(CloudError::invalid(
                "advection matrices",
                matrices.len(),
                format!("one per dimension ({D})"),
            ));
        }
        let m2 = matrices[0].len();
        let m = (m2 as f64).sqrt().round() as usize;
        if m == 0
            || m * m != m2
            || matrices
                .iter()
                .any(|a| a.len() != m2 || a.iter().any(|x| !x.is_finite()))
        {
            return Err(CloudError::invalid(
                "advection matrices",
                m2,
                "square, equal sizes, finite entries",
            ));
        }
        Ok(Self {
            variables: m,
            matrices,
            velocity: None,
        })
    }

    /// The advection velocity, for scalar advection.
    pub fn velocity(&self) -> Option<[f64; D]> {
        self.velocity
    }
}

impl<R: Real, const D: usize> Equation<R, D> for LinearAdvection<D> {
    fn name(&self) -> &'static str {
        "linear_advection"
    }

    fn variables(&self) -> usize {
        self.variables
    }

    fn flow_velocity(&self, _u: &[R]) -> Option<[R; D]> {
        self.velocity.map(|a| a.map(R::cast))
    }

    #[inline(always)]
    fn flux(&self, u: &[R], n: [R; D], out: &mut [R]) {
        if let Some(a) = self.velocity {
            let s = formula::advection_speed(&n, &a.map(R::cast), D);
            for (o, &x) in out.iter_mut().zip(u) {
                *o = s * x;
            }
            return;
        }
        let m = self.variables;
        for r in 0..m {
            let mut acc = R::zero();
            for d in 0..D {
                let row = &self.matrices[d][r * m..(r + 1) * m];
                for c in 0..m {
                    acc += n[d] * R::cast(row[c]) * u[c];
                }
            }
            out[r] = acc;
        }
    }

    #[inline(always)]
    fn flux_lanes<const M: usize, const W: usize>(
        &self,
        m: usize,
        u: &[[R; W]; M],
        n: &[[R; W]; D],
        out: &mut [[R; W]; M],
    ) {
        if let Some(a) = self.velocity {
            let s = normal_speed(a, n);
            for v in 0..m {
                for l in 0..W {
                    out[v][l] = s[l] * u[v][l];
                }
            }
            return;
        }
        for r in 0..m {
            let mut acc = [R::zero(); W];
            for d in 0..D {
                let row = &self.matrices[d][r * m..(r + 1) * m];
                for c in 0..m {
                    let coef = R::cast(row[c]);
                    for l in 0..W {
                        acc[l] += n[d][l] * coef * u[c][l];
                    }
                }
            }
            out[r] = acc;
        }
    }

    #[inline(always)]
    fn max_wave_speed_lanes<const M: usize, const W: usize>(
        &self,
        m: usize,
        _u: &[[R; W]; M],
        n: &[[R; W]; D],
    ) -> [R; W] {
        if let Some(a) = self.velocity {
            return normal_speed(a, n).map(R::abs);
        }
        let mut best = [R::zero(); W];
        for r in 0..m {
            let mut row_sum = [R::zero(); W];
            for c in 0..m {
                let mut e = [R::zero(); W];
                for d in 0..D {
                    let coef = R::cast(self.matrices[d][r * m + c]);
                    for l in 0..W {
                        e[l] += n[d][l] * coef;
                    }
                }
                for l in 0..W {
                    row_sum[l] += e[l].abs();
                }
            }
            for l in 0..W {
                best[l] = best[l].max(row_sum[l]);
            }
        }
        best
    }

    fn wave_speed_bounds(&self, u: &[R], n: [R; D]) -> (R, R) {
        if let Some(a) = self.velocity {
            let s = formula::advection_speed(&n, &a.map(R::cast), D);
            return (s, s);
        }
        let s = self.max_wave_speed(u, n);
        (-s, s)
    }

    #[inline(always)]
    fn max_wave_speed(&self, _u: &[R], n: [R; D]) -> R {
        if let Some(a) = self.velocity {
            return formula::advection_speed(&n, &a.map(R::cast), D).abs();
        }
        let m = self.variables;
        let mut best = R::zero();
        for r in 0..m {
            let mut row_sum = R::zero();
            for c in 0..m {
                let mut e = R::zero();
                for d in 0..D {
                    e += n[d] * R::cast(self.matrices[d][r * m + c]);
                }
                row_sum += e.abs();
            }
            best = best.max(row_sum);
        }
        best
    }
}

/// `sum_d n_d a_d` in every lane (the formula's, on lanes).
#[inline(always)]
fn normal_speed<R: Real, const D: usize, const W: usize>(a: [f64; D], n: &[[R; W]; D]) -> [R; W] {
    let a = splat::<R, D, W>(a.map(R::cast));
    formula::advection_speed(Lanes::wrap(n), &a, D).0
}
