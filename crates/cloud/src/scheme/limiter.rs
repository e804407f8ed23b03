//! Slope limiters on the MLS derivatives of a particle, applied between the derivative pass and
//! the flux pass.
//!
//! Each particle limits only its own derivative record, reading its neighbours' states (pull
//! form): the result does not depend on the launch order or the thread count.
//!
//! - **Barth-Jespersen** and **Venkatakrishnan** (any dimension): with `u_min`, `u_max` the
//!   extremes of the particle's and its neighbours' values, and `D_j` the unlimited change of the
//!   reconstruction from `x_i` to the midpoint of each pair, the factor
//!   `phi_i = min_j phi(D_j)` keeps every midpoint value inside `[u_min, u_max]` (Barth-Jespersen
//!   exactly; Venkatakrishnan as a smooth approximation that leaves nearly uniform regions
//!   unlimited, `eps^2 = (K dx)^3`). In the **soft** mode `D_j` is the linear part of the
//!   reconstruction and only the gradient is scaled; in the **hard** mode `D_j` is the whole
//!   reconstruction and every derivative term is scaled.
//! - **minmod** and **superbee** (1-D only): the gradient is replaced by the classical limited
//!   slope of the one-sided differences to the nearest neighbour on each side, and the higher
//!   derivatives are dropped (a second-order reconstruction).

use mote_core::{Chunks, CpuBackend, Real, SplitOutputs};

use crate::cloud::Geometry;
use crate::error::CloudError;
use crate::mls::Basis;
use crate::search::{NeighbourList, SlotLayout};

/// Which limiter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimiterKind {
    /// No limiting.
    #[default]
    None,
    /// Barth-Jespersen.
    BarthJespersen,
    /// Venkatakrishnan.
    Venkatakrishnan,
    /// minmod of the one-sided slopes (1-D).
    Minmod,
    /// superbee of the one-sided slopes (1-D).
    Superbee,
}

/// Which derivative terms a multi-dimensional limiter scales.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimiterMode {
    /// The first derivatives only (factor from the linear reconstruction).
    #[default]
    Soft,
    /// Every basis term (factor from the whole reconstruction).
    Hard,
}

/// A slope limiter and its settings.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Limiter {
    /// Which limiter.
    pub kind: LimiterKind,
    /// Soft or hard (Barth-Jespersen and Venkatakrishnan).
    pub mode: LimiterMode,
    /// Venkatakrishnan's `K`: `eps^2 = (K dx)^3`; larger limits less.
    pub venkatakrishnan_k: f64,
}

impl Default for Limiter {
    fn default() -> Self {
        Self {
            kind: LimiterKind::None,
            mode: LimiterMode::Soft,
            venkatakrishnan_k: 1.0,
        }
    }
}

impl Limiter {
    /// No limiter.
    pub fn none() -> Self {
        Self::default()
    }

    /// `kind` in `mode` with the default Venkatakrishnan constant.
    pub fn new(kind: LimiterKind, mode: LimiterMode) -> Self {
        Self {
            kind,
            mode,
            ..Self::default()
        }
    }

    /// By names: `none|bj|vk|minmod|superbee` and `soft|hard`.
    pub fn by_name(kind: &str, mode: &str) -> Result<Self, CloudError> {
        let kind = match kind {
            "none" => LimiterKind::None,
            "bj" | "barth_jespersen" => LimiterKind::BarthJespersen,
            "vk" | "venkatakrishnan" => LimiterKind::Venkatakrishnan,
            "minmod" => LimiterKind::Minmod,
            "superbee" => LimiterKind::Superbee,
            _ => {
                return Err(CloudError::invalid(
                    "limiter",
                    kind,
                    "none, bj, vk, minmod or superbee",
                ));
            }
        };
        let mode = match mode {
            "soft" => LimiterMode::Soft,
            "hard" => LimiterMode::Hard,
            _ => return Err(CloudError::invalid("limiter mode", mode, "soft or hard")),
        };
        Ok(Self::new(kind, mode))
    }

    /// Whether it changes anything.
    pub fn is_active(&self) -> bool {
        self.kind != LimiterKind::None
    }

    /// Checks the settings for a `D`-dimensional run.
    pub fn validate<const D: usize>(&self) -> Result<(), CloudError> {
        if matches!(self.kind, LimiterKind::Minmod | LimiterKind::Superbee) && D != 1 {
            return Err(CloudError::invalid(
                "limiter",
                format!("{:?} in {D}-D", self.kind),
                "minmod and superbee are one-dimensional; use bj or vk",
            ));
        }
        if !(self.venkatakrishnan_k.is_finite() && self.venkatakrishnan_k > 0.0) {
            return Err(CloudError::invalid(
                "Venkatakrishnan K",
                self.venkatakrishnan_k,
                "a positive number",
            ));
        }
        Ok(())
    }
}

/// The limiter pass: everything it reads.
pub(super) struct LimiterPass<'a, R, const D: usize> {
    pub limiter: Limiter,
    pub geometry: &'a Geometry<'a, R, D>,
    pub u: &'a [&'a [R]],
    pub idx: &'a [u32],
    pub basis: &'a Basis<D>,
    /// Reconstruction terms per variable in the derivative records.
    pub mr: usize,
    /// The nominal spacing (Venkatakrishnan's `eps`).
    pub spacing: f64,
}

impl<R: Real, const D: usize> LimiterPass<'_, R, D> {
    /// Limits `derivs` (records of `m * mr` per particle) in place.
    pub fn run<L: SlotLayout>(
        &self,
        list: &NeighbourList<L>,
        derivs: &mut [R],
        backend: CpuBackend,
    ) {
        let m = self.u.len();
        let width = m * self.mr;
        if width == 0 || !self.limiter.is_active() {
            return;
        }
        backend.for_each_block(Chunks::new(derivs, width), 256, |first, mut out| {
            let mut phi = vec![R::zero(); self.mr];
            for k in 0..SplitOutputs::len(&out) {
                let i = first + k;
                let record = out.chunk_mut(k);
                for v in 0..m {
                    let r = &mut record[v * self.mr..(v + 1) * self.mr];
                    self.limit(list, i, v, r, &mut phi);
                }
            }
        });
    }

    /// The minimum-image offset from `i` to `j`.
    #[inline]
    fn offset(&self, i: usize, j: usize) -> [R; D] {
        let g = self.geometry;
        std::array::from_fn(|d| {
            let mut x = g.positions[d][j] - g.positions[d][i];
            if g.periodic[d] {
                let len = R::cast(g.lengths[d]);
                let half = R::cast(0.5 * g.lengths[d]);
                if x > half {
                    x -= len;
                } else if x < -half {
                    x += len;
                }
            }
            x
        })
    }

    /// Limits variable `v`'s derivatives `r` of particle `i`.
    fn limit<L: SlotLayout>(
        &self,
        list: &NeighbourList<L>,
        i: usize,
        v: usize,
        r: &mut [R],
        phi: &mut [R],
    ) {
        let uv = self.u[v];
        let ui = uv[i];
        match self.limiter.kind {
            LimiterKind::None => {}
            LimiterKind::Minmod | LimiterKind::Superbee => {
                // Nearest neighbour on each side (ties: the smaller index, as the slots are
                // sorted by index).
                let (mut left, mut right) = (None::<(R, R)>, None::<(R, R)>);
                for s in list.slots(i) {
                    let j = self.idx[s] as usize;
                    let dx = self.offset(i, j)[0];
                    let du = uv[j] - ui;
                    if dx < R::zero() && left.is_none_or(|(d, _)| dx > d) {
                        left = Some((dx, du));
                    } else if dx > R::zero() && right.is_none_or(|(d, _)| dx < d) {
                        right = Some((dx, du));
                    }
                }
                let slope = match (left, right) {
                    (Some((dl, ul)), Some((dr, ur))) => {
                        let (a, b) = (ul / dl, ur / dr);
                        if self.limiter.kind == LimiterKind::Minmod {
                            minmod(a, b)
                        } else {
                            let two = R::cast(2.0);
                            maxmod(minmod(two * a, b), minmod(a, two * b))
                        }
                    }
                    // A one-sided particle (a boundary) gets no slope.
                    _ => R::zero(),
                };
                r[0] = slope;
                r[1..].fill(R::zero());
            }
            LimiterKind::BarthJespersen | LimiterKind::Venkatakrishnan => {
                let (mut lo, mut hi) = (ui, ui);
                for s in list.slots(i) {
                    let uj = uv[self.idx[s] as usize];
                    lo = lo.min(uj);
                    hi = hi.max(uj);
                }
                let terms = match self.limiter.mode {
                    LimiterMode::Soft => D.min(self.mr),
                    LimiterMode::Hard => self.mr,
                };
                let half = R::cast(0.5);
                let eps2 = R::cast((self.limiter.venkatakrishnan_k * self.spacing).powi(3));
                let mut factor = R::one();
                for s in list.slots(i) {
                    let j = self.idx[s] as usize;
                    let q = self.offset(i, j).map(|x| half * x);
                    self.basis.eval_recursive(q, &mut phi[..terms]);
                    let mut change = R::zero();
                    for a in 0..terms {
                        change += r[a] * phi[a];
                    }
                    let room = if change > R::zero() {
                        hi - ui
                    } else if change < R::zero() {
                        lo - ui
                    } else {
                        continue;
                    };
                    let f = if self.limiter.kind == LimiterKind::BarthJespersen {
                        (room / change).min(R::one())
                    } else {
                        venkatakrishnan(room, change, eps2)
                    };
                    factor = factor.min(f);
                }
                for x in &mut r[..terms] {
                    *x *= factor;
                }
            }
        }
    }
}

/// minmod: the smaller in magnitude when the signs agree, else 0.
#[inline]
fn minmod<R: Real>(a: R, b: R) -> R {
    if a * b <= R::zero() {
        R::zero()
    } else if a.abs() < b.abs() {
        a
    } else {
        b
    }
}

/// maxmod: the larger in magnitude when the signs agree, else 0.
#[inline]
fn maxmod<R: Real>(a: R, b: R) -> R {
    if a * b <= R::zero() {
        R::zero()
    } else if a.abs() > b.abs() {
        a
    } else {
        b
    }
}

/// Venkatakrishnan's smooth limiter function of `room = u_max|min - u_i` and `change` (same
/// sign), with `eps2 = (K dx)^3`; at most 1.
#[inline]
fn venkatakrishnan<R: Real>(room: R, change: R, eps2: R) -> R {
    let two = R::cast(2.0);
    let (p, d) = (room, change);
    let num = p * p + eps2 + two * d * p;
    let den = p * p + two * d * d + d * p + eps2;
    (num / den).min(R::one())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limiter_functions() {
        assert_eq!(minmod(1.0, 2.0), 1.0);
        assert_eq!(minmod(-3.0, -2.0), -2.0);
        assert_eq!(minmod(1.0, -2.0), 0.0);
        assert_eq!(maxmod(1.0, 2.0), 2.0);
        // Venkatakrishnan: 1 for a change well inside the room, towards room / change beyond.
        assert!((venkatakrishnan(1.0f64, 1e-3, 0.0) - 1.0).abs() < 1e-2);
        assert!(venkatakrishnan(1.0, 10.0, 0.0) < 0.2);
        assert!(venkatakrishnan(0.0, 1.0, 0.0) == 0.0);
    }

    #[test]
    fn names() {
        let l = Limiter::by_name("vk", "hard").unwrap();
        assert_eq!(
            (l.kind, l.mode),
            (LimiterKind::Venkatakrishnan, LimiterMode::Hard)
        );
        assert!(Limiter::by_name("van_leer", "soft").is_err());
        assert!(Limiter::by_name("bj", "medium").is_err());
        assert!(
            Limiter::by_name("minmod", "soft")
                .unwrap()
                .validate::<2>()
                .is_err()
        );
        assert!(
            Limiter::by_name("minmod", "soft")
                .unwrap()
                .validate::<1>()
                .is_ok()
        );
    }
}
