//! MLS moment solves on the device: the per-slot derivative coefficients of
//! [`mote_cloud::mls::Mls`], one unit per particle, in either slot layout.
//!
//! Each unit walks its neighbours twice. The first walk accumulates the moment matrix
//! `M = sum_j w_j phi(d_j) phi(d_j)^T` (lower triangle) in a private array; the matrix is
//! Jacobi-scaled, regularised and factorised by Cholesky exactly as on the CPU. The second walk
//! re-evaluates each neighbour's basis vector, solves, and writes `g_j = w_j M^-1 phi(d_j)`,
//! unscaled to derivatives, into the particle's own slots. Nothing per slot is stored between the
//! walks, so the scratch is `cap^2 + 2 cap` numbers per unit, `cap` the basis size of the run: the
//! basis size `m` is a run-time value (a loop bound); only the private arrays' capacity is fixed
//! per launch, never per particle.
//!
//! The fits are computed in f64 where the device supports it (as on the CPU, whatever the run's
//! precision), else in f32. The weight's `exp` is evaluated by arithmetic (range reduction by
//! powers of two and a Taylor series): the Vulkan paths' f64 `exp` is wrong. The basis is
//! evaluated with the CPU's power tables and operation order, so coefficients agree with the CPU
//! to a few rounding errors amplified by the fit's conditioning.

use cubecl::prelude::*;
use mote_cloud::mls::{Basis, MAX_DEGREE};
use mote_cloud::{CloudError, Weight};
use mote_core::{Budgeted, BudgetedBuffer, Precision, Scaling};

use crate::array::DeviceArray;
use crate::device::Gpu;
use crate::error::GpuError;
use crate::formula::basis::taylor;
use crate::gravity::GpuFloat;
use crate::launch::{ListArgs, Neighbours, launch, slot_base};
use crate::search::{DeviceCloud, DeviceNeighbours};

/// Index of each constant in the kernel's `consts` array.
mod c {
    pub const INV_H: usize = 0;
    pub const H: usize = 1;
    pub const CUTOFF: usize = 2;
    pub const WIDTH: usize = 3;
    pub const LN2: usize = 4;
    pub const INV_LN2: usize = 5;
    pub const POWER: usize = 6;
    pub const REGULARISATION: usize = 7;
    pub const TINY: usize = 8;
    pub const MIN_POSITIVE: usize = 9;
    /// `2^-(2^b)` for `b = 0..7`.
    pub const POW2: usize = 10;
    pub const LEN: usize = 17;
}

/// `exp(x)` for `x <= 0` by arithmetic only: `x = k ln2 + r` with `|r| <= ln2 / 2`, a Taylor
/// series of 18 terms for `exp(r)` (below f64 round-off), then `2^k` by binary powers.
#[cube]
fn exp_nonpositive<G: Float>(x: G, consts: &Array<G>) -> G {
    let k = G::floor(x * consts[c::INV_LN2] + G::new(0.5));
    let r = x - k * consts[c::LN2];
    let mut term = G::new(1.0);
    let mut sum = G::new(1.0);
    #[unroll]
    for t in 1..19u32 {
        term = term * r / G::cast_from(t);
        sum += term;
    }
    // Beyond 2^-127 the weight is zero in any precision that matters.
    let halvings = u32::min(u32::cast_from(G::max(-k, G::new(0.0))), 127u32);
    #[unroll]
    for b in 0..7u32 {
        if (halvings >> b) & 1u32 == 1u32 {
            sum *= consts[c::POW2 + b as usize];
        }
    }
    sum
}

/// The offset to neighbour `j` scaled by `1 / h` into `q`, and its weight (0 beyond the cutoff).
#[cube]
fn offset_and_weight<F: Float, G: Float>(
    x: &Array<F>,
    y: &Array<F>,
    z: &Array<F>,
    i: usize,
    j: usize,
    tables: &FitTables<G>,
    weight_kind: u32,
    q: &mut Array<G>,
    #[comptime] dim: usize,
) -> G {
    let mut r2 = G::new(0.0);
    #[unroll]
    for a in 0..dim {
        let mut d = if a == 0 {
            G::cast_from(x[j] - x[i])
        } else if a == 1 {
            G::cast_from(y[j] - y[i])
        } else {
            G::cast_from(z[j] - z[i])
        };
        if tables.periodic[a] == 1 {
            if d > tables.geo[3 + a] {
                d -= tables.geo[a];
            } else if d < -tables.geo[3 + a] {
                d += tables.geo[a];
            }
        }
        r2 += d * d;
        q[a] = d / tables.consts[c::H];
    }
    let r = G::sqrt(r2);
    let mut w = G::new(0.0);
    if r <= tables.consts[c::CUTOFF] {
        if weight_kind == 0 {
            let t = r / tables.consts[c::WIDTH];
            w = exp_nonpositive::<G>(-t * t, &tables.consts);
        } else {
            // (h / max(r, 1e-12 h))^power, integer powers 0 to 127 (checked on the host), by
            // binary powers.
            let mut ratio =
                tables.consts[c::H] / G::max(r, tables.consts[c::TINY] * tables.consts[c::H]);
            let p = u32::cast_from(tables.consts[c::POWER]);
            w = G::new(1.0);
            #[unroll]
            for b in 0..7u32 {
                if (p >> b) & 1u32 == 1u32 {
                    w *= ratio;
                }
                ratio *= ratio;
            }
        }
    }
    w
}

/// The basis at `q` into `phi` from the fit's tables (the shared formula `taylor`).
#[cube]
fn basis_at<G: Float>(
    q: &Array<G>,
    tables: &FitTables<G>,
    pw: &mut Array<G>,
    phi: &mut Array<G>,
    #[comptime] dim: usize,
    #[comptime] degree: usize,
    #[comptime] cap: usize,
) {
    taylor::<G>(
        q,
        &tables.exponents,
        &tables.inverse_factorial,
        pw,
        phi,
        dim,
        degree,
        cap,
    );
}

/// The weight `w` of a neighbour at scaled offset `q`, or 0 for a one-sided fit when the
/// neighbour lies on the other side of `axis` (`high`: keep `q[axis] >= 0`; else `<= 0`).
#[cube]
fn side_weight<G: Float>(w: G, q: &Array<G>, one_sided: bool, axis: usize, high: bool) -> G {
    let qa = q[axis];
    let other = select(high, qa < G::new(0.0), qa > G::new(0.0));
    select(one_sided && other, G::new(0.0), w)
}

/// One unit per particle: the fit of its neighbourhood (see the module docs). Every loop over
/// basis functions is unrolled (the basis size `cap`, the dimension and the degree are fixed per
/// launch: the run's fit, not a particle's order), so that the only loops left are the two walks
/// over the slots, whose trip count is the same for every unit (the maximum neighbour count,
/// each unit masking the slots past its own count). Mesa's software driver stops a loop after
/// 65 535 iterations in total, and loops whose trip counts differ within one SIMD group were cut
/// short there: both gave wrong coefficients silently before this structure.
#[cube(launch_unchecked)]
fn mls_kernel<F: Float, G: Float>(
    x: &Array<F>,
    y: &Array<F>,
    z: &Array<F>,
    tags: &Array<u32>,
    list: &Neighbours,
    tables: &FitTables<G>,
    weight_kind: u32,
    stencil: u32,
    coef: &mut Array<F>,
    valid: &mut Array<u32>,
    own: &Array<u32>,
    failed: &mut Array<Atomic<u32>>,
    #[comptime] dim: usize,
    #[comptime] degree: usize,
    #[comptime] cap: usize,
) {
    let i = ABSOLUTE_POS;
    if i < list.n as usize {
        let count = list.counts[i];
        // (`select`, not a mutable literal reassigned in a branch: CubeCL keeps a variable
        // initialised from a literal at compile time.)
        let (base, stride) = slot_base(list, i);
        let slots_u = list.slots as usize;
        let mut ok = count >= cap as u32;
        // Only the own particles fail (`own`: a split cloud's halo has partial
        // neighbourhoods in its outer ring; everything elsewhere).
        let mine = i >= own[0] as usize && i < own[1] as usize;
        // One-sided fits (`stencil > 0`) mark a missing fit in `valid` instead of failing.
        if !ok && tags[i] == 0 && stencil == 0 && mine {
            failed[0].fetch_min(i as u32);
        }
        // A one-sided fit keeps the neighbours with `side * d[axis] >= 0`; it exists where at
        // least `cap` of them have a positive weight (as on the CPU).
        let one_sided = stencil > 0;
        let code = u32::max(stencil, 1u32) - 1u32;
        let axis = (code / 2u32) as usize;
        let high = code % 2u32 == 1u32;
        let mut positive = 0u32;
        let mut mat = Array::<G>::new(cap * cap);
        let mut phi = Array::<G>::new(cap);
        let mut scale = Array::<G>::new(cap);
        let mut q = Array::<G>::new(3usize);
        let mut pw = Array::<G>::new(3usize * (MAX_DEGREE + 1));
        #[unroll]
        for r in 0..cap * cap {
            mat[r] = G::new(0.0);
        }
        // M = sum_j w_j phi_j phi_j^T (lower triangle).
        for k in 0..list.max_count {
            if ok && k < count {
                let s = base + k as usize * stride;
                let j = list.indices[s] as usize;
                let w0 = offset_and_weight::<F, G>(x, y, z, i, j, tables, weight_kind, &mut q, dim);
                let w = side_weight::<G>(w0, &q, one_sided, axis, high);
                if w > G::new(0.0) {
                    positive += 1u32;
                }
                basis_at::<G>(&q, tables, &mut pw, &mut phi, dim, degree, cap);
                #[unroll]
                for r in 0..cap {
                    let wr = w * phi[r];
                    #[unroll]
                    for cc in 0..r + 1 {
                        mat[r * cap + cc] += wr * phi[cc];
                    }
                }
            }
        }
        if one_sided && positive < cap as u32 {
            ok = false;
        }
        // Jacobi scaling, regularisation, Cholesky (as on the CPU).
        #[unroll]
        for r in 0..cap {
            scale[r] =
                G::new(1.0) / G::sqrt(G::max(mat[r * cap + r], tables.consts[c::MIN_POSITIVE]));
        }
        #[unroll]
        for r in 0..cap {
            #[unroll]
            for cc in 0..r + 1 {
                mat[r * cap + cc] *= scale[r] * scale[cc];
            }
            mat[r * cap + r] += tables.consts[c::REGULARISATION];
        }
        #[unroll]
        for jj in 0..cap {
            let mut d = mat[jj * cap + jj];
            #[unroll]
            for k in 0..jj {
                d -= mat[jj * cap + k] * mat[jj * cap + k];
            }
            // Not positive, or NaN (a kernel has no `partial_cmp`: the negated comparison is the
            // NaN test).
            #[allow(clippy::neg_cmp_op_on_partial_ord)]
            if !(d > G::new(0.0)) {
                ok = false;
            }
            let root = G::sqrt(d);
            mat[jj * cap + jj] = root;
            #[unroll]
            for ii in jj + 1..cap {
                let mut s = mat[ii * cap + jj];
                #[unroll]
                for k in 0..jj {
                    s -= mat[ii * cap + k] * mat[jj * cap + k];
                }
                mat[ii * cap + jj] = s / root;
            }
        }
        if !ok && count >= cap as u32 && !one_sided && mine {
            failed[1].fetch_min(i as u32);
        }
        let mut exists = 0u32;
        if ok {
            exists = 1u32;
        }
        valid[i] = exists;
        // Past its own count a unit writes the slot-major padding (zeros, as on the host) and
        // nothing in row-major lists.
        for k in 0..list.max_count {
            let s = base + k as usize * stride;
            if k >= count {
                if list.slot_major == 1 {
                    #[unroll]
                    for r in 0..cap {
                        coef[r * slots_u + s] = F::new(0.0);
                    }
                }
            } else if ok {
                let j = list.indices[s] as usize;
                let w0 = offset_and_weight::<F, G>(x, y, z, i, j, tables, weight_kind, &mut q, dim);
                let w = side_weight::<G>(w0, &q, one_sided, axis, high);
                basis_at::<G>(&q, tables, &mut pw, &mut phi, dim, degree, cap);
                #[unroll]
                for r in 0..cap {
                    phi[r] *= scale[r];
                }
                // L L^T p = phi.
                #[unroll]
                for r in 0..cap {
                    let mut t = phi[r];
                    #[unroll]
                    for k2 in 0..r {
                        t -= mat[r * cap + k2] * phi[k2];
                    }
                    phi[r] = t / mat[r * cap + r];
                }
                #[unroll]
                for rr in 0..cap {
                    let r = cap - 1 - rr;
                    let mut t = phi[r];
                    #[unroll]
                    for k2 in r + 1..cap {
                        t -= mat[k2 * cap + r] * phi[k2];
                    }
                    phi[r] = t / mat[r * cap + r];
                }
                #[unroll]
                for r in 0..cap {
                    coef[r * slots_u + s] = F::cast_from(w * scale[r] * phi[r] * tables.unscale[r]);
                }
            } else {
                #[unroll]
                for r in 0..cap {
                    coef[r * slots_u + s] = F::new(0.0);
                }
            }
        }
    }
}

/// The MLS derivative coefficients of a device cloud: one per-slot array per basis function,
/// stored one after the other in a single device buffer (function `k`'s coefficient of slot `s`
/// at `k * slots + s`, `slots` the list's slot count), the layout of the host's separate arrays.
pub struct DeviceMls<F> {
    degree: usize,
    weight: Weight,
    size: usize,
    spacing: f64,
    coefficients: DeviceArray<F>,
    /// 0: a fit over every neighbour; `1 + 2 axis + high`: a one-sided fit (see
    /// [`DeviceMls::one_sided`]).
    stencil: u32,
    /// Per particle, 1 where the fit exists (one-sided fits may not).
    valid: DeviceArray<u32>,
    failed: DeviceArray<u32>,
}

impl<F: GpuFloat> DeviceMls<F> {
    /// Fits of polynomial `degree` in `D` dimensions with `weight`, on `gpu`. An
    /// inverse-distance weight needs an integer power on the device.
    pub fn new<const D: usize>(gpu: &Gpu, degree: usize, weight: Weight) -> Result<Self, GpuError> {
        let basis = Basis::<D>::new(degree)?;
        if let Weight::InverseDistance { power } = weight
            && (power.fract() != 0.0 || !(0.0..=127.0).contains(&power))
        {
            return Err(GpuError::Unsupported(format!(
                "inverse-distance MLS weight with power {power} (the device evaluates integer \
                 powers 0 to 127)"
            )));
        }
        gpu.check_precision(F::PRECISION)?;
        Ok(Self {
            degree,
            weight,
            size: basis.len(),
            spacing: 1.0,
            coefficients: gpu
                .output("mls_coefficients", 0)
                .with_scaling(Scaling::PerSlot(basis.len())),
            stencil: 0,
            valid: gpu
                .output("mls_valid", 0)
                .with_scaling(Scaling::PerParticle(1)),
            failed: gpu
                .upload::<u32>("mls_failed", &[0, 0])
                .with_scaling(Scaling::Fixed),
        })
    }

    /// A one-sided fit, as the CPU's [`mote_cloud::mls::Mls::one_sided`]: over the neighbours
    /// on the `high` (or low) side of `axis` only (`d[axis] >= 0`, resp. `<= 0`). Where a side
    /// holds too few neighbours with a positive weight, or the fit is singular, the particle's
    /// coefficients are zero and [`DeviceMls::valid`] says 0, instead of an error.
    pub fn one_sided<const D: usize>(
        gpu: &Gpu,
        degree: usize,
        weight: Weight,
        axis: usize,
        high: bool,
    ) -> Result<Self, GpuError> {
        if axis >= D {
            return Err(CloudError::invalid("stencil axis", axis, format!("below {D}")).into());
        }
        let mut mls = Self::new::<D>(gpu, degree, weight)?;
        mls.stencil = 1 + 2 * axis as u32 + high as u32;
        Ok(mls)
    }

    /// Per particle, 1 where the fit exists, else 0 (set by [`DeviceMls::compute`]; always 1
    /// for a fit over every neighbour that succeeded).
    pub fn valid(&self) -> &DeviceArray<u32> {
        &self.valid
    }

    /// The weight function.
    pub fn weight(&self) -> Weight {
        self.weight
    }

    /// The polynomial degree of the fits.
    pub fn degree(&self) -> usize {
        self.degree
    }

    /// Number of basis functions.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The nominal spacing the basis is scaled by (set by [`DeviceMls::compute`]).
    pub fn spacing(&self) -> f64 {
        self.spacing
    }

    /// All coefficients, function after function (see the type's docs).
    pub fn coefficients(&self) -> &DeviceArray<F> {
        &self.coefficients
    }

    /// Computes the coefficients for `cloud` and its neighbour `list` on `gpu`. Fails as the
    /// CPU fit does: an interior particle with fewer neighbours than basis functions, or a
    /// singular moment matrix (naming the particle's index); boundary particles with too few
    /// neighbours get zero coefficients.
    pub fn compute<const D: usize>(
        &mut self,
        gpu: &Gpu,
        cloud: &DeviceCloud<F, D>,
        list: &DeviceNeighbours,
    ) -> Result<(), GpuError> {
        let n = cloud.len();
        for p in cloud.positions() {
            gpu.check(p, n)?;
        }
        gpu.check(cloud.tags(), n)?;
        let args = list.checked(gpu, n)?;
        let slots = args.slots();
        let m = self.size;
        self.coefficients.resize(m * slots)?;
        self.valid.resize(n)?;
        let basis = Basis::<D>::new(self.degree)?;
        let spacing = cloud.spacing();
        let h = spacing.iter().sum::<f64>() / D as f64;
        self.spacing = h;
        // A split cloud's ranks check their own particles and agree on the first failure in
        // the one-process order (a rank without particles takes part).
        let halo = list.halo();
        if n == 0 {
            return match halo {
                Some(h) => fit_failure(h, None, m),
                None => Ok(()),
            };
        }
        let own = halo.map_or(0..n, |h| h.halo().own());
        let own = gpu.upload("mls_own", &[own.start as u32, own.end as u32]);
        let (width, kind, power) = match self.weight {
            Weight::Exponential { shape } => (shape * list.radius(), 0u32, 0.0),
            Weight::InverseDistance { power } => (1.0, 1u32, power),
        };
        let mut consts = [0.0f64; c::LEN];
        consts[c::INV_H] = 1.0 / h;
        consts[c::H] = h;
        consts[c::CUTOFF] = list.radius();
        consts[c::WIDTH] = width;
        consts[c::LN2] = std::f64::consts::LN_2;
        consts[c::INV_LN2] = std::f64::consts::LOG2_E;
        consts[c::POWER] = power;
        consts[c::REGULARISATION] = 1e-15;
        consts[c::TINY] = 1e-12;
        consts[c::MIN_POSITIVE] = f64::MIN_POSITIVE;
        for b in 0..7 {
            consts[c::POW2 + b] = 0.5f64.powi(1 << b);
        }
        let lengths = cloud.domain().lengths();
        let mut geo = [0.0f64; 6];
        for a in 0..D {
            geo[a] = lengths[a];
            geo[3 + a] = 0.5 * lengths[a];
        }
        let periodic = cloud.domain().periodic();
        let mut per = [0u32; 3];
        for a in 0..D {
            per[a] = periodic[a] as u32;
        }
        let unscale = basis.unscale(h);
        gpu.fill_u32(&self.failed, u32::MAX);
        let fit_f64 = gpu.supports(Precision::F64);
        let tables = |min_positive: f64| Tables {
            geo: geo.to_vec(),
            periodic: per,
            exponents: basis.powers().to_vec(),
            inverse_factorial: basis.inverse_factorials().to_vec(),
            unscale: unscale.clone(),
            consts: {
                let mut c = consts;
                c[c::MIN_POSITIVE] = min_positive;
                c
            },
        };
        if fit_f64 {
            self.launch::<f64, D>(gpu, cloud, args, kind, &own, tables(f64::MIN_POSITIVE));
        } else {
            // The smallest normal number of the fit's own precision guards the scaling.
            let min = f32::MIN_POSITIVE as f64;
            self.launch::<f32, D>(gpu, cloud, args, kind, &own, tables(min));
        }
        gpu.sync()?;
        let failed = gpu.download(&self.failed)?;
        // [kind (0: too few neighbours, 1: singular), particle, neighbour count]: the first
        // kind first, as one process reports them.
        let mine = if failed[0] != u32::MAX {
            let count = gpu.download(list.counts())?[failed[0] as usize];
            Some([0, failed[0] as u64, u64::from(count)])
        } else if failed[1] != u32::MAX {
            Some([1, failed[1] as u64, 0])
        } else {
            None
        };
        match halo {
            Some(h) => fit_failure(h, mine, m),
            None => fit_error(mine, m),
        }
    }

    /// The fit kernel with its tables in the fit's precision `G`.
    fn launch<G: GpuFloat, const D: usize>(
        &self,
        gpu: &Gpu,
        cloud: &DeviceCloud<F, D>,
        list: ListArgs<'_>,
        kind: u32,
        own: &DeviceArray<u32>,
        tables: Tables,
    ) {
        let fixed = |a: DeviceArray<G>| a.with_scaling(Scaling::Fixed);
        let up = |name, v: &[f64]| {
            fixed(gpu.upload(name, &v.iter().map(|&x| G::cast(x)).collect::<Vec<G>>()))
        };
        let geo = up("mls_geometry", &tables.geo);
        let inverse_factorial = up("mls_inverse_factorial", &tables.inverse_factorial);
        let unscale = up("mls_unscale", &tables.unscale);
        let consts = up("mls_constants", &tables.consts);
        let periodic = gpu.upload("mls_periodic", &tables.periodic);
        let exponents = gpu.upload("mls_exponents", &tables.exponents);
        let pos = cloud.positions();
        // Every particle reads its own slots and its neighbours' positions, and writes only its
        // own slots of each function's block (k * slots + s); the private arrays hold
        // `cap = m` numbers.
        launch!(
            gpu,
            list.n(),
            mls_kernel::<F, G>(
                pos[0].arg(),
                pos[1.min(D - 1)].arg(),
                pos[2.min(D - 1)].arg(),
                cloud.tags().arg(),
                list.arg(),
                FitTablesLaunch::new(
                    geo.arg(),
                    periodic.arg(),
                    exponents.arg(),
                    inverse_factorial.arg(),
                    unscale.arg(),
                    consts.arg()
                ),
                kind,
                self.stencil,
                self.coefficients.arg(),
                self.valid.arg(),
                own.arg(),
                self.failed.arg(),
                D,
                self.degree,
                self.size
            )
        );
    }
}

/// The error of a fit's first failure `found` (`[kind, particle, neighbour count]`, see
/// [`DeviceMls::compute`]) with a basis of `m` functions.
fn fit_error(found: Option<[u64; 3]>, m: usize) -> Result<(), GpuError> {
    match found {
        Some([0, i, count]) => Err(CloudError::invalid(
            "neighbour count",
            format!("{count} at particle index {i}"),
            format!("at least the basis size {m} (raise the search radius)"),
        )
        .into()),
        Some([_, i, _]) => Err(CloudError::invalid(
            "MLS moment matrix",
            format!("singular at particle index {i}"),
            "a neighbourhood that spans every direction (raise the search radius or lower the \
             degree)",
        )
        .into()),
        None => Ok(()),
    }
}

/// [`fit_error`] of the first failure over the ranks of a split cloud in one process's order
/// (this rank's `mine` in local indices; the message names the one-process index): the same
/// error on every rank. Collective.
fn fit_failure(
    halo: &crate::halo::DeviceHalo,
    mine: Option<[u64; 3]>,
    m: usize,
) -> Result<(), GpuError> {
    let h = halo.halo();
    let comm = h.comm();
    // [found, kind, one-process index, count] from every rank; one process reports the first
    // particle with too few neighbours, else the first singular one: the smallest (kind,
    // index).
    let mut record = [0u64; 4];
    if let Some([kind, i, count]) = mine {
        record = [1, kind, h.global()[i as usize] as u64, count];
    }
    let mut all = vec![0u64; 4 * comm.size()];
    mote_core::comm::all_gather(comm, &record, &vec![4; comm.size()], &mut all);
    let first = all
        .chunks_exact(4)
        .filter(|r| r[0] == 1)
        .min_by_key(|r| (r[1], r[2]))
        .map(|r| [r[1], r[2], r[3]]);
    fit_error(first, m)
}

/// The fit's tables on the host, in f64 (the kernel's precision when uploaded).
struct Tables {
    /// The domain's lengths, then the half lengths.
    geo: Vec<f64>,
    periodic: [u32; 3],
    /// The basis exponents, `D` per function.
    exponents: Vec<u32>,
    inverse_factorial: Vec<f64>,
    unscale: Vec<f64>,
    consts: [f64; c::LEN],
}

/// The fit's tables as the kernel reads them, in its precision `G`.
#[derive(CubeLaunch, CubeType)]
struct FitTables<G: Float> {
    geo: Array<G>,
    periodic: Array<u32>,
    exponents: Array<u32>,
    inverse_factorial: Array<G>,
    unscale: Array<G>,
    consts: Array<G>,
}

impl<F: GpuFloat> Budgeted for DeviceMls<F> {
    fn buffers(&self) -> Vec<&dyn BudgetedBuffer> {
        vec![&self.coefficients, &self.valid, &self.failed]
    }
    fn buffers_mut(&mut self) -> Vec<&mut dyn BudgetedBuffer> {
        vec![&mut self.coefficients, &mut self.valid, &mut self.failed]
    }
}
