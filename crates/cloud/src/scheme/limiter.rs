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

use mote_core::{Chunks, CpuBackend, Real, SimdLevel, SplitOutputs};

use super::flux_pass::{LANES, MAX_TERMS, basis_lanes, half_offsets, next_batch};
use crate::cloud::{Geometry, MAX_VARIABLES};
use crate::error::CloudError;
use crate::formula::Lanes;
use crate::formula::limiter::{bounded_factor, limited_slope};
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
    /// The SIMD level of the batched Barth-Jespersen and Venkatakrishnan pass (every level
    /// gives the same bits).
    pub simd: SimdLevel,
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
        // Each particle's limited record reads only its own record and its neighbours' states:
        // on several ranks each limits its range of blocks, gathered as the derivative pass is.
        super::on_own_blocks(list.halo(), derivs, width, |start, own| {
            if matches!(
                self.limiter.kind,
                LimiterKind::BarthJespersen | LimiterKind::Venkatakrishnan
            ) {
                let level = self.simd;
                assert!(level.is_available(), "SIMD level {level} not available");
                backend.for_each_block(Chunks::new(own, width), 256, |first, mut out| {
                    level.run_gathers(
                        #[inline(always)]
                        || self.bounded_block(list, start + first, &mut out),
                    )
                });
                return;
            }
            backend.for_each_block(Chunks::new(own, width), 256, |first, mut out| {
                let mut phi = vec![R::zero(); self.mr];
                for k in 0..SplitOutputs::len(&out) {
                    let i = start + first + k;
                    let record = out.chunk_mut(k);
                    for v in 0..m {
                        let r = &mut record[v * self.mr..(v + 1) * self.mr];
                        self.limit(list, i, v, r, &mut phi);
                    }
                }
            });
        });
    }

    /// Barth-Jespersen and Venkatakrishnan for a block of particles, [`LANES`] neighbours at a
    /// time: a first walk over the slots finds each variable's extremes, a second evaluates the
    /// half offsets and the basis once per batch for every variable, and each lane keeps its
    /// smallest factor. Minima are exact and every per-lane expression is the per-slot one
    /// operation for operation, so the factors, and the limited derivatives, are bitwise those
    /// of a plain loop over the slots ([`LimiterPass::limit`]'s former path), on every SIMD level.
    #[inline(always)]
    fn bounded_block<L: SlotLayout>(
        &self,
        list: &NeighbourList<L>,
        first: usize,
        out: &mut Chunks<'_, R>,
    ) {
        const W: usize = LANES;
        let (u, idx, mr) = (self.u, self.idx, self.mr);
        let m = u.len();
        let g = self.geometry;
        let pos = g.positions;
        let n = pos[0].len();
        // Every unchecked read below is in bounds: the per-particle arrays have `n` entries
        // (asserted here) and `next_batch` checks every neighbour index below `n`.
        assert!(
            pos.iter().all(|p| p.len() == n)
                && u.iter().all(|x| x.len() == n)
                && m <= MAX_VARIABLES
                && mr <= MAX_TERMS,
            "limiter pass: arrays of unequal lengths"
        );
        let terms = match self.limiter.mode {
            LimiterMode::Soft => D.min(mr),
            LimiterMode::Hard => mr,
        };
        let (zero, one) = (R::zero(), R::one());
        let eps2 = R::cast((self.limiter.venkatakrishnan_k * self.spacing).powi(3));
        let bj = self.limiter.kind == LimiterKind::BarthJespersen;
        let lengths = g.lengths.map(R::cast);
        let mut phi = [[zero; W]; MAX_TERMS];
        let mut scratch = [zero; MAX_TERMS];
        let mut lo = [[zero; W]; MAX_VARIABLES];
        let mut hi = [[zero; W]; MAX_VARIABLES];
        let mut factor = [[one; W]; MAX_VARIABLES];
        for k in 0..SplitOutputs::len(out) {
            let i = first + k;
            let record = out.chunk_mut(k);
            for v in 0..m {
                lo[v] = [u[v][i]; W];
                hi[v] = lo[v];
                factor[v] = [one; W];
            }
            // The extremes (padding lanes read the particle itself: no change).
            let mut slots = list.slots(i);
            while slots.len() > 0 {
                let (_, j_l, _) = next_batch(&mut slots, idx, i, n);
                for v in 0..m {
                    for l in 0..W {
                        // SAFETY: j_l[l] < n = u[v].len().
                        let uj = unsafe { *u[v].get_unchecked(j_l[l]) };
                        lo[v][l] = if uj < lo[v][l] { uj } else { lo[v][l] };
                        hi[v][l] = if uj > hi[v][l] { uj } else { hi[v][l] };
                    }
                }
            }
            let extremes: [(R, R); MAX_VARIABLES] = std::array::from_fn(|v| {
                if v >= m {
                    return (zero, zero);
                }
                lo[v]
                    .iter()
                    .zip(&hi[v])
                    .fold((lo[v][0], hi[v][0]), |(a, b), (&x, &y)| {
                        (if x < a { x } else { a }, if y > b { y } else { b })
                    })
            });
            let xi: [R; D] = std::array::from_fn(|d| pos[d][i]);
            let mut slots = list.slots(i);
            while slots.len() > 0 {
                let (_, j_l, count) = next_batch(&mut slots, idx, i, n);
                // SAFETY: every j_l[l] < n = pos[d].len() (checked by next_batch).
                let delta = unsafe { half_offsets(pos, &xi, &j_l, g.periodic, &lengths) };
                basis_lanes(self.basis, &delta, terms, &mut phi, &mut scratch);
                for v in 0..m {
                    let r = &record[v * mr..v * mr + terms];
                    let ui = u[v][i];
                    let (lo_v, hi_v) = extremes[v];
                    let mut change = [zero; W];
                    for a in 0..terms {
                        for l in 0..W {
                            change[l] += r[a] * phi[a][l];
                        }
                    }
                    let f = bounded_factor::<Lanes<R, W>>(
                        Lanes(change),
                        Lanes::splat(hi_v - ui),
                        Lanes::splat(lo_v - ui),
                        Lanes::splat(eps2),
                        bj,
                    );
                    for l in 0..W {
                        // Padding lanes do not limit.
                        let f = if l < count { f.0[l] } else { one };
                        factor[v][l] = if f < factor[v][l] { f } else { factor[v][l] };
                    }
                }
            }
            for v in 0..m {
                let f = factor[v]
                    .iter()
                    .fold(one, |a, &x| if x < a { x } else { a });
                for x in &mut record[v * mr..v * mr + terms] {
                    *x *= f;
                }
            }
        }
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

    /// Limits variable `v`'s derivatives `r` of particle `i`, a plain loop over the slots:
    /// minmod and superbee run here; for Barth-Jespersen and Venkatakrishnan it is the
    /// reference the batched pass ([`LimiterPass::bounded_block`]) is tested against.
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
                    (Some((dl, ul)), Some((dr, ur))) => limited_slope::<R>(
                        ul / dl,
                        ur / dr,
                        self.limiter.kind == LimiterKind::Superbee,
                    ),
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
                let bj = self.limiter.kind == LimiterKind::BarthJespersen;
                let mut factor = R::one();
                for s in list.slots(i) {
                    let j = self.idx[s] as usize;
                    let q = self.offset(i, j).map(|x| half * x);
                    self.basis.eval_recursive(q, &mut phi[..terms]);
                    let mut change = R::zero();
                    for a in 0..terms {
                        change += r[a] * phi[a];
                    }
                    let f = bounded_factor::<R>(change, hi - ui, lo - ui, eps2, bj);
                    factor = factor.min(f);
                }
                for x in &mut r[..terms] {
                    *x *= factor;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::{NeighbourSearch, RowMajor};
    use crate::{Cloud, Domain, LatticeOptions};

    /// The batched Barth-Jespersen and Venkatakrishnan pass gives the plain per-slot loop's
    /// derivatives (`limit`) on every SIMD level, in both modes, periodic or not, for one and
    /// four variables; and the case limits something.
    #[test]
    fn batched_bounded_limiters_equal_the_per_slot_loop() {
        for (periodic, m, mr) in [(true, 1, 5), (false, 4, 5), (true, 2, 9)] {
            let opts = LatticeOptions {
                spacing: 1.0 / 24.0,
                jitter: 0.4,
                seed: 7,
                boundary_layers: 0,
            };
            let domain = Domain::new_box([0.0; 2], [1.0; 2], [periodic; 2]).unwrap();
            let mut cloud = Cloud::<f64, 2>::lattice(domain, opts, m).unwrap();
            let n = cloud.len();
            for v in 0..m {
                for i in 0..n {
                    let x = cloud.position_of(i);
                    let jump = if x[0] < 0.5 { 1.0 } else { 0.0 };
                    cloud.state_var_mut(v)[i] = (7.0 * x[1] + v as f64).sin() + jump;
                }
            }
            let mut search = NeighbourSearch::new(3.0 / 24.0).unwrap();
            let mut list = NeighbourList::<RowMajor>::default();
            search.build(&cloud, CpuBackend::Serial, &mut list).unwrap();
            let basis = Basis::<2>::new(if mr == 5 { 2 } else { 3 }).unwrap();
            assert_eq!(basis.len(), mr);
            // Derivative records of every sign and size.
            let derivs: Vec<f64> = (0..n * m * mr)
                .map(|k| ((k as f64) * 0.618).sin() * 20.0)
                .collect();
            let geometry = cloud.geometry();
            let u: Vec<&[f64]> = (0..m).map(|v| cloud.state(v)).collect();
            for kind in [LimiterKind::BarthJespersen, LimiterKind::Venkatakrishnan] {
                for mode in [LimiterMode::Soft, LimiterMode::Hard] {
                    let pass = |simd| LimiterPass {
                        limiter: Limiter::new(kind, mode),
                        geometry: &geometry,
                        u: &u,
                        idx: list.indices(),
                        basis: &basis,
                        mr,
                        spacing: 1.0 / 24.0,
                        simd,
                    };
                    let mut plain = derivs.clone();
                    let reference = pass(SimdLevel::Scalar);
                    let mut phi = vec![0.0; mr];
                    for i in 0..n {
                        for v in 0..m {
                            let r = &mut plain[(i * m + v) * mr..(i * m + v + 1) * mr];
                            reference.limit(&list, i, v, r, &mut phi);
                        }
                    }
                    let limited = plain.iter().zip(&derivs).filter(|(a, b)| a != b).count();
                    assert!(limited > n / 20, "{kind:?} {mode:?}: {limited} changed");
                    for level in SimdLevel::gather_levels() {
                        let mut batched = derivs.clone();
                        pass(level).run(&list, &mut batched, CpuBackend::threads(2));
                        assert!(
                            batched.iter().zip(&plain).all(|(a, b)| a == b),
                            "{kind:?} {mode:?} {level} periodic {periodic} m {m} mr {mr}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn limiter_functions() {
        use crate::formula::limiter::{maxmod, minmod, venkatakrishnan};
        assert_eq!(minmod(1.0, 2.0), 1.0);
        assert_eq!(minmod(-3.0, -2.0), -2.0);
        assert_eq!(minmod(1.0, -2.0), 0.0);
        assert_eq!(maxmod(1.0, 2.0), 2.0);
        assert_eq!(maxmod(-1.0, 2.0), 0.0);
        // superbee: the steeper slope where the two are within a factor 2, twice the
        // shallower beyond.
        assert_eq!(limited_slope(1.0, 1.5, true), 1.5);
        assert_eq!(limited_slope(1.0, 3.0, true), 2.0);
        assert_eq!(limited_slope(1.0, 3.0, false), 1.0);
        // Barth-Jespersen: room / change capped at 1; no change, or a NaN change, limits
        // nothing.
        assert_eq!(bounded_factor(2.0, 1.0, -4.0, 0.0, true), 0.5);
        assert_eq!(bounded_factor(-2.0, 1.0, -4.0, 0.0, true), 1.0);
        assert_eq!(bounded_factor(-8.0, 1.0, -4.0, 0.0, true), 0.5);
        assert_eq!(bounded_factor(0.0, 0.0, 0.0, 0.0, true), 1.0);
        assert_eq!(bounded_factor(f64::NAN, 0.0, 0.0, 0.0, false), 1.0);
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
