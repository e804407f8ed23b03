//! Moving-least-squares (MLS) derivative operators.
//!
//! For particle `i` with neighbours `j`, offsets `d_j = x_j - x_i` (minimum image), the fit
//! minimises `sum_j w(|d_j|) (u_j - u_i - sum_a c_a phi_a(d_j))^2` over the Taylor basis
//! [`Basis`]. Its normal equations `M c = sum_j w_j phi(d_j) (u_j - u_i)`,
//! `M = sum_j w_j phi(d_j) phi(d_j)^T`, are solved once per particle by a Cholesky factorisation
//! of the Jacobi-scaled, slightly regularised `M` (in `f64` whatever the run precision), giving per
//! slot the coefficient vector `g_j = w_j M^-1 phi(d_j)`. Then, for any field `u`,
//!
//! `d^a u (x_i) ~= sum_j G_a[j] (u_j - u_i)`, with `G_a[j] = g_j[a] / h^|a|`,
//!
//! stored as one per-slot array per basis function (component arrays, either slot layout).

mod basis;
mod names;

pub use basis::{Basis, MAX_DEGREE};

use mote_core::{
    Budgeted, BudgetedBuffer, Buffer, CpuBackend, Real, Scaling, SlotWriter, SplitOutputs,
};

use crate::cloud::Cloud;
use crate::error::CloudError;
use crate::search::{NeighbourList, SlotLayout};

/// The weight of a neighbour at distance `r` (zero beyond the cutoff radius `R`).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Weight {
    /// `exp(-(r / (shape R))^2)`, Gaussian-like.
    Exponential {
        /// Width relative to the cutoff.
        shape: f64,
    },
    /// `(h / r)^power`, `h` the nominal spacing.
    InverseDistance {
        /// The power.
        power: f64,
    },
}

impl Default for Weight {
    fn default() -> Self {
        Weight::Exponential { shape: 0.5 }
    }
}

impl Weight {
    /// The weight at distance `r`, cutoff `cutoff`, spacing `h`.
    #[inline]
    pub fn at(&self, r: f64, cutoff: f64, h: f64) -> f64 {
        if r > cutoff {
            return 0.0;
        }
        match *self {
            Weight::Exponential { shape } => {
                let t = r / (shape * cutoff);
                (-t * t).exp()
            }
            Weight::InverseDistance { power } => (h / r.max(1e-12 * h)).powf(power),
        }
    }
}

/// The default neighbour-search radius, in units of the spacing, for fits of `degree` in `D`
/// dimensions: the ball then holds about 1.5 times the basis size plus one particles, with
/// half a spacing of margin for jitter and lattice discreteness.
pub fn default_radius_factor<const D: usize>(degree: usize) -> f64 {
    let m = Basis::<D>::size(degree) as f64;
    let ball = match D {
        1 => 2.0,
        2 => std::f64::consts::PI,
        _ => 4.0 / 3.0 * std::f64::consts::PI,
    };
    ((1.5 * m + 1.0) / ball).powf(1.0 / D as f64).max(1.0) + 0.5
}

/// Per-slot MLS derivative coefficients of a cloud.
#[derive(Clone, Debug)]
pub struct Mls<R: Real, const D: usize> {
    basis: Basis<D>,
    weight: Weight,
    spacing: f64,
    coefficients: Vec<Buffer<R>>,
    /// `Some((axis, side))`: a one-sided fit over the neighbours with `side * d[axis] >= 0`.
    stencil: Option<(usize, f64)>,
    /// One-sided fits: 1 where the fit exists (enough neighbours on that side), else 0.
    valid: Buffer<u8>,
}

impl<R: Real, const D: usize> Mls<R, D> {
    /// An operator of polynomial `degree` with `weight`.
    pub fn new(degree: usize, weight: Weight) -> Result<Self, CloudError> {
        let basis = Basis::<D>::new(degree)?;
        let coefficients = (0..basis.len())
            .map(|k| Buffer::new(names::COEFFICIENT_NAMES[k], Scaling::PerSlot(1)))
            .collect();
        Ok(Self {
            basis,
            weight,
            spacing: 1.0,
            coefficients,
            stencil: None,
            valid: Buffer::new("mls_valid", Scaling::PerParticle(1)),
        })
    }

    /// A one-sided operator: fits over the neighbours on the `high` (or low) side of `axis` only
    /// (`d[axis] >= 0`, resp. `<= 0`). Where a side holds too few neighbours for the basis, or
    /// they do not span it, the fit is marked invalid ([`Mls::valid`]) instead of failing:
    /// WENO-type schemes then leave that stencil out.
    pub fn one_sided(
        degree: usize,
        weight: Weight,
        axis: usize,
        high: bool,
    ) -> Result<Self, CloudError> {
        let mut mls = Self::new(degree, weight)?;
        if axis >= D {
            return Err(CloudError::invalid(
                "stencil axis",
                axis,
                format!("below {D}"),
            ));
        }
        mls.stencil = Some((axis, if high { 1.0 } else { -1.0 }));
        Ok(mls)
    }

    /// Per particle, whether the fit exists (always 1 for full stencils).
    pub fn valid(&self) -> &[u8] {
        self.valid.as_slice()
    }

    /// The weight function.
    pub fn weight(&self) -> Weight {
        self.weight
    }

    /// The basis.
    pub fn basis(&self) -> &Basis<D> {
        &self.basis
    }

    /// The nominal spacing `h` the basis is scaled by (set by [`Mls::compute`]).
    pub fn spacing(&self) -> f64 {
        self.spacing
    }

    /// The per-slot coefficients of basis function `k` (a derivative, see the module docs).
    pub fn coefficients(&self, k: usize) -> &[R] {
        self.coefficients[k].as_slice()
    }

    /// Computes the coefficients for `cloud` and its neighbour `list`.
    ///
    /// Fails if an interior particle has fewer neighbours than basis functions (the fit would be
    /// underdetermined), or if a budgeted coefficient array is full. Boundary particles with too
    /// few neighbours (the outer corners of boundary layers) get zero coefficients: no
    /// derivative information, which limits their reconstruction to first order.
    pub fn compute<L: SlotLayout>(
        &mut self,
        cloud: &Cloud<R, D>,
        list: &NeighbourList<L>,
        backend: CpuBackend,
    ) -> Result<(), CloudError> {
        let m = self.basis.len();
        let n = cloud.len();
        let underdetermined = |i: usize| (list.counts()[i] as usize) < m;
        let tags = cloud.tags();
        let stencil = self.stencil;
        self.valid.resize(n, 1)?;
        // A split cloud's ranks check their own particles (the halo's outer ring has partial
        // neighbourhoods) and agree on the first failure in the one-process order.
        let halo = list.halo();
        let checked = halo.map_or(0..n, |h| h.own());
        if stencil.is_none() {
            let mine = checked
                .clone()
                .find(|&i| underdetermined(i) && tags[i] == crate::cloud::INTERIOR)
                .map(|i| [u64::from(list.counts()[i]), cloud.ids()[i]]);
            let first = match halo {
                Some(h) => h.first_failure(mine),
                None => mine,
            };
            if let Some([count, id]) = first {
                return Err(CloudError::invalid(
                    "neighbour count",
                    format!("{count} at particle id {id}"),
                    format!("at least the basis size {m} (raise the search radius)"),
                ));
            }
        }
        let slots = list.layout().slot_count();
        for b in &self.coefficients {
            b.check_len(slots)?;
        }
        for b in &mut self.coefficients {
            b.resize(slots, R::zero())?;
        }
        let h = cloud.spacing().iter().sum::<f64>() / D as f64;
        self.spacing = h;
        let cutoff = list.radius();
        let basis = &self.basis;
        let weight = self.weight;
        let pos = cloud.positions();
        let periodic = cloud.domain().periodic();
        let lengths = cloud.domain().lengths();
        let indices = list.indices();
        let unscale = basis.unscale(h);
        let writers: Vec<L::Writer<'_, R>> = self
            .coefficients
            .iter_mut()
            .map(|b| list.layout().writer(b.as_mut_slice()))
            .collect();
        let failed = std::sync::atomic::AtomicUsize::new(usize::MAX);
        let valid = self.valid.as_mut_slice();
        backend.for_each_block((writers, valid), 64, |first, (mut out, valid)| {
            // `out` holds one writer per basis function; the block's particle count is theirs.
            let block = SplitOutputs::len(&out);
            // Scratch for one block, reused by every particle in it.
            let max = (first..first + block)
                .map(|i| list.counts()[i] as usize)
                .max()
                .unwrap_or(0);
            let mut phi = vec![0.0f64; max * m];
            let mut w = vec![0.0f64; max];
            let mut mat = vec![0.0f64; m * m];
            let mut scale = vec![0.0f64; m];
            for k in 0..block {
                let i = first + k;
                let slots = list.slots(i);
                let count = slots.len();
                let zero = |out: &mut Vec<L::Writer<'_, R>>| {
                    for s_k in 0..count {
                        for o in out.iter_mut() {
                            o.set_slot(k, s_k, R::zero());
                        }
                    }
                };
                valid[k] = 1;
                if underdetermined(i) {
                    zero(&mut out);
                    valid[k] = 0;
                    continue;
                }
                for (s_k, s) in slots.enumerate() {
                    let j = indices[s] as usize;
                    let mut q = [0.0; D];
                    let mut r2 = 0.0;
                    for a in 0..D {
                        let mut d = (pos[a][j] - pos[a][i]).as_f64();
                        if periodic[a] {
                            if d > 0.5 * lengths[a] {
                                d -= lengths[a];
                            } else if d < -0.5 * lengths[a] {
                                d += lengths[a];
                            }
                        }
                        r2 += d * d;
                        q[a] = d / h;
                    }
                    w[s_k] = weight.at(r2.sqrt(), cutoff, h);
                    if let Some((axis, side)) = stencil
                        && side * q[axis] < 0.0
                    {
                        w[s_k] = 0.0;
                    }
                    basis.eval(q, &mut phi[s_k * m..(s_k + 1) * m]);
                }
                if stencil.is_some() && w[..count].iter().filter(|&&x| x > 0.0).count() < m {
                    zero(&mut out);
                    valid[k] = 0;
                    continue;
                }
                // M = sum_j w_j phi_j phi_j^T (lower triangle).
                mat.fill(0.0);
                for s_k in 0..count {
                    let p = &phi[s_k * m..(s_k + 1) * m];
                    for r in 0..m {
                        let wr = w[s_k] * p[r];
                        for c in 0..=r {
                            mat[r * m + c] += wr * p[c];
                        }
                    }
                }
                // Jacobi scaling to unit diagonal, a relative regularisation of 1e-15 (it guards
                // the factorisation against round-off; a larger one biases the fits: 1e-13 cost
                // two orders of accuracy at degree 5), then Cholesky.
                for r in 0..m {
                    scale[r] = 1.0 / mat[r * m + r].max(f64::MIN_POSITIVE).sqrt();
                }
                for r in 0..m {
                    for c in 0..=r {
                        mat[r * m + c] *= scale[r] * scale[c];
                    }
                    mat[r * m + r] += 1e-15;
                }
                if !cholesky(&mut mat, m) {
                    zero(&mut out);
                    valid[k] = 0;
                    if stencil.is_none() && checked.contains(&i) {
                        failed.fetch_min(i, std::sync::atomic::Ordering::Relaxed);
                    }
                    continue;
                }
                // g_j = w_j S (S M S)^-1 S phi_j, per slot.
                for s_k in 0..count {
                    let p = &mut phi[s_k * m..(s_k + 1) * m];
                    for r in 0..m {
                        p[r] *= scale[r];
                    }
                    cholesky_solve(&mat, m, p);
                    for r in 0..m {
                        out[r].set_slot(k, s_k, R::cast(w[s_k] * scale[r] * p[r] * unscale[r]));
                    }
                }
            }
        });
        let failed = failed.into_inner();
        let mine = (failed != usize::MAX).then(|| [cloud.ids()[failed]]);
        let first = match halo {
            Some(h) => h.first_failure(mine),
            None => mine,
        };
        if let Some([id]) = first {
            return Err(CloudError::invalid(
                "MLS moment matrix",
                format!("singular at particle id {id}"),
                "a neighbourhood that spans every direction (raise the search radius or lower the degree)",
            ));
        }
        Ok(())
    }

    /// Derivatives of `u` at particle `i`, one per basis function, into `out` (set-up, tests and
    /// diagnostics; passes apply the coefficients in their own loops).
    pub fn derivatives<L: SlotLayout>(
        &self,
        list: &NeighbourList<L>,
        u: &[R],
        i: usize,
        out: &mut [f64],
    ) {
        out.fill(0.0);
        for s in list.slots(i) {
            let du = (u[list.indices()[s] as usize] - u[i]).as_f64();
            for (k, o) in out.iter_mut().enumerate() {
                *o += self.coefficients[k].as_slice()[s].as_f64() * du;
            }
        }
    }
}

/// In-place Cholesky `A = L L^T` of the lower triangle of the row-major `m x m` matrix `a`;
/// false if it is not positive definite.
fn cholesky(a: &mut [f64], m: usize) -> bool {
    for j in 0..m {
        let mut d = a[j * m + j];
        for k in 0..j {
            d -= a[j * m + k] * a[j * m + k];
        }
        // Not positive, or NaN: not positive definite.
        if d.is_nan() || d <= 0.0 {
            return false;
        }
        let d = d.sqrt();
        a[j * m + j] = d;
        for i in j + 1..m {
            let mut s = a[i * m + j];
            for k in 0..j {
                s -= a[i * m + k] * a[j * m + k];
            }
            a[i * m + j] = s / d;
        }
    }
    true
}

/// Solves `L L^T x = b` in place with the factor from [`cholesky`].
fn cholesky_solve(l: &[f64], m: usize, b: &mut [f64]) {
    for i in 0..m {
        let mut s = b[i];
        for k in 0..i {
            s -= l[i * m + k] * b[k];
        }
        b[i] = s / l[i * m + i];
    }
    for i in (0..m).rev() {
        let mut s = b[i];
        for k in i + 1..m {
            s -= l[k * m + i] * b[k];
        }
        b[i] = s / l[i * m + i];
    }
}

impl<R: Real, const D: usize> Budgeted for Mls<R, D> {
    fn buffers(&self) -> Vec<&dyn BudgetedBuffer> {
        let mut v: Vec<&dyn BudgetedBuffer> = self
            .coefficients
            .iter()
            .map(|b| b as &dyn BudgetedBuffer)
            .collect();
        v.push(&self.valid);
        v
    }
    fn buffers_mut(&mut self) -> Vec<&mut dyn BudgetedBuffer> {
        let mut v: Vec<&mut dyn BudgetedBuffer> = self
            .coefficients
            .iter_mut()
            .map(|b| b as &mut dyn BudgetedBuffer)
            .collect();
        v.push(&mut self.valid);
        v
    }
}
