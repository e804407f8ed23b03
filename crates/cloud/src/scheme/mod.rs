//! MUSCL reconstruction and the flux divergence on a point cloud.
//!
//! Every particle pair `(i, j)` exchanges a Riemann flux at the midpoint of the pair. The states
//! on either side come from Taylor expansions of each particle's MLS derivatives (MUSCL of
//! order `k` uses derivatives up to degree `k - 1`; the interface order is the smaller of the two
//! particles' orders, so one code path serves mixed orders). Neighbour states are read straight
//! from the state arrays through the slot indices; nothing is copied per slot.
//!
//! Two formulations of the divergence (see `docs/decisions/0006-meshless-flux-divergence.md`):
//! - [`Formulation::MlsDivergence`] (a): `du_i/dt = -2 sum_j (F*(u_L, u_R; b_ij) - F(u_i) . b_ij)`,
//!   with `b_ij` the MLS gradient coefficients of slot `j` of `i`: the MLS divergence of the
//!   pairwise midpoint fluxes, as the reference code does. Accurate to the fit's degree; not
//!   conservative, since `b_ij != -b_ji` on irregular clouds.
//! - [`Formulation::Conservative`] (b): `V_i du_i/dt = -sum_j F*(u_L, u_R; p_ij)` with the
//!   antisymmetric face weights `p_ij = V_i b_ij - V_j b_ji = -p_ji`: what `i` loses `j` gains,
//!   so `sum_i V_i u_i` is conserved to round-off. On irregular clouds `sum_j p_ij != 0`, which
//!   costs accuracy (measured and reported in the tests).

mod flux_pass;
mod limiter;
mod weno;

/// Runs `pass(start, own)` on this rank's contiguous range of whole blocks of the one-process
/// order ([`crate::halo::own_ranges`]) of `out` (records of `width` values per particle; `start`
/// is the range's first particle, `own` its records), then gathers every rank's range ([`mote_core::comm`]), so that
/// every rank holds every record. For passes whose records each depend on their own
/// particle only (its neighbours' inputs included): the records are one process's, bit for bit.
///
/// On one rank's part of a split cloud (`halo`, from the neighbour lists), `pass` runs on the
/// own particles and the halo's records are refreshed from their owners instead
/// ([`crate::halo`]).
pub(crate) fn on_own_blocks<T: bytemuck::Pod>(
    halo: Option<&crate::halo::Halo>,
    out: &mut [T],
    width: usize,
    pass: impl FnOnce(usize, &mut [T]),
) {
    if let Some(halo) = halo {
        let own = halo.own();
        pass(own.start, &mut out[own.start * width..own.end * width]);
        halo.exchange(out, width);
        return;
    }
    let world = mote_core::comm::world();
    let n = out.len().checked_div(width).unwrap_or(0);
    let ranges = crate::halo::own_ranges(n, world.size());
    let mine = ranges[world.rank()].clone();
    pass(mine.start, &mut out[mine.start * width..mine.end * width]);
    if world.size() > 1 && width > 0 {
        let wide: Vec<std::ops::Range<usize>> = ranges
            .iter()
            .map(|r| r.start * width..r.end * width)
            .collect();
        mote_core::comm::gather_parts(world.as_ref(), out, &wide, &mut Vec::new());
    }
}

/// Whether a scheme with `formulation` (and the WENO reconstruction, `weno`) reads what its
/// neighbours' own lists give ([`Muscl::reads_neighbour_lists`]): for a scheme on any backend.
pub fn reads_neighbour_lists(formulation: Formulation, weno: bool) -> bool {
    formulation == Formulation::Conservative || weno
}

pub use flux_pass::Velocities;
pub use limiter::{Limiter, LimiterKind, LimiterMode};

use mote_core::{
    Budgeted, BudgetedBuffer, Buffer, CpuBackend, Real, Scaling, SimdLevel, SplitOutputs,
};

use crate::cloud::{Cloud, Geometry, MAX_VARIABLES};
use crate::equations::Equation;
use crate::error::CloudError;
use crate::flux::FluxKind;
use crate::mls::{Basis, Mls, Weight};
use crate::search::{NeighbourList, SlotLayout};

/// Highest MUSCL order.
pub const MAX_ORDER: usize = 5;

/// The WENO-type reconstruction's linear weight of the central fit that configured runs and
/// benchmarks use (see [`Muscl::with_weno`]): the central fit dominates smooth regions.
pub const WENO_CENTRAL_WEIGHT: f64 = 1000.0;

/// How the flux divergence is formed from the pairwise fluxes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Formulation {
    /// (a) MLS divergence of the midpoint fluxes (accurate, not conservative).
    #[default]
    MlsDivergence,
    /// (b) antisymmetric face weights (conservative to round-off).
    Conservative,
}

/// MUSCL of a given order, for equation `E`, with a numerical flux (Rusanov by default) and an
/// optional slope limiter.
pub struct Muscl<R: Real, const D: usize, E> {
    equation: E,
    order: usize,
    formulation: Formulation,
    flux: FluxKind,
    limiter: Limiter,
    /// WENO-type reconstruction: the one-sided fits, the central fit's linear weight and the
    /// working arrays.
    weno: Option<weno::Weno<R, D>>,
    /// The cloud's nominal spacing (the smallest axis), set by `prepare`.
    spacing: f64,
    mls: Mls<R, D>,
    reconstruction: Basis<D>,
    /// `derivatives[i * m * mr + v * mr + a]`: derivative `a` of variable `v` at particle `i`,
    /// each particle's record contiguous, since a neighbour reads all of it at once (one
    /// gather per neighbour instead of one per derivative).
    derivatives: Buffer<R>,
    /// For each slot of `i` pointing at `j`, the slot of `j` pointing back at `i`.
    reverse: Buffer<u64>,
    /// `(-1)^|a|` for each reconstruction term: its sign at the neighbour's side.
    parity: Vec<R>,
    /// The SIMD level of the passes (every level gives the same bits).
    simd: SimdLevel,
    /// Wall seconds spent in the derivative and flux passes since the last reset.
    seconds: PassSeconds,
}

/// Wall-clock seconds per pass, accumulated (for benchmarks).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PassSeconds {
    /// The MLS derivative pass.
    pub derivatives: f64,
    /// The reconstruction and flux pass (MOOD's recomputations included).
    pub fluxes: f64,
    /// The limiter pass.
    pub limiter: f64,
}

impl<R: Real, const D: usize, E: Equation<R, D>> Muscl<R, D, E> {
    /// MUSCL of `order` (1: first-order upwind, up to [`MAX_ORDER`]); the MLS fits are of degree
    /// `max(order, 1)`, enough for an `order`-accurate divergence and reconstruction.
    pub fn new(
        equation: E,
        order: usize,
        formulation: Formulation,
        weight: Weight,
    ) -> Result<Self, CloudError> {
        if !(1..=MAX_ORDER).contains(&order) {
            return Err(CloudError::invalid(
                "MUSCL order",
                order,
                format!("1 to {MAX_ORDER}"),
            ));
        }
        let m = equation.variables();
        let mls = Mls::new(order.max(1), weight)?;
        let reconstruction = Basis::<D>::new((order - 1).max(1))?;
        let parity = reconstruction.parities().into_iter().map(R::cast).collect();
        let per_var = if order > 1 { reconstruction.len() } else { 0 };
        let derivatives = Buffer::new(
            "muscl_derivatives",
            Scaling::PerParticle((m * per_var).max(1)),
        );
        Ok(Self {
            equation,
            order,
            formulation,
            flux: FluxKind::Rusanov,
            limiter: Limiter::none(),
            weno: None,
            spacing: 0.0,
            mls,
            reconstruction,
            derivatives,
            reverse: Buffer::new("reverse_slot", Scaling::PerSlot(1)),
            parity,
            simd: SimdLevel::for_gathers(),
            seconds: PassSeconds::default(),
        })
    }

    /// Uses the numerical flux `kind`; an error if the equation does not provide it (HLLC is
    /// Euler's, upwind needs one variable).
    pub fn with_flux(mut self, kind: FluxKind) -> Result<Self, CloudError> {
        if !self.equation.supports_flux(kind) {
            return Err(CloudError::invalid(
                "flux",
                kind,
                format!(
                    "one that {} with {} variables provides (rusanov and central always, \
                     upwind for one variable, hllc for euler)",
                    self.equation.name(),
                    self.equation.variables()
                ),
            ));
        }
        self.flux = kind;
        Ok(self)
    }

    /// Limits the reconstruction with `limiter` (see [`Limiter`]).
    pub fn with_limiter(mut self, limiter: Limiter) -> Result<Self, CloudError> {
        limiter.validate::<D>()?;
        self.limiter = limiter;
        Ok(self)
    }

    /// Whether the reconstruction is WENO-type ([`with_weno`](Self::with_weno)).
    pub fn has_weno(&self) -> bool {
        self.weno.is_some()
    }

    /// A WENO-type MLS reconstruction (see the `weno` module): the derivatives are a
    /// smoothness-weighted mix of the central fit (linear weight `central_weight`, e.g. 1000)
    /// and `2 D` one-sided fits of the reconstruction degree. Needs order >= 2.
    pub fn with_weno(mut self, central_weight: f64) -> Result<Self, CloudError> {
        if self.order < 2 {
            return Err(CloudError::invalid(
                "WENO reconstruction",
                format!("order {}", self.order),
                "order 2 or more (order 1 has no derivatives to weight)",
            ));
        }
        if !(central_weight.is_finite() && central_weight >= 1.0) {
            return Err(CloudError::invalid(
                "WENO central weight",
                central_weight,
                "a finite number >= 1",
            ));
        }
        let degree = self.reconstruction.degree();
        let weight = self.mls.weight();
        let stencils = (0..2 * D)
            .map(|k| Mls::one_sided(degree, weight, k / 2, k % 2 == 1))
            .collect::<Result<Vec<_>, _>>()?;
        let (m, mr) = (self.equation.variables(), self.reconstruction_terms());
        self.weno = Some(weno::Weno::new(stencils, central_weight, m, mr));
        Ok(self)
    }

    /// Whether the WENO-type reconstruction is on.
    pub fn is_weno(&self) -> bool {
        self.weno.is_some()
    }

    /// The numerical flux.
    pub fn flux(&self) -> FluxKind {
        self.flux
    }

    /// The limiter.
    pub fn limiter(&self) -> Limiter {
        self.limiter
    }

    /// Seconds spent per pass since the last call, and resets them.
    pub fn take_seconds(&mut self) -> PassSeconds {
        std::mem::take(&mut self.seconds)
    }

    /// Number of derivative arrays per variable (the reconstruction basis; 0 at order 1).
    pub fn reconstruction_terms(&self) -> usize {
        if self.order > 1 {
            self.reconstruction.len()
        } else {
            0
        }
    }

    /// Runs the passes at SIMD `level` instead of the default
    /// ([`SimdLevel::for_gathers`]: AVX2 where available, the faster one for these
    /// gather-bound passes). Results are bitwise the same at every level; this exists to test
    /// that and to benchmark.
    pub fn set_simd_level(&mut self, level: SimdLevel) -> Result<(), CloudError> {
        if !SimdLevel::gather_levels().contains(&level) {
            return Err(CloudError::invalid(
                "SIMD level",
                level,
                format!(
                    "one this CPU supports that the meshless passes are compiled for ({:?}; \
                     not avx512, slower for these gather-bound passes)",
                    SimdLevel::gather_levels()
                ),
            ));
        }
        self.simd = level;
        Ok(())
    }

    /// The SIMD level of the passes.
    pub fn simd_level(&self) -> SimdLevel {
        self.simd
    }

    /// Whether a particle's records read what its neighbours' own lists give (not only their
    /// exchanged records): the conservative formulation's reverse coefficients and the WENO
    /// reconstruction's stencil validity. A rank of a split cloud then holds its neighbours'
    /// neighbours too ([`crate::halo`]).
    pub fn reads_neighbour_lists(&self) -> bool {
        reads_neighbour_lists(self.formulation, self.weno.is_some())
    }

    /// The formulation.
    pub fn formulation(&self) -> Formulation {
        self.formulation
    }

    /// The order.
    pub fn order(&self) -> usize {
        self.order
    }

    /// The equation.
    pub fn equation(&self) -> &E {
        &self.equation
    }

    /// The MLS operator.
    pub fn mls(&self) -> &Mls<R, D> {
        &self.mls
    }

    /// Computes the MLS coefficients (and, for the conservative form, the reverse slots) for a
    /// cloud and its lists: once per neighbour search.
    pub fn prepare<L: SlotLayout>(
        &mut self,
        cloud: &Cloud<R, D>,
        list: &NeighbourList<L>,
        backend: CpuBackend,
    ) -> Result<(), CloudError> {
        self.mls.compute(cloud, list, backend)?;
        let (m, mr) = (self.equation.variables(), self.reconstruction_terms());
        if let Some(weno) = &mut self.weno {
            let h = self.mls.spacing();
            weno.prepare(cloud, list, backend, h, &self.reconstruction, m, mr)?;
        }
        self.spacing = cloud.spacing().into_iter().fold(f64::INFINITY, f64::min);
        let n = cloud.len();
        let width = self.equation.variables() * self.reconstruction_terms();
        self.derivatives.resize(n * width, R::zero())?;
        if self.formulation == Formulation::Conservative {
            let slots = list.layout().slot_count();
            self.reverse.resize(slots, 0)?;
            let idx = list.indices();
            let writer = list.layout().writer(self.reverse.as_mut_slice());
            backend.for_each_block(writer, 256, |first, mut out| {
                use mote_core::SlotWriter;
                for k in 0..SplitOutputs::len(&out) {
                    let i = first + k;
                    for (sk, s) in list.slots(i).enumerate() {
                        let j = idx[s] as usize;
                        let back = list
                            .slots(j)
                            .find(|&t| idx[t] as usize == i)
                            .expect("neighbour lists are symmetric");
                        out.set_slot(k, sk, back as u64);
                    }
                }
            });
        }
        Ok(())
    }

    /// The time derivative `du/dt` of the state `u` (one slice per variable) into `du`, with
    /// the cloud's reconstruction orders.
    pub fn rhs<L: SlotLayout>(
        &mut self,
        geometry: &Geometry<'_, R, D>,
        list: &NeighbourList<L>,
        u: &[&[R]],
        du: Vec<&mut [R]>,
        backend: CpuBackend,
    ) {
        self.derivatives_pass(geometry, list, u, backend);
        self.flux_pass(geometry, list, u, du, backend, geometry.orders, None);
    }

    /// Pass 1 (and the limiter): the derivatives of `u` up to the reconstruction degree, kept
    /// for [`flux_pass`](Self::flux_pass).
    pub fn derivatives_pass<L: SlotLayout>(
        &mut self,
        geometry: &Geometry<'_, R, D>,
        list: &NeighbourList<L>,
        u: &[&[R]],
        backend: CpuBackend,
    ) {
        let m = self.equation.variables();
        assert_eq!(u.len(), m, "one state slice per variable");
        let mr = self.reconstruction_terms();
        let idx = list.indices();
        // Pass 1: derivatives of every variable up to the reconstruction degree. Each slot's
        // difference is loaded once and feeds every basis function.
        let clock = std::time::Instant::now();
        if mr > 0 {
            let coeffs: Vec<&[R]> = (0..mr).map(|a| self.mls.coefficients(a)).collect();
            let pass = flux_pass::DerivativePass {
                u,
                idx,
                coeffs: &coeffs,
            };
            pass.run(list, self.derivatives.as_mut_slice(), backend, self.simd);
            if let Some(weno) = &mut self.weno {
                weno.apply(u, list, self.derivatives.as_mut_slice(), backend, self.simd);
            }
        }
        self.seconds.derivatives += clock.elapsed().as_secs_f64();
        if mr > 0 && self.limiter.is_active() {
            let clock = std::time::Instant::now();
            limiter::LimiterPass {
                limiter: self.limiter,
                geometry,
                u,
                idx,
                basis: &self.reconstruction,
                mr,
                spacing: self.spacing,
                simd: self.simd,
            }
            .run(list, self.derivatives.as_mut_slice(), backend);
            self.seconds.limiter += clock.elapsed().as_secs_f64();
        }
    }

    /// Pass 2: reconstruction and fluxes into `du`, from the derivatives of the last
    /// [`derivatives_pass`](Self::derivatives_pass) on the same `u`, with per-particle
    /// reconstruction `orders` (capped at the scheme's order), for the particles where `active`
    /// is non-zero (all when `None`; the others' `du` entries are left as they are).
    #[allow(clippy::too_many_arguments)]
    pub fn flux_pass<L: SlotLayout>(
        &mut self,
        geometry: &Geometry<'_, R, D>,
        list: &NeighbourList<L>,
        u: &[&[R]],
        du: Vec<&mut [R]>,
        backend: CpuBackend,
        orders: &[u8],
        active: Option<&[u8]>,
    ) {
        self.moving_flux_pass(geometry, list, u, du, backend, orders, active, None);
    }

    /// The MLS gradients of the particle velocities `w` (`D` arrays) into `grad`, one record
    /// per particle (`dw_a/dx_b` at `i * D * D + a * D + b`), for
    /// [`moving_flux_pass`](Self::moving_flux_pass): the derivative pass over the velocity
    /// components and the gradient terms, so the same sums as the state's derivatives (and
    /// the device's).
    pub fn velocity_gradients<L: SlotLayout>(
        &self,
        list: &NeighbourList<L>,
        w: [&[R]; D],
        grad: &mut [R],
        backend: CpuBackend,
    ) {
        let coeffs: [&[R]; D] = std::array::from_fn(|b| self.mls.coefficients(b));
        let pass = flux_pass::DerivativePass {
            u: &w,
            idx: list.indices(),
            coeffs: &coeffs,
        };
        pass.run(list, grad, backend, self.simd);
    }

    /// [`flux_pass`](Self::flux_pass) on a moving cloud whose particles move with `velocity`
    /// (`None`: at rest): the pairs exchange ALE fluxes `F - u w`, and `du` is the
    /// rate of change following each particle. Only the MLS-divergence formulation supports
    /// motion (the conservative one would need evolving volumes).
    ///
    /// # Panics
    /// With a velocity and the conservative formulation.
    #[allow(clippy::too_many_arguments)]
    pub fn moving_flux_pass<L: SlotLayout>(
        &mut self,
        geometry: &Geometry<'_, R, D>,
        list: &NeighbourList<L>,
        u: &[&[R]],
        du: Vec<&mut [R]>,
        backend: CpuBackend,
        orders: &[u8],
        active: Option<&[u8]>,
        velocity: Option<Velocities<'_, R, D>>,
    ) {
        assert!(
            velocity.is_none() || self.formulation == Formulation::MlsDivergence,
            "moving clouds need the MLS-divergence formulation"
        );
        let m = self.equation.variables();
        assert_eq!(u.len(), m, "one state slice per variable");
        let mr = self.reconstruction_terms();
        let idx = list.indices();
        // Pass 2: fluxes, specialised for the common variable counts so that per-pair state
        // vectors are fixed-size arrays in registers.
        let clock = std::time::Instant::now();
        let ctx = flux_pass::FluxPass {
            eq: &self.equation,
            geometry,
            u,
            idx,
            derivs: self.derivatives.as_slice(),
            grad: std::array::from_fn(|d| self.mls.coefficients(d)),
            reverse: self.reverse.as_slice(),
            formulation: self.formulation,
            basis: &self.reconstruction,
            parity: &self.parity,
            order: self.order,
            mr,
            flux: self.flux,
            orders,
            full_order: orders.iter().all(|&o| usize::from(o) >= self.order),
            active,
            velocity,
        };
        assert_eq!(
            E::FIXED_VARIABLES.unwrap_or(m),
            m,
            "the equation's fixed variable count differs from its `variables()`"
        );
        let level = self.simd;
        // A count fixed by the equation's type is a constant operand here, so only its arm is
        // compiled (rustc does not instantiate functions under statically dead match arms).
        match const {
            match E::FIXED_VARIABLES {
                Some(k) => k,
                None => 0,
            }
        } {
            1 => ctx.run::<L, 1>(list, du, backend, level),
            2 => ctx.run::<L, 2>(list, du, backend, level),
            3 => ctx.run::<L, 3>(list, du, backend, level),
            4 => ctx.run::<L, 4>(list, du, backend, level),
            5 => ctx.run::<L, 5>(list, du, backend, level),
            _ => match m {
                1 => ctx.run::<L, 1>(list, du, backend, level),
                2 => ctx.run::<L, 2>(list, du, backend, level),
                3 => ctx.run::<L, 3>(list, du, backend, level),
                4 => ctx.run::<L, 4>(list, du, backend, level),
                5 => ctx.run::<L, 5>(list, du, backend, level),
                _ => ctx.run::<L, MAX_VARIABLES>(list, du, backend, level),
            },
        }
        self.seconds.fluxes += clock.elapsed().as_secs_f64();
    }

    /// The largest stable time step for `cfl`: `cfl / max_i r_i`, where `r_i = 2 sum_j
    /// lambda_max(u_i; b_ij)` sums the largest wave speed along each slot's MLS gradient
    /// coefficients: the rate at which particle `i` can change (geometric CFL condition).
    ///
    /// With `interior_only`, boundary particles (tag other than [`crate::cloud::INTERIOR`]) do
    /// not count: where boundary conditions impose their states, their own rates do not limit
    /// the step, and their one-sided fits (outer layers) give rates up to 10^4 times the
    /// interior's at orders >= 3. Their influence on interior particles is in the interior
    /// rates (their slots).
    pub fn stable_dt<L: SlotLayout>(
        &self,
        cloud: &Cloud<R, D>,
        list: &NeighbourList<L>,
        u: &[&[R]],
        cfl: f64,
        backend: CpuBackend,
        interior_only: bool,
    ) -> f64 {
        let m = self.equation.variables();
        let grad: [&[R]; D] = std::array::from_fn(|d| self.mls.coefficients(d));
        let tags = cloud.tags();
        // On several ranks each takes its range (its own particles of a split cloud) and the
        // largest rate is reduced: a maximum is exact in any order, so the step is one
        // process's, bit for bit.
        let world = mote_core::comm::world();
        let mine = match list.halo() {
            Some(halo) => halo.own(),
            None => crate::halo::own_ranges(cloud.len(), world.size())[world.rank()].clone(),
        };
        let rate = backend
            .map_reduce(
                mine.len(),
                1024,
                |r| {
                    let mut worst = 0.0f64;
                    for i in r.start + mine.start..r.end + mine.start {
                        if interior_only && tags[i] != crate::cloud::INTERIOR {
                            continue;
                        }
                        let mut ui = [R::zero(); MAX_VARIABLES];
                        for v in 0..m {
                            ui[v] = u[v][i];
                        }
                        let mut sum = 0.0;
                        for s in list.slots(i) {
                            let b: [R; D] = std::array::from_fn(|d| grad[d][s]);
                            sum += self.equation.max_wave_speed(&ui[..m], b).as_f64();
                        }
                        // (a): the factor 2 of the midpoint form; (b): |p_ij| / V_i is 2 |b_ij| on a
                        // regular cloud.
                        worst = worst.max(2.0 * sum);
                    }
                    worst
                },
                f64::max,
            )
            .unwrap_or(0.0);
        // Rates are >= 0 and never NaN (`max` keeps the other operand): their bit patterns
        // order as the numbers do.
        let rate = f64::from_bits(match list.halo() {
            Some(halo) => halo.max_of(rate.to_bits()),
            None => mote_core::comm::max_of(world.as_ref(), rate.to_bits()),
        });
        if rate > 0.0 {
            cfl / rate
        } else {
            f64::INFINITY
        }
    }
}

impl<R: Real, const D: usize, E> Budgeted for Muscl<R, D, E> {
    fn buffers(&self) -> Vec<&dyn BudgetedBuffer> {
        let mut v = self.mls.buffers();
        v.push(&self.derivatives);
        v.push(&self.reverse);
        if let Some(weno) = &self.weno {
            v.extend(weno.buffers());
        }
        v
    }
    fn buffers_mut(&mut self) -> Vec<&mut dyn BudgetedBuffer> {
        let mut v = self.mls.buffers_mut();
        v.push(&mut self.derivatives);
        v.push(&mut self.reverse);
        if let Some(weno) = &mut self.weno {
            v.extend(weno.buffers_mut());
        }
        v
    }
}
