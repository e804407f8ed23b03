//! MOOD a-posteriori order reduction on the device: the CPU's [`mote_cloud::mood`] step for
//! step, each a pull-form kernel over particles.
//!
//! Per round: detection (admissibility, then `always`, or the relaxed maximum principle `u1`)
//! into a fail code per particle; for `u2` the per-axis second derivatives of the stage input
//! (once per stage) and the smooth-extremum test that clears failures; the failures counted with
//! atomic integer additions (exact whatever the order); then the halo strategy's new orders
//! (`epd2` first caps by the failing particles within one ring), the order reductions counted,
//! and the particles to recompute (changed, or next to a change) marked. Only the counters come
//! back to the host (two words, twice per round): they decide whether another round runs, as on
//! the CPU.

// Kernels: negated comparisons keep the CPU's NaN behaviour; a bounds test stays apart from the
// read it guards (a kernel's `&&` need not short-circuit), and a compile-time
// `if comptime![..]` apart from the run-time test inside it or beside it (the same result for
// `always` as for a failing range test, but without the neighbour loop).
#![allow(
    clippy::neg_cmp_op_on_partial_ord,
    clippy::collapsible_if,
    clippy::if_same_then_else
)]

use cubecl::prelude::*;
use mote_cloud::mood::{Criterion, MoodSettings, MoodStats, Rounds};

use crate::array::DeviceArray;
use crate::device::Gpu;
use crate::equation::DeviceFormulas;
use crate::error::GpuError;
use crate::formula::mood_passes::{
    EPD2, FAIL, INADMISSIBLE, PASS, curvature, halo_cap, leaves_range, next_order, order_changed,
    smooth_extremum,
};
use crate::gravity::GpuFloat;
use crate::launch::{ListArgs, Neighbours, launch};
use crate::muscl::DeviceMuscl;
use crate::search::{DeviceCloud, DeviceNeighbours};

const ALWAYS: u32 = 1;
const U1: u32 = 2;
const U2: u32 = 3;

/// `orders[i] = clamp(max_orders[i], 1, cap)`.
#[cube(launch_unchecked)]
fn reset_kernel(max_orders: &Array<u32>, n: u32, cap: u32, orders: &mut Array<u32>) {
    let i = ABSOLUTE_POS;
    if i < n as usize {
        orders[i] = u32::min(u32::max(max_orders[i], 1), cap);
    }
}

/// The fail code of every active interior particle (others pass). `consts`: `delta`,
/// `delta^3`.
#[cube(launch_unchecked)]
fn detect_kernel<F: Float, Q: DeviceFormulas>(
    input: &Array<F>,
    candidate: &Array<F>,
    tags: &Array<u32>,
    active: &Array<u32>,
    list: &Neighbours,
    consts: &Array<F>,
    fail: &mut Array<u32>,
    #[comptime] criterion: u32,
    #[comptime] vars: usize,
    #[comptime] dim: usize,
) {
    let i = ABSOLUTE_POS;
    if i < list.n as usize {
        let nu = list.n as usize;
        // (The code is written to `fail` directly: a variable initialised from an integer
        // constant stays a compile-time value in CubeCL, whatever the branches assign.)
        fail[i] = PASS;
        if active[i] != 0 && tags[i] == 0 {
            let mut c = Array::<F>::new(vars);
            #[unroll]
            for v in 0..vars {
                c[v] = candidate[v * nu + i];
            }
            if !Q::admissible::<F>(&c, vars, dim) {
                fail[i] = INADMISSIBLE;
            } else if comptime![criterion == ALWAYS] {
                fail[i] = FAIL;
            } else if leaves_range::<F>(input, candidate, list, i, consts[0], consts[1], vars) {
                fail[i] = FAIL;
            }
        }
    }
}

/// u2: `curvature[(i vars + v) dim + d]`, the second derivative of variable `v` along axis
/// `d` from the MLS coefficients of the basis function `second[d]`.
#[cube(launch_unchecked)]
fn curvature_kernel<F: Float>(
    input: &Array<F>,
    list: &Neighbours,
    coef: &Array<F>,
    second: &Array<u32>,
    out: &mut Array<F>,
    #[comptime] vars: usize,
    #[comptime] dim: usize,
) {
    let i = ABSOLUTE_POS;
    if i < list.n as usize {
        #[unroll]
        for v in 0..vars {
            #[unroll]
            for d in 0..dim {
                let row = second[d] as usize * list.slots as usize;
                out[(i * vars + v) * dim + d] = curvature::<F>(input, coef, row, list, i, v);
            }
        }
    }
}

/// u2: a failure (not an inadmissible state) passes when it is a smooth extremum. `consts`:
/// `delta`, `delta^3`, `h^2`.
#[cube(launch_unchecked)]
fn smooth_kernel<F: Float>(
    curvature: &Array<F>,
    list: &Neighbours,
    consts: &Array<F>,
    fail: &mut Array<u32>,
    #[comptime] vars: usize,
    #[comptime] dim: usize,
) {
    let i = ABSOLUTE_POS;
    if i < list.n as usize {
        if fail[i] == FAIL {
            if smooth_extremum::<F>(curvature, list, i, consts[2], consts[0], vars, dim) {
                fail[i] = PASS;
            }
        }
    }
}

/// Counts the failures into `counters[0]` and the inadmissible states into `counters[1]`.
#[cube(launch_unchecked)]
fn count_kernel(fail: &Array<u32>, own: &Array<u32>, counters: &mut Array<Atomic<u32>>) {
    let i = ABSOLUTE_POS;
    if i >= own[0] as usize && i < own[1] as usize {
        let f = fail[i];
        if f != PASS {
            counters[0].fetch_add(1u32);
        }
        if f == INADMISSIBLE {
            counters[1].fetch_add(1u32);
        }
    }
}

/// epd2: `cap[i]`, the lowest reduced order of the failing particles in reach.
#[cube(launch_unchecked)]
fn cap_kernel(fail: &Array<u32>, orders: &Array<u32>, list: &Neighbours, cap: &mut Array<u32>) {
    let i = ABSOLUTE_POS;
    if i < list.n as usize {
        cap[i] = halo_cap(fail, orders, list, i);
    }
}

/// The new orders by the halo `strategy`; the reductions counted into `counters[0]`.
#[cube(launch_unchecked)]
fn next_kernel(
    fail: &Array<u32>,
    orders: &Array<u32>,
    cap: &Array<u32>,
    list: &Neighbours,
    next: &mut Array<u32>,
    own: &Array<u32>,
    counters: &mut Array<Atomic<u32>>,
    #[comptime] strategy: u32,
) {
    let i = ABSOLUTE_POS;
    if i < list.n as usize {
        let order = orders[i];
        let o = next_order(fail, orders, cap, list, i, strategy);
        next[i] = o;
        if o < order && i >= own[0] as usize && i < own[1] as usize {
            counters[0].fetch_add(order - o);
        }
    }
}

/// `active[i]`: whether `i`'s or a neighbour's order changed.
#[cube(launch_unchecked)]
fn active_kernel(
    orders: &Array<u32>,
    next: &Array<u32>,
    list: &Neighbours,
    active: &mut Array<u32>,
) {
    let i = ABSOLUTE_POS;
    if i < list.n as usize {
        active[i] = select(order_changed(orders, next, list, i), 1u32, 0u32);
    }
}

/// MOOD's working state on a device: the current orders and the per-particle flags.
pub struct DeviceMood<F> {
    settings: MoodSettings,
    orders: DeviceArray<u32>,
    next: DeviceArray<u32>,
    cap: DeviceArray<u32>,
    fail: DeviceArray<u32>,
    active: DeviceArray<u32>,
    curvature: DeviceArray<F>,
    curvature_ready: bool,
    counters: DeviceArray<u32>,
    /// `delta`, `delta^3`, `h^2` (the MLS spacing squared), in the run's precision, and the
    /// spacing they were made for.
    consts: DeviceArray<F>,
    consts_spacing: f64,
    /// The MLS basis functions of the second derivatives along each axis (u2), if the fit has
    /// them.
    second: Option<DeviceArray<u32>>,
    rounds: Rounds,
}

impl<F: GpuFloat> DeviceMood<F> {
    /// MOOD with `settings` for `scheme` in `D` dimensions (the scheme's MLS fits give the
    /// u2 curvatures); an error for the settings the CPU refuses.
    pub fn new<const D: usize>(
        gpu: &Gpu,
        settings: MoodSettings,
        scheme: &DeviceMuscl<F>,
    ) -> Result<Self, GpuError> {
        // The CPU's checks (delta, iterations) and its delta for this precision.
        mote_cloud::mood::Mood::<F>::new(settings)?;
        let basis = mote_cloud::mls::Basis::<D>::new(scheme.mls().degree())?;
        let second = basis.second_derivatives().map(|t| t.map(|a| a as u32));
        let b = |name| gpu.output::<u32>(name, 0);
        let fixed = mote_core::Scaling::Fixed;
        Ok(Self {
            settings,
            orders: b("mood_order"),
            next: b("mood_next_order"),
            cap: b("mood_cap"),
            fail: b("mood_fail"),
            active: b("mood_active"),
            curvature: gpu
                .output::<F>("mood_curvature", 0)
                .with_scaling(mote_core::Scaling::PerParticle(1)),
            curvature_ready: false,
            counters: gpu.upload("mood_counters", &[0u32; 2]).with_scaling(fixed),
            consts: gpu.output::<F>("mood_constants", 3).with_scaling(fixed),
            consts_spacing: f64::NAN,
            second: second.map(|s| gpu.upload("mood_second", &s).with_scaling(fixed)),
            rounds: Rounds::new(&settings),
        })
    }

    /// Whether MOOD checks anything.
    pub fn is_active(&self) -> bool {
        self.settings.criterion != Criterion::None
    }

    /// The current per-particle orders.
    pub fn orders(&self) -> &DeviceArray<u32> {
        &self.orders
    }

    /// Which particles the last reduction asks to recompute (1) .
    pub fn active(&self) -> &DeviceArray<u32> {
        &self.active
    }

    /// The statistics so far, and resets them.
    pub fn take_stats(&mut self) -> MoodStats {
        self.rounds.take_stats()
    }

    /// Orders back to each particle's maximum, `min(max_orders[i], order)` (at least 1): the
    /// first stage of every step.
    pub fn reset(
        &mut self,
        gpu: &Gpu,
        max_orders: &DeviceArray<u32>,
        order: usize,
    ) -> Result<(), GpuError> {
        let n = max_orders.len();
        for b in [
            &mut self.orders,
            &mut self.next,
            &mut self.cap,
            &mut self.fail,
            &mut self.active,
        ] {
            b.resize(n)?;
        }
        gpu.check(max_orders, n)?;
        if n == 0 {
            return Ok(());
        }
        let cap = order.clamp(1, u8::MAX as usize) as u32;
        // Each unit reads and writes its own element below n.
        launch!(
            gpu,
            n,
            reset_kernel(max_orders.arg(), n as u32, cap, self.orders.arg())
        );
        Ok(())
    }

    /// Starts checking a stage: every particle is checked in the first round.
    pub fn begin_stage(&mut self, gpu: &Gpu) {
        gpu.fill_u32(&self.active, 1);
        self.curvature_ready = false;
        self.rounds.begin_stage();
    }

    /// Checks `candidate` against `input` (the variables end to end) for the particles marked
    /// active, reduces orders where it fails and marks the particles to recompute. `true` when
    /// some order changed (the caller then recomputes the slope of the active particles with
    /// [`DeviceMuscl::flux_pass`]). The round's decisions (when to stop, what counts) are the
    /// CPU's [`mote_cloud::mood::Mood::detect_and_reduce`]'s, on counters that come back.
    pub fn detect_and_reduce<const D: usize>(
        &mut self,
        gpu: &Gpu,
        scheme: &DeviceMuscl<F>,
        cloud: &DeviceCloud<F, D>,
        list: &DeviceNeighbours,
        input: &DeviceArray<F>,
        candidate: &DeviceArray<F>,
    ) -> Result<bool, GpuError> {
        let criterion = match self.settings.criterion {
            Criterion::None => return Ok(false),
            Criterion::Always => ALWAYS,
            Criterion::U1 => U1,
            Criterion::U2 => U2,
        };
        let n = cloud.len();
        let m = scheme.equation().variables(D);
        gpu.check(input, n * m)?;
        gpu.check(candidate, n * m)?;
        gpu.check(cloud.tags(), n)?;
        gpu.check(&self.orders, n)?;
        // On a rank's part of a split cloud (as on the CPU, `mote_cloud::mood`): every pass's
        // flags are refreshed in the halo from their owners, the counts are the own
        // particles', added over the ranks. A rank without particles launches nothing but takes
        // part in the exchanges and sums.
        let halo = list.halo();
        let list = list.checked(gpu, n)?;
        if n == 0 && halo.is_none() {
            return Ok(false);
        }
        let refresh = |a: &DeviceArray<u32>| halo.map_or(Ok(()), |h| h.exchange_rows(gpu, a, 1));
        let own = halo.map_or(0..n, |h| h.halo().own());
        let own = gpu.upload("mood_own", &[own.start as u32, own.end as u32]);
        let total = |c: [u64; 2]| {
            let mut c = c;
            if let Some(h) = halo {
                h.halo().sum(&mut c);
            }
            c
        };
        let h = scheme.mls().spacing();
        if h != self.consts_spacing {
            // The MLS spacing is known once the scheme is prepared.
            let delta = self.settings.delta_for::<F>();
            let consts = [delta, delta * delta * delta, h * h].map(F::cast);
            self.consts = gpu
                .upload("mood_constants", &consts)
                .with_scaling(mote_core::Scaling::Fixed);
            self.consts_spacing = h;
        }
        // 1. Detection.
        let detect = DetectLaunch {
            input,
            candidate,
            tags: cloud.tags(),
            active: &self.active,
            list,
            consts: &self.consts,
            fail: &self.fail,
            criterion,
            vars: m,
            dim: D,
        };
        if n > 0 {
            scheme.equation_ref().kernels::<F>().detect(gpu, &detect);
        }
        refresh(&self.fail)?;
        // 2. u2: accept smooth extrema (the curvatures once per stage).
        if criterion == U2
            && let Some(second) = &self.second
        {
            if !self.curvature_ready {
                self.curvature.resize(n * m * D)?;
                let coef = scheme.mls().coefficients();
                gpu.check(coef, scheme.mls().size() * list.slots())?;
                // Each unit reads its own slots and its neighbours' states and writes its own
                // `vars * dim` curvatures.
                launch!(
                    gpu,
                    n,
                    curvature_kernel::<F>(
                        input.arg(),
                        list.arg(),
                        coef.arg(),
                        second.arg(),
                        self.curvature.arg(),
                        m,
                        D
                    )
                );
                if let Some(h) = halo {
                    h.exchange_rows(gpu, &self.curvature, m * D)?;
                }
                self.curvature_ready = true;
            }
            // Each unit reads the curvatures of itself and its neighbours and writes its own
            // fail code.
            launch!(
                gpu,
                n,
                smooth_kernel::<F>(
                    self.curvature.arg(),
                    list.arg(),
                    self.consts.arg(),
                    self.fail.arg(),
                    m,
                    D
                )
            );
            refresh(&self.fail)?;
        }
        // 3. Count (atomic additions: exact in any order).
        gpu.fill_u32(&self.counters, 0);
        launch!(
            gpu,
            n,
            count_kernel(self.fail.arg(), own.arg(), self.counters.arg())
        );
        let counted = gpu.download(&self.counters)?;
        let [failures, inadmissible] = total([u64::from(counted[0]), u64::from(counted[1])]);
        if !self.rounds.detected(failures, inadmissible) {
            return Ok(false);
        }
        // 4. New orders, in the pull form: each unit reads its own and its neighbours' codes
        // and orders and writes its own cap, next order and flag.
        let strategy = self.settings.strategy.code();
        gpu.fill_u32(&self.counters, 0);
        let (fail, orders, cap, next) = (&self.fail, &self.orders, &self.cap, &self.next);
        if strategy == EPD2 {
            launch!(
                gpu,
                n,
                cap_kernel(fail.arg(), orders.arg(), list.arg(), cap.arg())
            );
            refresh(cap)?;
        }
        launch!(
            gpu,
            n,
            next_kernel(
                fail.arg(),
                orders.arg(),
                cap.arg(),
                list.arg(),
                next.arg(),
                own.arg(),
                self.counters.arg(),
                strategy
            )
        );
        refresh(next)?;
        launch!(
            gpu,
            n,
            active_kernel(orders.arg(), next.arg(), list.arg(), self.active.arg())
        );
        refresh(&self.active)?;
        let [reductions, _] = total([u64::from(gpu.download(&self.counters)?[0]), 0]);
        // Without reductions no particle is marked active: the caller recomputes nothing.
        if !self.rounds.reduced(failures, reductions) {
            return Ok(false);
        }
        std::mem::swap(&mut self.orders, &mut self.next);
        Ok(true)
    }
}

impl<F: GpuFloat> mote_core::Budgeted for DeviceMood<F> {
    fn buffers(&self) -> Vec<&dyn mote_core::BudgetedBuffer> {
        let mut v: Vec<&dyn mote_core::BudgetedBuffer> = vec![
            &self.orders,
            &self.next,
            &self.cap,
            &self.fail,
            &self.active,
            &self.curvature,
            &self.counters,
            &self.consts,
        ];
        if let Some(s) = &self.second {
            v.push(s);
        }
        v
    }
    fn buffers_mut(&mut self) -> Vec<&mut dyn mote_core::BudgetedBuffer> {
        let mut v: Vec<&mut dyn mote_core::BudgetedBuffer> = vec![
            &mut self.orders,
            &mut self.next,
            &mut self.cap,
            &mut self.fail,
            &mut self.active,
            &mut self.curvature,
            &mut self.counters,
            &mut self.consts,
        ];
        if let Some(s) = &mut self.second {
            v.push(s);
        }
        v
    }
}

/// One launch of MOOD's detection (the arrays checked by [`DeviceMood::detect_and_reduce`]).
pub(crate) struct DetectLaunch<'a, F: GpuFloat> {
    /// The stage's input and its candidate result.
    input: &'a DeviceArray<F>,
    candidate: &'a DeviceArray<F>,
    tags: &'a DeviceArray<u32>,
    active: &'a DeviceArray<u32>,
    list: ListArgs<'a>,
    /// `delta`, `delta^3`.
    consts: &'a DeviceArray<F>,
    fail: &'a DeviceArray<u32>,
    criterion: u32,
    vars: usize,
    dim: usize,
}

/// Launches MOOD's detection for the equation formulas `Q`: each unit reads its own and its
/// neighbours' entries and writes its own fail code.
pub(crate) fn launch_detect<F: GpuFloat, Q: DeviceFormulas>(gpu: &Gpu, l: &DetectLaunch<'_, F>) {
    launch!(
        gpu,
        l.list.n(),
        detect_kernel::<F, Q>(
            l.input.arg(),
            l.candidate.arg(),
            l.tags.arg(),
            l.active.arg(),
            l.list.arg(),
            l.consts.arg(),
            l.fail.arg(),
            l.criterion,
            l.vars,
            l.dim
        )
    );
}
