//! The MUSCL stage passes on the device: MLS derivatives, then reconstruction and numerical fluxes
//! with the MLS-divergence formulation, for any equation with device formulas
//! ([`crate::equation`]: the kernels are generic over them), MUSCL orders 1 to 5, either slot
//! layout; and the Runge-Kutta stage update.
//!
//! Device state layout: the `M` conserved variables are the host's `M` component arrays laid end
//! to end in one buffer (variable `v` of particle `i` at `v * n + i`), so a kernel has a fixed
//! signature whatever `M` is and still reads each variable contiguously. The derivatives are
//! kept per particle (`i * M * T + v * T + a`, `T` reconstruction terms) as on the host.
//!
//! The passes are the CPU's ([`mote_cloud::scheme::Muscl`]) operation for operation: the
//! minimum-image half offsets, the Taylor reconstruction on both sides with the admissibility
//! fallback to first order for Euler, the numerical flux, the consistency term `F(u_i) . b_ij`, and
//! the sums over slots accumulated in eight lanes by slot position and added in lane order, as
//! the CPU's batched passes do, so the results agree to a few rounding errors. Each unit writes
//! only its own particle's entries; every unit runs the same number of slot iterations (the
//! maximum count) and masks its own, for the software driver's loop limits (see
//! [`crate::mls`]).
//!
//! The slope limiters run between the two passes ([`DeviceMuscl::with_limiter`], see
//! [`crate::limiter`]).
//!
//! [`DeviceMuscl::derivatives_pass`] and the masked [`DeviceMuscl::flux_pass`] serve MOOD's
//! recomputation ([`crate::mood`]).
//!
//! Every numerical flux of the CPU (Rusanov, central, upwind, HLLC) is a compile-time choice
//! ([`DeviceMuscl::with_flux`]).
//!
//! Both divergence formulations: the MLS divergence and the conservative face weights
//! ([`DeviceMuscl::with_formulation`]; the reverse slots are found on the device).
//!
//! The WENO-type reconstruction runs between the derivative and the limiter pass
//! ([`DeviceMuscl::with_weno`], see [`crate::weno`]).
//!
//! The kinetic transport of a relaxation system ([`DeviceEquation::kinetic`], `2 D M` variables
//! each advected with its own velocity) is one such equation; its source is
//! [`crate::relaxation`].
//!
//! Not on the device yet (refused with "not supported on the GPU backend"): systems of
//! advection equations with matrices.

// Kernels: negated comparisons are the NaN tests (a kernel has no `partial_cmp`), and a
// compile-time `if comptime![..]` stays apart from the run-time test inside it.
#![allow(clippy::neg_cmp_op_on_partial_ord, clippy::collapsible_if)]

use cubecl::prelude::*;
use mote_cloud::flux::FluxKind;
use mote_cloud::scheme::{Formulation, Limiter, PassSeconds};

use crate::array::DeviceArray;
use crate::device::Gpu;
pub use crate::equation::DeviceEquation;
use crate::equation::flux_code::{CENTRAL, RUSANOV};
use crate::equation::{DeviceFormulas, code_of};
use crate::error::GpuError;
use crate::formula::basis::taylor_recursive;
use crate::formula::finite;
use crate::formula::riemann::{
    carried_by_motion, central_flux, interface_velocity, relative_speed, rusanov_flux, upwind_flux,
};
use crate::gravity::GpuFloat;
use crate::launch::{
    ListArgs, Neighbours, Placed, Positions, Reconstruction, ReconstructionLaunch, launch, offset,
    slot_base,
};
use crate::limiter::limiter_kernel;
use crate::mls::DeviceMls;
use crate::search::{DeviceCloud, DeviceNeighbours};
use crate::weno::DeviceWeno;

/// Lanes of the CPU's batched sums.
pub(crate) const LANES: usize = 8;

/// `out[first + a] = sum_s coef[a * slots + s] (u[offset + j(s)] - u[offset + i])` for the
/// `terms` functions, over particle `i`'s slots (`slots_of`: base and stride from
/// [`slot_base`], and the count; every unit runs the longest list's iterations, masking its
/// own), summed in `LANES` lanes by slot position and the lanes added in order: the CPU's
/// batched derivative pass. `acc` holds `terms * LANES`.
#[cube]
pub(crate) fn lane_sums<F: Float>(
    u: &Array<F>,
    offset: usize,
    i: usize,
    list: &Neighbours,
    slots_of: (usize, usize, u32),
    coef: &Array<F>,
    acc: &mut Array<F>,
    out: &mut Array<F>,
    first: usize,
    #[comptime] terms: usize,
) {
    let (base, stride, count) = slots_of;
    let slots = list.slots as usize;
    let ui = u[offset + i];
    #[unroll]
    for t in 0..terms * LANES {
        acc[t] = F::new(0.0);
    }
    for k in 0..list.max_count {
        if k < count {
            let s = base + k as usize * stride;
            let diff = u[offset + list.indices[s] as usize] - ui;
            let lane = (k as usize) % LANES;
            #[unroll]
            for a in 0..terms {
                acc[a * LANES + lane] += coef[a * slots + s] * diff;
            }
        }
    }
    #[unroll]
    for a in 0..terms {
        let mut sum = F::new(0.0);
        #[unroll]
        for l in 0..LANES {
            sum += acc[a * LANES + l];
        }
        out[first + a] = sum;
    }
}

/// `derivs[i * vars * terms + v * terms + a] = sum_s G_a[s] (u_v[j(s)] - u_v[i])`: the
/// derivatives of every variable up to the reconstruction degree (`terms` basis functions).
#[cube(launch_unchecked)]
fn derivatives_kernel<F: Float>(
    u: &Array<F>,
    list: &Neighbours,
    coef: &Array<F>,
    derivs: &mut Array<F>,
    #[comptime] vars: usize,
    #[comptime] terms: usize,
) {
    let i = ABSOLUTE_POS;
    if i < list.n as usize {
        let nu = list.n as usize;
        let (base, stride) = slot_base(list, i);
        // The slots once per particle, for every variable.
        let slots_of = (base, stride, list.counts[i]);
        let mut acc = Array::<F>::new(terms * LANES);
        #[unroll]
        for v in 0..vars {
            let first = i * vars * terms + v * terms;
            lane_sums::<F>(
                u,
                v * nu,
                i,
                list,
                slots_of,
                coef,
                &mut acc,
                derivs,
                first,
                terms,
            );
        }
    }
}

/// `du_i = -2 sum_j (F*(u_L, u_R; b_ij) - F(u_i) . b_ij)`: MUSCL of the interface order
/// `min(order_i, order_j, order)` and the numerical flux. The reconstruction terms at the midpoint
/// come from the basis recursion `phi_a = phi_parent(a) * d_axis(a) * inv(a)` (the CPU's), an
/// interface of order `k` using the first `terms_for_order[k]` of them.
#[cube(launch_unchecked)]
fn flux_kernel<F: Float, Q: DeviceFormulas>(
    pos: &Positions<F>,
    u: &Array<F>,
    derivs: &Array<F>,
    orders: &Orders,
    list: &Neighbours,
    coef: &Array<F>,
    params: &Array<F>,
    basis_of: &Reconstruction<F>,
    faces: &Faces<F>,
    motion: &Motion<F>,
    du: &mut Array<F>,
    #[comptime] shape: FluxShape,
) {
    let vars = comptime![shape.vars];
    let dim = comptime![shape.dim];
    let order = comptime![shape.order];
    let terms = comptime![shape.terms];
    let flux = comptime![shape.flux];
    let conservative = comptime![shape.conservative];
    let moving = comptime![shape.moving];
    let i = ABSOLUTE_POS;
    let mut skip = i >= list.n as usize;
    if !skip && orders.masked == 1 {
        skip = orders.active[i] == 0;
    }
    if !skip {
        let nu = list.n as usize;
        let count = list.counts[i];
        let (base, stride) = slot_base(list, i);
        let slots_u = list.slots as usize;
        let order_i = u32::min(orders.orders[i], order);
        let mut ui = Array::<F>::new(vars);
        let mut ul = Array::<F>::new(vars);
        let mut ur = Array::<F>::new(vars);
        let mut fl = Array::<F>::new(vars);
        let mut fr = Array::<F>::new(vars);
        let mut fi = Array::<F>::new(dim * vars);
        let mut acc = Array::<F>::new(vars * LANES);
        let mut nrm = Array::<F>::new(3usize);
        let mut delta = Array::<F>::new(3usize);
        let mut phi = Array::<F>::new(comptime![if terms > 0 { terms } else { 1 }]);
        #[unroll]
        for v in 0..vars {
            ui[v] = u[v * nu + i];
        }
        // F_d(u_i) along each axis, for the consistency term (the MLS-divergence form).
        if comptime![!conservative] {
            #[unroll]
            for d in 0..dim {
                #[unroll]
                for e in 0..dim {
                    nrm[e] = F::new(0.0);
                }
                nrm[d] = F::new(1.0);
                Q::flux::<F>(&ui, &nrm, params, &mut fl, vars, dim);
                #[unroll]
                for v in 0..vars {
                    fi[d * vars + v] = fl[v];
                }
            }
        }
        #[unroll]
        for t in 0..vars * LANES {
            acc[t] = F::new(0.0);
        }
        for k in 0..list.max_count {
            if k < count {
                let s = base + k as usize * stride;
                let j = list.indices[s] as usize;
                #[unroll]
                for d in 0..dim {
                    nrm[d] = coef[d * slots_u + s];
                    if comptime![conservative] {
                        // The antisymmetric face weight p_ij = V_i b_ij - V_j b_ji.
                        nrm[d] = faces.volumes[i] * nrm[d]
                            - faces.volumes[j] * coef[d * slots_u + faces.reverse[s] as usize];
                    }
                    delta[d] = F::new(0.5) * offset::<F>(pos, i, j, d);
                }
                #[unroll]
                for v in 0..vars {
                    ul[v] = ui[v];
                    ur[v] = u[v * nu + j];
                }
                if comptime![order > 1] {
                    let t = basis_of.terms_for_order[u32::min(order_i, orders.orders[j]) as usize];
                    if t > 0 {
                        taylor_recursive::<F>(
                            &delta,
                            &basis_of.recursion,
                            &basis_of.factor,
                            &mut phi,
                            terms,
                        );
                        #[unroll]
                        for v in 0..vars {
                            #[unroll]
                            for a in 0..terms {
                                if (a as u32) < t {
                                    ul[v] += derivs[i * vars * terms + v * terms + a] * phi[a];
                                    ur[v] += derivs[j * vars * terms + v * terms + a]
                                        * (phi[a] * basis_of.parity[a]);
                                }
                            }
                        }
                        if comptime![Q::CHECKS_RECONSTRUCTION] {
                            // A reconstruction outside the admissible states falls back to
                            // first order for that pair.
                            if !(Q::admissible::<F>(&ul, vars, dim)
                                && Q::admissible::<F>(&ur, vars, dim))
                            {
                                #[unroll]
                                for v in 0..vars {
                                    ul[v] = ui[v];
                                    ur[v] = u[v * nu + j];
                                }
                            }
                        }
                    }
                }
                // On a moving cloud: the interface velocity along the normal, `w_m . b_ij` with
                // `w_m` the mean of the plain average and the two one-sided Taylor values (the
                // CPU's third-order form).
                let mut wn = F::new(0.0);
                if comptime![moving] {
                    #[unroll]
                    for a in 0..dim {
                        let mut slope = F::new(0.0);
                        #[unroll]
                        for b in 0..dim {
                            slope += (motion.gradient[(i * dim + a) * dim + b]
                                - motion.gradient[(j * dim + a) * dim + b])
                                * delta[b];
                        }
                        let (wi, wj) = (motion.w[a * nu + i], motion.w[a * nu + j]);
                        let wm = interface_velocity::<F>(wi, wj, slope);
                        wn += wm * nrm[a];
                    }
                }
                // The numerical flux into `fl`.
                if comptime![moving && (flux == RUSANOV || flux == CENTRAL)] {
                    // ALE: the pair exchanges G = F - u w_n; Rusanov with the wave speeds
                    // relative to the interface, central the plain mean.
                    Q::flux::<F>(&ul, &nrm, params, &mut fl, vars, dim);
                    Q::flux::<F>(&ur, &nrm, params, &mut fr, vars, dim);
                    let mut speed = F::new(0.0);
                    if comptime![flux == RUSANOV] {
                        let (a0, a1) = Q::speed_bounds::<F>(&ul, &nrm, params, vars, dim);
                        let (b0, b1) = Q::speed_bounds::<F>(&ur, &nrm, params, vars, dim);
                        speed = relative_speed::<F>(a0, a1, b0, b1, wn);
                    }
                    #[unroll]
                    for v in 0..vars {
                        let gl = fl[v] - wn * ul[v];
                        let gr = fr[v] - wn * ur[v];
                        fl[v] = rusanov_flux::<F>(ul[v], ur[v], gl, gr, speed);
                    }
                } else {
                    if comptime![Q::OWN_FLUXES & (1u32 << flux) != 0] {
                        // The equation's own solver (Euler's HLLC and Rusanov, the kinetic
                        // upwinding).
                        Q::riemann::<F>(&ul, &ur, &nrm, params, &mut fl, flux, vars, dim);
                    } else {
                        Q::flux::<F>(&ul, &nrm, params, &mut fl, vars, dim);
                        Q::flux::<F>(&ur, &nrm, params, &mut fr, vars, dim);
                        if comptime![flux == RUSANOV] {
                            let speed = F::max(
                                Q::max_speed::<F>(&ul, &nrm, params, vars, dim),
                                Q::max_speed::<F>(&ur, &nrm, params, vars, dim),
                            );
                            #[unroll]
                            for v in 0..vars {
                                fl[v] = rusanov_flux::<F>(ul[v], ur[v], fl[v], fr[v], speed);
                            }
                        } else if comptime![flux == CENTRAL] {
                            #[unroll]
                            for v in 0..vars {
                                fl[v] = central_flux::<F>(fl[v], fr[v]);
                            }
                        } else {
                            // Upwind (one variable).
                            fl[0] = upwind_flux::<F>(ul[0], ur[0], fl[0], fr[0]);
                        }
                    }
                    if comptime![moving] {
                        // The fixed frame's flux, the `-u w_n` part upwinded on its own.
                        #[unroll]
                        for v in 0..vars {
                            fl[v] -= carried_by_motion::<F>(ul[v], ur[v], wn);
                        }
                    }
                }
                let lane = (k as usize) % LANES;
                #[unroll]
                for v in 0..vars {
                    let mut t = fl[v];
                    if comptime![!conservative] {
                        #[unroll]
                        for d in 0..dim {
                            t -= fi[d * vars + v] * nrm[d];
                        }
                        if comptime![moving] {
                            t += ui[v] * wn;
                        }
                    }
                    acc[v * LANES + lane] += t;
                }
            }
        }
        #[unroll]
        for v in 0..vars {
            let mut sum = F::new(0.0);
            #[unroll]
            for l in 0..LANES {
                sum += acc[v * LANES + l];
            }
            if comptime![conservative] {
                du[v * nu + i] = -sum / faces.volumes[i];
            } else {
                du[v * nu + i] = F::new(-2.0) * sum;
            }
        }
    }
}

/// `rate_i = 2 sum_j lambda_max(u_i; b_ij)`: the rate at which particle `i` can change (the
/// geometric CFL condition of [`mote_cloud::scheme::Muscl::stable_dt`]); 0 for boundary
/// particles (tag not 0) when `interior_only` is not 0.
#[cube(launch_unchecked)]
fn rate_kernel<F: Float, Q: DeviceFormulas>(
    u: &Array<F>,
    tags: &Array<u32>,
    interior_only: u32,
    list: &Neighbours,
    coef: &Array<F>,
    params: &Array<F>,
    rates: &mut Array<F>,
    #[comptime] vars: usize,
    #[comptime] dim: usize,
) {
    let i = ABSOLUTE_POS;
    if i < list.n as usize {
        let nu = list.n as usize;
        let count = list.counts[i];
        let (base, stride) = slot_base(list, i);
        let mut ui = Array::<F>::new(vars);
        let mut nrm = Array::<F>::new(3usize);
        #[unroll]
        for v in 0..vars {
            ui[v] = u[v * nu + i];
        }
        let mut sum = F::new(0.0);
        for k in 0..list.max_count {
            if k < count {
                let s = base + k as usize * stride;
                #[unroll]
                for d in 0..dim {
                    nrm[d] = coef[d * list.slots as usize + s];
                }
                sum += Q::max_speed::<F>(&ui, &nrm, params, vars, dim);
            }
        }
        if interior_only != 0 && tags[i] != 0 {
            sum = F::new(0.0);
        }
        rates[i] = F::new(2.0) * sum;
    }
}

/// `out = base + h * k` element-wise (a Runge-Kutta stage's combination, applied once per
/// earlier stage).
#[cube(launch_unchecked)]
fn axpy_kernel<F: Float + ScalarArgSettings>(
    base: &Array<F>,
    k: &Array<F>,
    h: F,
    out: &mut Array<F>,
    len: u32,
) {
    let i = ABSOLUTE_POS;
    if i < len as usize {
        out[i] = base[i] + h * k[i];
    }
}

/// `out += h * k` element-wise (a Runge-Kutta combination accumulated in place, in the CPU's
/// order).
#[cube(launch_unchecked)]
fn accumulate_kernel<F: Float + ScalarArgSettings>(
    out: &mut Array<F>,
    k: &Array<F>,
    h: F,
    len: u32,
) {
    let i = ABSOLUTE_POS;
    if i < len as usize {
        out[i] += h * k[i];
    }
}

/// `first[0] = min(first[0], i)` for every non-finite `x[i]`.
#[cube(launch_unchecked)]
fn non_finite_kernel<F: Float>(x: &Array<F>, len: u32, first: &mut Array<Atomic<u32>>) {
    let i = ABSOLUTE_POS;
    if i < len as usize {
        if !finite::<F>(x[i]) {
            first[0].fetch_min(i as u32);
        }
    }
}

/// `reverse[s]`: for each slot `s` of `i` pointing at `j`, the slot of `j` pointing at `i`
/// (the lists are symmetric). Written where found: a variable initialised from an integer
/// constant would stay a compile-time value.
#[cube(launch_unchecked)]
fn reverse_kernel(list: &Neighbours, reverse: &mut Array<u32>) {
    let i = ABSOLUTE_POS;
    if i < list.n as usize {
        let count = list.counts[i];
        let (base, stride) = slot_base(list, i);
        for k in 0..list.max_count {
            if k < count {
                let s = base + k as usize * stride;
                let j = list.indices[s] as usize;
                let count_j = list.counts[j];
                let (base_j, _) = slot_base(list, j);
                for t in 0..list.max_count {
                    if t < count_j {
                        let back = base_j + t as usize * stride;
                        if list.indices[back] as usize == i {
                            reverse[s] = back as u32;
                        }
                    }
                }
            }
        }
    }
}

/// The MUSCL right-hand side on a device: MLS fits, derivatives and the flux pass.
pub struct DeviceMuscl<F> {
    equation: DeviceEquation,
    /// The dimension it was built for.
    dim: usize,
    order: usize,
    /// Reconstruction terms (basis functions up to degree `order - 1`; 0 at order 1).
    terms: usize,
    mls: DeviceMls<F>,
    derivatives: DeviceArray<F>,
    /// The reconstruction basis recursion (`parent, axis` per term), its factors, the parities
    /// `(-1)^|a|` and the term count of each interface order.
    recursion: DeviceArray<u32>,
    recursion_inv: DeviceArray<F>,
    parity: DeviceArray<F>,
    terms_for_order: DeviceArray<u32>,
    /// The equation's parameters; the domain's lengths and half lengths, and its periodic axes
    /// (set by [`DeviceMuscl::prepare`]): uploaded once, read by every stage.
    params: DeviceArray<F>,
    geometry: DeviceArray<F>,
    periodic: DeviceArray<u32>,
    /// The slope limiter, its kernel code and scaled terms (see [`crate::limiter`]), and
    /// Venkatakrishnan's `eps^2 = (K dx)^3` (set by [`DeviceMuscl::prepare`]).
    limiter: Limiter,
    limiter_code: (u32, usize),
    /// The numerical flux.
    flux: FluxKind,
    /// The divergence formulation, and for the conservative one the reverse slots.
    formulation: Formulation,
    reverse: DeviceArray<u32>,
    limiter_eps2: DeviceArray<F>,
    /// The flux pass's stand-in for an `active` mask when it has none.
    no_mask: DeviceArray<u32>,
    /// Stand-ins for the particle velocities and their gradients on a fixed cloud.
    no_velocity: DeviceArray<F>,
    no_gradient: DeviceArray<F>,
    /// The WENO-type reconstruction, if on (see [`crate::weno`]).
    weno: Option<DeviceWeno<F>>,
    /// Wait for each pass and accumulate its wall seconds (benchmarks).
    timing: bool,
    seconds: PassSeconds,
}

impl<F: GpuFloat> DeviceMuscl<F> {
    /// MUSCL of `order` (1 to 5) for `equation` in `D` dimensions, with the MLS `weight`, on
    /// `gpu`.
    pub fn new<const D: usize>(
        gpu: &Gpu,
        equation: DeviceEquation,
        order: usize,
        weight: mote_cloud::Weight,
    ) -> Result<Self, GpuError> {
        if !(1..=mote_cloud::scheme::MAX_ORDER).contains(&order) {
            return Err(mote_cloud::CloudError::invalid(
                "MUSCL order",
                order,
                format!("1 to {}", mote_cloud::scheme::MAX_ORDER),
            )
            .into());
        }
        let m = equation.variables(D);
        // The CPU scheme's reconstruction basis and its recursion (see `Basis`).
        let basis = mote_cloud::mls::Basis::<D>::new((order - 1).max(1))?;
        let terms = if order > 1 { basis.len() } else { 0 };
        let recursion = basis.recursion();
        let recursion_inv = basis.recursion_factors::<F>();
        let parity: Vec<F> = basis.parities().into_iter().map(F::cast).collect();
        let terms_for_order: Vec<u32> = (0..=mote_cloud::scheme::MAX_ORDER)
            .map(|k| {
                if k > 1 {
                    mote_cloud::mls::Basis::<D>::size(k - 1).min(terms) as u32
                } else {
                    0
                }
            })
            .collect();
        let fixed = mote_core::Scaling::Fixed;
        let params = equation.params().map(F::cast);
        Ok(Self {
            equation,
            dim: D,
            order,
            terms,
            mls: DeviceMls::new::<D>(gpu, order, weight)?,
            derivatives: gpu
                .output("muscl_derivatives", 0)
                .with_scaling(mote_core::Scaling::PerParticle((m * terms).max(1))),
            recursion: gpu.upload("muscl_recursion", recursion).with_scaling(fixed),
            recursion_inv: gpu
                .upload("muscl_recursion_factor", recursion_inv)
                .with_scaling(fixed),
            parity: gpu.upload("muscl_parity", &parity).with_scaling(fixed),
            terms_for_order: gpu
                .upload("muscl_terms_for_order", &terms_for_order)
                .with_scaling(fixed),
            params: gpu.upload("muscl_parameters", &params).with_scaling(fixed),
            geometry: gpu
                .upload("muscl_geometry", &[F::cast(0.0); 6])
                .with_scaling(fixed),
            periodic: gpu.upload("muscl_periodic", &[0u32; 3]).with_scaling(fixed),
            limiter: Limiter::none(),
            limiter_code: (0, 0),
            flux: FluxKind::Rusanov,
            formulation: Formulation::MlsDivergence,
            reverse: gpu
                .output("reverse_slot", 0)
                .with_scaling(mote_core::Scaling::PerSlot(1)),
            limiter_eps2: gpu
                .upload("limiter_eps2", &[F::cast(0.0)])
                .with_scaling(fixed),
            no_mask: gpu.upload("no_mask", &[1u32]).with_scaling(fixed),
            no_velocity: gpu
                .upload("no_velocity", &[F::cast(0.0)])
                .with_scaling(fixed),
            no_gradient: gpu
                .upload("no_gradient", &[F::cast(0.0)])
                .with_scaling(fixed),
            weno: None,
            timing: false,
            seconds: PassSeconds::default(),
        })
    }

    /// Limits the reconstruction with `limiter` in `D` dimensions, as the CPU scheme's
    /// `with_limiter` does (minmod and superbee are one-dimensional).
    pub fn with_limiter<const D: usize>(mut self, limiter: Limiter) -> Result<Self, GpuError> {
        limiter.validate::<D>()?;
        self.limiter = limiter;
        self.limiter_code = crate::limiter::code(&limiter, self.terms, D);
        Ok(self)
    }

    /// The limiter.
    pub fn limiter(&self) -> Limiter {
        self.limiter
    }

    /// A WENO-type MLS reconstruction in `D` dimensions, as the CPU scheme's `with_weno`: the
    /// derivatives become a smoothness-weighted mix of the central fit's (linear weight
    /// `central_weight`, e.g. 1000) and `2 D` one-sided fits' of the reconstruction degree
    /// (see [`crate::weno`]). Needs order >= 2.
    pub fn with_weno<const D: usize>(
        mut self,
        gpu: &Gpu,
        central_weight: f64,
    ) -> Result<Self, GpuError> {
        let m = self.equation.variables(D);
        self.weno = Some(DeviceWeno::new::<D>(
            gpu,
            self.order,
            self.mls.weight(),
            central_weight,
            m,
        )?);
        Ok(self)
    }

    /// The WENO central weight, if the WENO-type reconstruction is on.
    pub fn weno(&self) -> Option<f64> {
        self.weno.as_ref().map(|w| w.central_weight())
    }

    /// Uses the numerical flux `kind`, as the CPU scheme's `with_flux`: Rusanov and central for
    /// every equation, upwind for the scalar ones (advection, Burgers), HLLC for Euler (see
    /// [`DeviceEquation::supports_flux`]).
    pub fn with_flux(mut self, kind: FluxKind) -> Result<Self, GpuError> {
        if !self.equation.supports_flux(kind, self.dim) {
            return Err(mote_cloud::CloudError::invalid(
                "flux",
                kind,
                "one the equation provides (rusanov and central always, upwind for scalar \
                 equations, hllc for euler)",
            )
            .into());
        }
        self.flux = kind;
        Ok(self)
    }

    /// The numerical flux.
    pub fn flux(&self) -> FluxKind {
        self.flux
    }

    /// Uses the divergence `formulation` (see [`mote_cloud::scheme::Formulation`]): the
    /// MLS divergence (the default) or the conservative face weights `p_ij = V_i b_ij -
    /// V_j b_ji`, which need the reverse slots (found by [`DeviceMuscl::prepare`]).
    pub fn with_formulation(mut self, formulation: Formulation) -> Self {
        self.formulation = formulation;
        self
    }

    /// The divergence formulation.
    pub fn formulation(&self) -> Formulation {
        self.formulation
    }

    /// With `true`, every [`DeviceMuscl::rhs`] waits for each of its passes and accumulates
    /// their wall seconds (see [`DeviceMuscl::take_seconds`]): a benchmark's breakdown, at the
    /// price of a synchronisation per pass.
    pub fn set_timing(&mut self, timing: bool) {
        self.timing = timing;
    }

    /// Seconds in the derivative, limiter and flux passes since the last call (with
    /// [`DeviceMuscl::set_timing`]), and resets them.
    pub fn take_seconds(&mut self) -> PassSeconds {
        std::mem::take(&mut self.seconds)
    }

    /// The equation.
    pub fn equation(&self) -> DeviceEquation {
        self.equation.clone()
    }

    /// The equation, borrowed (its kernels' launchers).
    pub(crate) fn equation_ref(&self) -> &DeviceEquation {
        &self.equation
    }

    /// The MUSCL order.
    pub fn order(&self) -> usize {
        self.order
    }

    /// Reconstruction terms per variable (basis functions up to degree `order - 1`; 0 at
    /// order 1).
    pub fn reconstruction_terms(&self) -> usize {
        self.terms
    }

    /// The MLS fits (computed by [`DeviceMuscl::prepare`]).
    pub fn mls(&self) -> &DeviceMls<F> {
        &self.mls
    }

    /// Computes the MLS coefficients for `cloud` and `list`: once per neighbour search.
    pub fn prepare<const D: usize>(
        &mut self,
        gpu: &Gpu,
        cloud: &DeviceCloud<F, D>,
        list: &DeviceNeighbours,
    ) -> Result<(), GpuError> {
        self.mls.compute(gpu, cloud, list)?;
        if let Some(weno) = &mut self.weno {
            let basis = mote_cloud::mls::Basis::<D>::new((self.order - 1).max(1))?;
            let exponents = &basis.exponents()[..self.terms];
            let m = self.equation.variables(D);
            weno.prepare::<D>(gpu, cloud, list, self.mls.spacing(), exponents, m)?;
        }
        let lengths = cloud.domain().lengths();
        let periodic = cloud.domain().periodic();
        let mut geo = [F::cast(0.0); 6];
        let mut per = [0u32; 3];
        for a in 0..D {
            geo[a] = F::cast(lengths[a]);
            geo[3 + a] = F::cast(0.5 * lengths[a]);
            per[a] = periodic[a] as u32;
        }
        self.geometry = gpu
            .upload("muscl_geometry", &geo)
            .with_scaling(mote_core::Scaling::Fixed);
        self.periodic = gpu
            .upload("muscl_periodic", &per)
            .with_scaling(mote_core::Scaling::Fixed);
        // The CPU's eps^2, from the smallest nominal spacing, in f64 then rounded once.
        let spacing = cloud.spacing().into_iter().fold(f64::INFINITY, f64::min);
        let eps2 = (self.limiter.venkatakrishnan_k * spacing).powi(3);
        self.limiter_eps2 = gpu
            .upload("limiter_eps2", &[F::cast(eps2)])
            .with_scaling(mote_core::Scaling::Fixed);
        let m = self.equation.variables(D);
        self.derivatives.resize(cloud.len() * m * self.terms)?;
        if self.formulation == Formulation::Conservative {
            self.reverse_slots(gpu, cloud.len(), list)?;
        }
        Ok(())
    }

    /// For each slot of `i` pointing at `j`, the slot of `j` pointing back at `i` (the
    /// conservative formulation's face weights).
    fn reverse_slots(
        &mut self,
        gpu: &Gpu,
        n: usize,
        list: &DeviceNeighbours,
    ) -> Result<(), GpuError> {
        let list = list.checked(gpu, n)?;
        self.reverse.resize(list.slots())?;
        if n > 0 {
            // Each unit writes the reverse entries of its own slots; every index read is a slot
            // of a listed particle.
            launch!(gpu, n, reverse_kernel(list.arg(), self.reverse.arg()));
        }
        Ok(())
    }

    /// The largest stable time step for `cfl` at state `u`: `cfl / max_i rate_i`, the rates
    /// computed and reduced on the device (only the maximum comes back); infinite when nothing
    /// moves. With `interior_only`, boundary particles do not count (as on the CPU, where
    /// boundary conditions impose their states).
    pub fn stable_dt<const D: usize>(
        &self,
        gpu: &Gpu,
        cloud: &DeviceCloud<F, D>,
        list: &DeviceNeighbours,
        u: &DeviceArray<F>,
        cfl: f64,
        interior_only: bool,
    ) -> Result<f64, GpuError> {
        let n = cloud.len();
        let m = self.equation.variables(D);
        gpu.check(u, n * m)?;
        gpu.check(cloud.tags(), n)?;
        let halo = list.halo();
        let list = list.checked(gpu, n)?;
        gpu.check(self.mls.coefficients(), self.mls.size() * list.slots())?;
        if n == 0 {
            // A rank without particles still takes part in the ranks' maximum.
            let worst = halo.map_or(0, |h| h.halo().max_of(0));
            return Ok(if worst > 0 {
                cfl / f64::from_bits(worst)
            } else {
                f64::INFINITY
            });
        }
        let rates = gpu.output::<F>("stable_dt_rates", n);
        let launch = RateLaunch {
            u,
            tags: cloud.tags(),
            interior_only: interior_only as u32,
            list,
            coef: self.mls.coefficients(),
            params: &self.params,
            rates: &rates,
            vars: m,
            dim: D,
        };
        self.equation.kernels::<F>().rate(gpu, &launch);
        let worst = match halo {
            // The own particles' largest rate, the largest over the ranks: one process's
            // (rates are non-negative, their bits order as the numbers do).
            Some(h) => {
                h.own_only(gpu, &rates)?;
                let (_, worst) = gpu.min_max(&rates)?;
                f64::from_bits(h.halo().max_of(worst.as_f64().to_bits()))
            }
            None => gpu.min_max(&rates)?.1.as_f64(),
        };
        Ok(if worst > 0.0 {
            cfl / worst
        } else {
            f64::INFINITY
        })
    }

    /// `du/dt` of the state `u` (the variables end to end) into `du`, with per-particle
    /// reconstruction `orders`: [`derivatives_pass`](Self::derivatives_pass) then
    /// [`flux_pass`](Self::flux_pass) for every particle.
    pub fn rhs<const D: usize>(
        &mut self,
        gpu: &Gpu,
        cloud: &DeviceCloud<F, D>,
        list: &DeviceNeighbours,
        orders: &DeviceArray<u32>,
        u: &DeviceArray<F>,
        du: &DeviceArray<F>,
    ) -> Result<(), GpuError> {
        self.passes(
            gpu,
            cloud,
            list,
            Some(orders),
            None,
            None,
            u,
            du,
            true,
            true,
        )
    }

    /// The derivatives of `u` up to the reconstruction degree, limited if a limiter is set,
    /// kept for [`flux_pass`](Self::flux_pass).
    pub fn derivatives_pass<const D: usize>(
        &mut self,
        gpu: &Gpu,
        cloud: &DeviceCloud<F, D>,
        list: &DeviceNeighbours,
        u: &DeviceArray<F>,
    ) -> Result<(), GpuError> {
        // (`du` is not written: `u` stands in.)
        self.passes(gpu, cloud, list, None, None, None, u, u, true, false)
    }

    /// Reconstruction and fluxes into `du` from the derivatives of the last
    /// [`derivatives_pass`](Self::derivatives_pass) on the same `u`, with per-particle
    /// reconstruction `orders`, for the particles whose `active` entry is non-zero (all with
    /// `None`; the others' `du` entries are left as they are): MOOD's recomputation.
    #[allow(clippy::too_many_arguments)]
    pub fn flux_pass<const D: usize>(
        &mut self,
        gpu: &Gpu,
        cloud: &DeviceCloud<F, D>,
        list: &DeviceNeighbours,
        orders: &DeviceArray<u32>,
        active: Option<&DeviceArray<u32>>,
        u: &DeviceArray<F>,
        du: &DeviceArray<F>,
    ) -> Result<(), GpuError> {
        self.passes(
            gpu,
            cloud,
            list,
            Some(orders),
            active,
            None,
            u,
            du,
            false,
            true,
        )
    }

    /// [`flux_pass`](Self::flux_pass) on a moving cloud whose particles move with velocities
    /// `w` (`D` arrays end to end: component `a` of particle `i` at `a * n + i`) with MLS
    /// gradients `grad` (`dw_a/dx_b` at `(i * D + a) * D + b`, from
    /// [`velocity_gradients`](Self::velocity_gradients)): the pairs exchange ALE fluxes `F - u
    /// w` and `du` is the rate of change following each particle, as the CPU's
    /// `Muscl::moving_flux_pass`. The MLS-divergence formulation only (as on the CPU).
    #[allow(clippy::too_many_arguments)]
    pub fn moving_flux_pass<const D: usize>(
        &mut self,
        gpu: &Gpu,
        cloud: &DeviceCloud<F, D>,
        list: &DeviceNeighbours,
        orders: &DeviceArray<u32>,
        u: &DeviceArray<F>,
        du: &DeviceArray<F>,
        w: &DeviceArray<F>,
        grad: &DeviceArray<F>,
    ) -> Result<(), GpuError> {
        if self.formulation != Formulation::MlsDivergence {
            return Err(mote_cloud::CloudError::invalid(
                "moving cloud",
                "the conservative formulation",
                "the MLS-divergence formulation (the conservative one needs evolving volumes)",
            )
            .into());
        }
        let n = cloud.len();
        gpu.check(w, D * n)?;
        gpu.check(grad, D * D * n)?;
        let velocity = Some((w, grad));
        self.passes(
            gpu,
            cloud,
            list,
            Some(orders),
            None,
            velocity,
            u,
            du,
            false,
            true,
        )
    }

    /// The MLS gradients of the particle velocities `w` (`D` arrays end to end) into `grad`
    /// (`dw_a/dx_b` at `(i * D + a) * D + b`), for
    /// [`moving_flux_pass`](Self::moving_flux_pass): the derivative kernel over the velocity
    /// components and the `D` gradient terms, as the CPU's `Muscl::velocity_gradients` runs its
    /// derivative pass.
    pub fn velocity_gradients<const D: usize>(
        &self,
        gpu: &Gpu,
        cloud: &DeviceCloud<F, D>,
        list: &DeviceNeighbours,
        w: &DeviceArray<F>,
        grad: &DeviceArray<F>,
    ) -> Result<(), GpuError> {
        let n = cloud.len();
        gpu.check(w, D * n)?;
        gpu.check(grad, D * D * n)?;
        let list = list.checked(gpu, n)?;
        let coef = self.mls.coefficients();
        gpu.check(coef, self.mls.size() * list.slots())?;
        if n > 0 {
            // Every unit reads its own slots and its neighbours' velocities and writes only
            // its own gradients (i * D * D + ..); the coefficients hold at least `D` terms.
            launch!(
                gpu,
                n,
                derivatives_kernel::<F>(w.arg(), list.arg(), coef.arg(), grad.arg(), D, D)
            );
        }
        Ok(())
    }

    /// Launches the derivative (and limiter) passes and/or the flux pass (which needs the
    /// `orders`).
    #[allow(clippy::too_many_arguments)]
    fn passes<const D: usize>(
        &mut self,
        gpu: &Gpu,
        cloud: &DeviceCloud<F, D>,
        list: &DeviceNeighbours,
        orders: Option<&DeviceArray<u32>>,
        active: Option<&DeviceArray<u32>>,
        velocity: Option<(&DeviceArray<F>, &DeviceArray<F>)>,
        u: &DeviceArray<F>,
        du: &DeviceArray<F>,
        derivatives: bool,
        fluxes: bool,
    ) -> Result<(), GpuError> {
        let n = cloud.len();
        let m = self.equation.variables(D);
        gpu.check(u, n * m)?;
        gpu.check(du, n * m)?;
        // On a rank's part of a split cloud every pass's records are refreshed in the halo
        // from their owners after it, as on the CPU (`mote_cloud::halo`): the passes compute
        // every local particle, and the outer ring's (from incomplete lists) are replaced.
        let halo = list.halo();
        let list = list.checked(gpu, n)?;
        if fluxes {
            gpu.check(orders.expect("the flux pass has orders"), n)?;
            gpu.check(cloud.volumes(), n)?;
            if self.formulation == Formulation::Conservative {
                gpu.check(&self.reverse, list.slots())?;
            }
        }
        if let Some(a) = active {
            gpu.check(a, n)?;
        }
        let coef = self.mls.coefficients();
        gpu.check(coef, self.mls.size() * list.slots())?;
        gpu.check(&self.derivatives, n * m * self.terms)?;
        let pos = Placed::checked(gpu, cloud, &self.geometry, &self.periodic)?;
        if n == 0 && halo.is_none() {
            return Ok(());
        }
        let mut passes = vec![];
        if self.terms > 0 && derivatives {
            passes.push(Pass::Derivatives);
            if self.weno.is_some() {
                passes.push(Pass::Weno);
            }
            if self.limiter_code.0 != 0 {
                passes.push(Pass::Limiter);
            }
        }
        if fluxes {
            passes.push(Pass::Fluxes);
        }
        // Every unit reads its own slots, its neighbours' entries and writes only its own
        // particle's entries of `derivs` (i * m * terms + ..) or `du` (v * n + i); private
        // arrays are sized by the same compile-time constants that bound their loops.
        for pass in passes {
            let clock = std::time::Instant::now();
            // (A rank without particles launches nothing but takes part in the exchanges.)
            match pass {
                _ if n == 0 => {}
                Pass::Derivatives => launch!(
                    gpu,
                    n,
                    derivatives_kernel::<F>(
                        u.arg(),
                        list.arg(),
                        coef.arg(),
                        self.derivatives.arg(),
                        m,
                        self.terms
                    )
                ),
                Pass::Weno => {
                    let weno = self.weno.as_ref().expect("listed with WENO on");
                    weno.apply(gpu, list, u, &self.derivatives, m, self.terms)?;
                }
                Pass::Limiter => launch!(
                    gpu,
                    n,
                    limiter_kernel::<F>(
                        pos.arg(),
                        u.arg(),
                        list.arg(),
                        self.reconstruction(),
                        self.limiter_eps2.arg(),
                        self.derivatives.arg(),
                        self.limiter_code.0,
                        m,
                        D,
                        self.terms,
                        self.limiter_code.1
                    )
                ),
                Pass::Fluxes => {
                    // Stand-ins are never bound twice: without orders there is no flux pass.
                    let (w, gradient) = velocity.unwrap_or((&self.no_velocity, &self.no_gradient));
                    let flux = FluxLaunch {
                        muscl: self,
                        pos,
                        list,
                        u,
                        orders: orders.unwrap_or(&self.no_mask),
                        active,
                        volumes: cloud.volumes(),
                        velocity: (w, gradient, velocity.is_some()),
                        du,
                        dim: D,
                    };
                    self.equation.kernels::<F>().flux(gpu, &flux);
                }
            }
            if let Some(halo) = halo {
                match pass {
                    Pass::Fluxes => halo.exchange_columns(gpu, du, n, m)?,
                    _ => halo.exchange_rows(gpu, &self.derivatives, m * self.terms)?,
                }
            }
            if self.timing {
                gpu.sync()?;
                let seconds = clock.elapsed().as_secs_f64();
                match pass {
                    // (The CPU counts its WENO pass with the derivatives.)
                    Pass::Derivatives | Pass::Weno => self.seconds.derivatives += seconds,
                    Pass::Limiter => self.seconds.limiter += seconds,
                    Pass::Fluxes => self.seconds.fluxes += seconds,
                }
            }
        }
        Ok(())
    }

    /// The reconstruction basis as a launch argument.
    fn reconstruction<Rt: Runtime>(&self) -> ReconstructionLaunch<F, Rt> {
        ReconstructionLaunch::new(
            self.recursion.arg(),
            self.recursion_inv.arg(),
            self.parity.arg(),
            self.terms_for_order.arg(),
        )
    }
}

/// The per-particle reconstruction orders, and the particles to recompute where `masked` is 1
/// (MOOD).
#[derive(CubeLaunch, CubeType)]
struct Orders {
    orders: Array<u32>,
    active: Array<u32>,
    masked: u32,
}

/// The conservative formulation's particle volumes and reverse slots.
#[derive(CubeLaunch, CubeType)]
struct Faces<F: Float> {
    volumes: Array<F>,
    reverse: Array<u32>,
}

/// A moving cloud's particle velocities (`D` arrays end to end) and their MLS gradients.
#[derive(CubeLaunch, CubeType)]
struct Motion<F: Float> {
    w: Array<F>,
    gradient: Array<F>,
}

/// The flux kernel's compile-time choices: variables, dimension, MUSCL order and reconstruction
/// terms, the numerical flux's code, the conservative formulation, a moving cloud.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct FluxShape {
    vars: usize,
    dim: usize,
    order: u32,
    terms: usize,
    flux: u32,
    conservative: bool,
    moving: bool,
}

/// One launch of the flux pass (the arrays checked by [`DeviceMuscl::passes`]).
pub(crate) struct FluxLaunch<'a, F: GpuFloat> {
    /// The scheme: its derivatives, parameters, basis, reverse slots and compile-time choices.
    muscl: &'a DeviceMuscl<F>,
    pos: Placed<'a, F>,
    list: ListArgs<'a>,
    u: &'a DeviceArray<F>,
    orders: &'a DeviceArray<u32>,
    /// The particles to recompute (MOOD), or all.
    active: Option<&'a DeviceArray<u32>>,
    volumes: &'a DeviceArray<F>,
    /// The particle velocities, their gradients and whether the cloud moves.
    velocity: (&'a DeviceArray<F>, &'a DeviceArray<F>, bool),
    du: &'a DeviceArray<F>,
    dim: usize,
}

/// Launches the flux pass for the equation formulas `Q`.
pub(crate) fn launch_flux<F: GpuFloat, Q: DeviceFormulas>(gpu: &Gpu, l: &FluxLaunch<'_, F>) {
    let s = l.muscl;
    let (w, gradient, moving) = l.velocity;
    // Safety: see `DeviceMuscl::passes`.
    launch!(
        gpu,
        l.list.n(),
        flux_kernel::<F, Q>(
            l.pos.arg(),
            l.u.arg(),
            s.derivatives.arg(),
            OrdersLaunch::new(
                l.orders.arg(),
                l.active.unwrap_or(&s.no_mask).arg(),
                l.active.is_some() as u32
            ),
            l.list.arg(),
            s.mls.coefficients().arg(),
            s.params.arg(),
            s.reconstruction(),
            FacesLaunch::new(l.volumes.arg(), s.reverse.arg()),
            MotionLaunch::new(w.arg(), gradient.arg()),
            l.du.arg(),
            FluxShape {
                vars: s.equation.variables(l.dim),
                dim: l.dim,
                order: s.order as u32,
                terms: s.terms,
                flux: code_of(s.flux),
                conservative: s.formulation == Formulation::Conservative,
                moving,
            }
        )
    );
}

/// One launch of the stable-step rates.
pub(crate) struct RateLaunch<'a, F: GpuFloat> {
    u: &'a DeviceArray<F>,
    tags: &'a DeviceArray<u32>,
    /// 1: boundary particles (tag not 0) do not count.
    interior_only: u32,
    list: ListArgs<'a>,
    coef: &'a DeviceArray<F>,
    params: &'a DeviceArray<F>,
    rates: &'a DeviceArray<F>,
    vars: usize,
    dim: usize,
}

/// Launches the stable-step rates for the equation formulas `Q`: each unit reads its own
/// slots, state and tag and writes its own rate.
pub(crate) fn launch_rate<F: GpuFloat, Q: DeviceFormulas>(gpu: &Gpu, l: &RateLaunch<'_, F>) {
    launch!(
        gpu,
        l.list.n(),
        rate_kernel::<F, Q>(
            l.u.arg(),
            l.tags.arg(),
            l.interior_only,
            l.list.arg(),
            l.coef.arg(),
            l.params.arg(),
            l.rates.arg(),
            l.vars,
            l.dim
        )
    );
}

/// The passes of one right-hand side, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pass {
    Derivatives,
    Weno,
    Limiter,
    Fluxes,
}

impl Gpu {
    /// `out = base + h * k` on the device (Runge-Kutta stage combinations; all three of one
    /// length).
    pub fn axpy<F: GpuFloat>(
        &self,
        base: &DeviceArray<F>,
        k: &DeviceArray<F>,
        h: F,
        out: &DeviceArray<F>,
    ) -> Result<(), GpuError> {
        let len = base.len();
        self.check(k, len)?;
        self.check(out, len)?;
        // Each unit reads and writes its own element below the common length.
        launch!(
            self,
            len,
            axpy_kernel::<F>(base.arg(), k.arg(), h, out.arg(), len as u32)
        );
        Ok(())
    }

    /// `out += h * k` on the device, in place.
    pub fn accumulate<F: GpuFloat>(
        &self,
        out: &DeviceArray<F>,
        k: &DeviceArray<F>,
        h: F,
    ) -> Result<(), GpuError> {
        let len = out.len();
        self.check(k, len)?;
        // Each unit reads and writes its own element below the common length.
        launch!(
            self,
            len,
            accumulate_kernel::<F>(out.arg(), k.arg(), h, len as u32)
        );
        Ok(())
    }

    /// The first index of a non-finite element of `x` (NaN or infinite), found on the device
    /// (one word comes back).
    pub fn first_non_finite<F: GpuFloat>(
        &self,
        x: &DeviceArray<F>,
    ) -> Result<Option<usize>, GpuError> {
        let len = x.len();
        if len == 0 {
            return Ok(None);
        }
        let first = self.upload("first_non_finite", &[u32::MAX]);
        // Each unit reads its own element; the result takes an atomic minimum.
        launch!(
            self,
            len,
            non_finite_kernel::<F>(x.arg(), len as u32, first.arg())
        );
        let i = self.download(&first)?[0];
        Ok((i != u32::MAX).then_some(i as usize))
    }
}

impl<F: GpuFloat> mote_core::Budgeted for DeviceMuscl<F> {
    fn buffers(&self) -> Vec<&dyn mote_core::BudgetedBuffer> {
        let mut v = mote_core::Budgeted::buffers(&self.mls);
        v.extend([
            &self.derivatives as &dyn mote_core::BudgetedBuffer,
            &self.recursion,
            &self.recursion_inv,
            &self.parity,
            &self.terms_for_order,
            &self.params,
            &self.geometry,
            &self.periodic,
            &self.reverse,
            &self.limiter_eps2,
            &self.no_mask,
            &self.no_velocity,
            &self.no_gradient,
        ]);
        if let Some(w) = &self.weno {
            v.extend(mote_core::Budgeted::buffers(w));
        }
        v
    }
    fn buffers_mut(&mut self) -> Vec<&mut dyn mote_core::BudgetedBuffer> {
        let mut v = mote_core::Budgeted::buffers_mut(&mut self.mls);
        v.extend([
            &mut self.derivatives as &mut dyn mote_core::BudgetedBuffer,
            &mut self.recursion,
            &mut self.recursion_inv,
            &mut self.parity,
            &mut self.terms_for_order,
            &mut self.params,
            &mut self.geometry,
            &mut self.periodic,
            &mut self.reverse,
            &mut self.limiter_eps2,
            &mut self.no_mask,
            &mut self.no_velocity,
            &mut self.no_gradient,
        ]);
        if let Some(w) = &mut self.weno {
            v.extend(mote_core::Budgeted::buffers_mut(w));
        }
        v
    }
}
