//! The Taylor-monomial basis of the MLS fits.

use mote_core::{Precision, Real};

use crate::error::CloudError;
use crate::formula::basis::{ROOT, taylor, taylor_recursive};

/// Highest polynomial degree supported.
pub const MAX_DEGREE: usize = 5;

/// The scaled Taylor monomials `phi_a(d) = (d / h)^a / a!` for all multi-indices `a` with
/// `1 <= |a| <= degree` (no constant term: fits are of differences `u_j - u_i`), ordered by
/// total degree and then lexicographically (descending powers of x first). The first `D`
/// functions are therefore the gradient's.
///
/// The basis size is a run-time value, `C(degree + D, D) - 1`, so particles of different orders
/// share one code path.
#[derive(Clone, Debug, PartialEq)]
pub struct Basis<const D: usize> {
    degree: usize,
    exponents: Vec<[u8; D]>,
    /// The exponents end to end (`D` per function), as the evaluation formula reads them.
    powers: Vec<u32>,
    inverse_factorial: Vec<f64>,
    /// For the recursive evaluation: function `k` is `phi[parent] * q[axis] * factor[k]`
    /// (`parent, axis = recursion[2 k], recursion[2 k + 1]`, the parent [`ROOT`] standing for
    /// the constant 1, `factor` the inverse of the power on `axis`).
    recursion: Vec<u32>,
    factor: Vec<f64>,
    /// `factor` in `f32` (the recursion runs in the working precision).
    factor_f32: Vec<f32>,
}

impl<const D: usize> Basis<D> {
    /// The basis of total degree `degree` (1 to [`MAX_DEGREE`]).
    pub fn new(degree: usize) -> Result<Self, CloudError> {
        if !(1..=MAX_DEGREE).contains(&degree) {
            return Err(CloudError::invalid(
                "MLS degree",
                degree,
                format!("1 to {MAX_DEGREE}"),
            ));
        }
        let mut exponents = Vec::new();
        for total in 1..=degree {
            let mut e = [0u8; D];
            Self::compositions(total, 0, &mut e, &mut exponents);
        }
        let fact = |k: u8| (1..=k as u64).product::<u64>() as f64;
        let inverse_factorial = exponents
            .iter()
            .map(|e| 1.0 / e.iter().map(|&k| fact(k)).product::<f64>())
            .collect();
        // phi_a = phi_(a - e_d) * q_d / a_d for the first axis d with a_d > 0: the parent has a
        // lower total degree, so it comes earlier in the order.
        let mut recursion = Vec::with_capacity(2 * exponents.len());
        let mut factor = Vec::with_capacity(exponents.len());
        for e in &exponents {
            let d = e.iter().position(|&k| k > 0).expect("degree >= 1");
            let mut p = *e;
            p[d] -= 1;
            let parent = if p.iter().all(|&k| k == 0) {
                ROOT
            } else {
                exponents
                    .iter()
                    .position(|x| *x == p)
                    .expect("parent precedes") as u32
            };
            recursion.extend([parent, d as u32]);
            factor.push(1.0 / e[d] as f64);
        }
        Ok(Self {
            degree,
            powers: exponents.iter().flatten().map(|&k| k as u32).collect(),
            exponents,
            inverse_factorial,
            recursion,
            factor_f32: factor.iter().map(|&x| x as f32).collect(),
            factor,
        })
    }

    /// All exponent vectors of total `left` over axes `axis..`, descending in the first axis.
    fn compositions(left: usize, axis: usize, e: &mut [u8; D], out: &mut Vec<[u8; D]>) {
        if axis == D - 1 {
            e[axis] = left as u8;
            out.push(*e);
            return;
        }
        for k in (0..=left).rev() {
            e[axis] = k as u8;
            Self::compositions(left - k, axis + 1, e, out);
        }
    }

    /// Number of basis functions.
    pub fn len(&self) -> usize {
        self.exponents.len()
    }

    /// Whether the basis is empty (never: degree >= 1).
    pub fn is_empty(&self) -> bool {
        self.exponents.is_empty()
    }

    /// The degree.
    pub fn degree(&self) -> usize {
        self.degree
    }

    /// `(-1)^|a|` for every function: the sign of `phi_a(-d)` relative to `phi_a(d)`.
    pub fn parities(&self) -> Vec<f64> {
        self.exponents
            .iter()
            .map(|e| {
                if e.iter().map(|&k| k as u32).sum::<u32>() % 2 == 1 {
                    -1.0
                } else {
                    1.0
                }
            })
            .collect()
    }

    /// The exponents of every function.
    pub fn exponents(&self) -> &[[u8; D]] {
        &self.exponents
    }

    /// The exponents end to end, `D` per function (the tables of [`taylor`]).
    pub fn powers(&self) -> &[u32] {
        &self.powers
    }

    /// Every function's inverse multi-factorial `1 / a!`.
    pub fn inverse_factorials(&self) -> &[f64] {
        &self.inverse_factorial
    }

    /// The recursion of [`taylor_recursive`]: `parent, axis` per function.
    pub fn recursion(&self) -> &[u32] {
        &self.recursion
    }

    /// The recursion's factors in precision `R`.
    #[inline(always)]
    pub fn recursion_factors<R: Real>(&self) -> &[R] {
        // Sizes match (bytemuck checks them), and `PRECISION` names the type.
        match R::PRECISION {
            Precision::F64 => bytemuck::cast_slice(&self.factor),
            Precision::F32 => bytemuck::cast_slice(&self.factor_f32),
        }
    }

    /// `1 / h^|a|` per function: what turns the coefficients of a fit in `d / h` into
    /// derivatives (the CPU's and the device's fits).
    pub fn unscale(&self, h: f64) -> Vec<f64> {
        self.exponents
            .iter()
            .map(|e| h.powi(-(e.iter().map(|&k| k as i32).sum::<i32>())))
            .collect()
    }

    /// The index of the function with exponents `e`.
    pub fn index_of(&self, e: [u8; D]) -> Option<usize> {
        self.exponents.iter().position(|&x| x == e)
    }

    /// The functions of the second derivative along each axis (`x_d^2`), if the degree has
    /// them (MOOD's u2 curvatures).
    pub fn second_derivatives(&self) -> Option<[usize; D]> {
        let mut terms = [0; D];
        for (d, t) in terms.iter_mut().enumerate() {
            let mut e = [0u8; D];
            e[d] = 2;
            *t = self.index_of(e)?;
        }
        Some(terms)
    }

    /// Basis size for `degree` in `D` dimensions without building it: `C(degree + D, D) - 1`.
    pub fn size(degree: usize) -> usize {
        let mut c = 1usize;
        for k in 1..=D {
            c = c * (degree + k) / k;
        }
        c - 1
    }

    /// The first `out.len()` functions at `q`, by the recursion `phi_a = phi_(a - e_d) q_d / a_d`
    /// ([`taylor_recursive`]): two multiplications per function, in the run's precision (for
    /// the per-pair reconstruction of the hot flux pass).
    #[inline(always)]
    pub fn eval_recursive<R: Real>(&self, q: [R; D], out: &mut [R]) {
        let terms = out.len();
        taylor_recursive(&q, &self.recursion, self.recursion_factors(), out, terms);
    }

    /// Evaluates every function at the scaled offset `q = d / h` into `out` ([`taylor`]).
    #[inline(always)]
    pub fn eval(&self, q: [f64; D], out: &mut [f64]) {
        let mut pw = [[0.0f64; MAX_DEGREE + 1]; D];
        let terms = out.len();
        taylor(
            &q,
            &self.powers,
            &self.inverse_factorial,
            pw.as_flattened_mut(),
            out,
            D,
            self.degree,
            terms,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_order() {
        assert_eq!(Basis::<1>::new(3).unwrap().len(), 3);
        assert_eq!(
            Basis::<2>::new(2).unwrap().exponents(),
            &[[1, 0], [0, 1], [2, 0], [1, 1], [0, 2]]
        );
        for degree in 1..=MAX_DEGREE {
            assert_eq!(
                Basis::<2>::new(degree).unwrap().len(),
                Basis::<2>::size(degree)
            );
            assert_eq!(
                Basis::<3>::new(degree).unwrap().len(),
                Basis::<3>::size(degree)
            );
        }
        assert_eq!(Basis::<3>::size(5), 55);
        assert!(Basis::<2>::new(6).is_err());
    }

    #[test]
    fn recursive_evaluation_matches_the_direct_one() {
        let b = Basis::<3>::new(5).unwrap();
        let mut direct = vec![0.0; b.len()];
        let mut rec = vec![0.0; b.len()];
        let q = [0.3, -1.7, 2.1];
        b.eval(q, &mut direct);
        b.eval_recursive(q, &mut rec);
        for (x, y) in direct.iter().zip(&rec) {
            assert!((x - y).abs() <= 1e-14 * x.abs().max(1.0), "{x} vs {y}");
        }
    }

    #[test]
    fn evaluation_divides_by_the_multi_factorial() {
        let b = Basis::<2>::new(3).unwrap();
        let mut out = vec![0.0; b.len()];
        b.eval([2.0, 3.0], &mut out);
        // x^2 y / (2! 1!) = 4 * 3 / 2
        assert_eq!(out[b.index_of([2, 1]).unwrap()], 6.0);
        assert_eq!(out[b.index_of([0, 3]).unwrap()], 27.0 / 6.0);
    }
}
