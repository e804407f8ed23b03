//! MOOD: a-posteriori order reduction.
//!
//! After each Runge-Kutta stage the candidate state (the next stage's state, or the new state)
//! is checked particle by particle. Where it fails, the particle's reconstruction order drops by
//! one (never below 1) and the stage's slope is recomputed for the particles whose interfaces
//! changed: those whose order changed and their neighbours (the interface order of a pair is
//! the smaller of the two). The check and the recomputation repeat until nothing fails, nothing
//! more can be reduced, or [`MoodSettings::max_iterations`] is reached (counted in
//! [`MoodStats::capped_stages`]). Orders are reset to each particle's maximum at the first stage
//! of every step.
//!
//! **Criteria** ([`Criterion`]): `none` (MOOD off), `always` (every particle fails: a test of
//! the machinery), `u1` (relaxed discrete maximum principle: the candidate must lie within the
//! range of the particle's and its neighbours' values at the stage's input, widened by
//! `delta * max(1, |u_min|, |u_max|)`; skipped where the range is below `delta^3`) and `u2` (`u1`,
//! but a violation is accepted as a smooth extremum when, along every axis, the second
//! derivatives of the particle and its neighbours have one sign and differ by at most a factor
//! of two). Physical admissibility ([`Equation::admissible`]: finite values; positive density
//! and pressure for Euler) is checked under every criterion but `none`.
//!
//! **Halo strategies** ([`HaloStrategy`]): `epd0` (only failing particles drop), `epd1` /
//! `epd2` (particles within one / two neighbour rings of a failing particle are also capped at its
//! new order), `strict` (failing particles and all their neighbours drop by one).
//!
//! Every step is a pull-form pass over particles, so the result does not depend on the thread
//! count or the launch order.
//!
//! **delta** scales with the precision: by default `max(1e-6, 1000 eps)`, i.e. 1e-6 in `f64`
//! and 1.2e-4 in `f32`, where a fixed 1e-6 would sit at round-off level and trigger spurious
//! reductions on smooth solutions.

use mote_core::{Budgeted, BudgetedBuffer, Buffer, CpuBackend, Real, Scaling, SplitOutputs};

use crate::cloud::{Geometry, INTERIOR, MAX_VARIABLES};
use crate::equations::Equation;
use crate::error::CloudError;
use crate::formula::mood_passes::{self as passes, FAIL, INADMISSIBLE, PASS};
use crate::formula::pass::Neighbours;
use crate::mls::Mls;
use crate::search::{NeighbourList, SlotLayout};

/// What makes a candidate fail.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Criterion {
    /// MOOD off.
    #[default]
    None,
    /// Every particle fails (tests the reduction machinery: ends at order 1 everywhere).
    Always,
    /// Relaxed discrete maximum principle.
    U1,
    /// `u1` with smooth extrema accepted.
    U2,
}

/// Which particles besides the failing ones are reduced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HaloStrategy {
    /// Only the failing particles.
    Epd0,
    /// Also capped: particles within one neighbour ring of a failing particle.
    #[default]
    Epd1,
    /// Also capped: particles within two neighbour rings.
    Epd2,
    /// Failing particles and every neighbour drop by one.
    Strict,
}

/// MOOD settings.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MoodSettings {
    /// The detection criterion.
    pub criterion: Criterion,
    /// The halo strategy.
    pub strategy: HaloStrategy,
    /// The relaxation `delta`; `None`: `max(1e-6, 1000 eps)` of the run's precision.
    pub delta: Option<f64>,
    /// Detect-and-recompute rounds per stage at most.
    pub max_iterations: usize,
}

impl Default for MoodSettings {
    fn default() -> Self {
        Self {
            criterion: Criterion::None,
            strategy: HaloStrategy::Epd1,
            delta: None,
            max_iterations: 20,
        }
    }
}

impl HaloStrategy {
    /// The strategy's code in the per-particle passes.
    pub fn code(self) -> u32 {
        use crate::formula::mood_passes::{EPD0, EPD1, EPD2, STRICT};
        match self {
            HaloStrategy::Epd0 => EPD0,
            HaloStrategy::Epd1 => EPD1,
            HaloStrategy::Epd2 => EPD2,
            HaloStrategy::Strict => STRICT,
        }
    }
}

impl MoodSettings {
    /// `criterion` with `strategy` and the defaults otherwise.
    pub fn new(criterion: Criterion, strategy: HaloStrategy) -> Self {
        Self {
            criterion,
            strategy,
            ..Self::default()
        }
    }

    /// By names: `none|always|u1|u2` and `epd0|epd1|epd2|strict`.
    pub fn by_name(criterion: &str, strategy: &str) -> Result<Self, CloudError> {
        let criterion = match criterion {
            "none" => Criterion::None,
            "always" => Criterion::Always,
            "u1" => Criterion::U1,
            "u2" => Criterion::U2,
            _ => {
                return Err(CloudError::invalid(
                    "MOOD criterion",
                    criterion,
                    "none, always, u1 or u2",
                ));
            }
        };
        let strategy = match strategy {
            "epd0" => HaloStrategy::Epd0,
            "epd1" => HaloStrategy::Epd1,
            "epd2" => HaloStrategy::Epd2,
            "strict" => HaloStrategy::Strict,
            _ => {
                return Err(CloudError::invalid(
                    "MOOD strategy",
                    strategy,
                    "epd0, epd1, epd2 or strict",
                ));
            }
        };
        Ok(Self::new(criterion, strategy))
    }

    /// The relaxation delta in precision `R`.
    pub fn delta_for<R: Real>(&self) -> f64 {
        self.delta
            .unwrap_or_else(|| (1000.0 * R::epsilon().as_f64()).max(1e-6))
    }

    fn validate(&self) -> Result<(), CloudError> {
        if let Some(d) = self.delta
            && !(d.is_finite() && d > 0.0)
        {
            return Err(CloudError::invalid("MOOD delta", d, "a positive number"));
        }
        if self.max_iterations == 0 {
            return Err(CloudError::invalid("MOOD max_iterations", 0, "at least 1"));
        }
        Ok(())
    }
}

/// What MOOD did since the last [`Mood::take_stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MoodStats {
    /// Stages checked.
    pub stages: u64,
    /// Detect-and-recompute rounds that reduced something.
    pub iterations: u64,
    /// Order reductions, summed over particles (a particle dropping two orders counts two).
    pub reductions: u64,
    /// Particles that failed the criterion (summed over rounds).
    pub failures: u64,
    /// Of those, failures of physical admissibility.
    pub inadmissible: u64,
    /// Stages that reached the iteration limit.
    pub capped_stages: u64,
    /// Failing particles left when nothing more could be reduced (already at order 1).
    pub unresolved: u64,
}

impl MoodStats {
    /// Adds the counts of `other` (statistics of later steps) to these.
    pub fn add(&mut self, other: &MoodStats) {
        self.stages += other.stages;
        self.iterations += other.iterations;
        self.reductions += other.reductions;
        self.failures += other.failures;
        self.inadmissible += other.inadmissible;
        self.capped_stages += other.capped_stages;
        self.unresolved += other.unresolved;
    }
}

/// MOOD's round control, the same for every backend: a backend runs the detection and the
/// reduction as its own passes and reports their counts here, which decides whether the stage
/// goes on and keeps the statistics.
#[derive(Clone, Debug)]
pub struct Rounds {
    max_iterations: usize,
    round: usize,
    stats: MoodStats,
}

impl Rounds {
    /// Rounds of at most `settings.max_iterations` reductions per stage.
    pub fn new(settings: &MoodSettings) -> Self {
        Self {
            max_iterations: settings.max_iterations,
            round: 0,
            stats: MoodStats::default(),
        }
    }

    /// A stage starts: its first round.
    pub fn begin_stage(&mut self) {
        self.round = 0;
        self.stats.stages += 1;
    }

    /// After a detection with `failures` failing particles, `inadmissible` of them for
    /// admissibility: whether to reduce orders (something failed and the stage has rounds left).
    pub fn detected(&mut self, failures: u64, inadmissible: u64) -> bool {
        self.stats.failures += failures;
        self.stats.inadmissible += inadmissible;
        if failures == 0 {
            return false;
        }
        if self.round >= self.max_iterations {
            self.stats.capped_stages += 1;
            return false;
        }
        true
    }

    /// After a reduction of `reductions` orders for `failures` failing particles: whether the
    /// orders changed (the caller recomputes and checks again), else the failures are unresolved.
    pub fn reduced(&mut self, failures: u64, reductions: u64) -> bool {
        if reductions == 0 {
            self.stats.unresolved += failures;
            return false;
        }
        self.round += 1;
        self.stats.iterations += 1;
        self.stats.reductions += reductions;
        true
    }

    /// The statistics so far, and resets them.
    pub fn take_stats(&mut self) -> MoodStats {
        std::mem::take(&mut self.stats)
    }

    /// The statistics so far.
    pub fn stats(&self) -> MoodStats {
        self.stats
    }
}

/// MOOD's working state: the current orders and per-particle flags.
pub struct Mood<R: Real> {
    settings: MoodSettings,
    orders: Buffer<u8>,
    next: Buffer<u8>,
    cap: Buffer<u8>,
    fail: Buffer<u8>,
    active: Buffer<u8>,
    /// `curvature[(i m + v) D + d]`: second derivative of variable `v` along axis `d`.
    curvature: Buffer<R>,
    curvature_ready: bool,
    rounds: Rounds,
}

impl<R: Real> Mood<R> {
    /// MOOD with `settings` (an error for a non-positive delta or zero iterations).
    pub fn new(settings: MoodSettings) -> Result<Self, CloudError> {
        settings.validate()?;
        let b = |name| Buffer::new(name, Scaling::PerParticle(1));
        Ok(Self {
            rounds: Rounds::new(&settings),
            settings,
            orders: b("mood_order"),
            next: b("mood_next_order"),
            cap: b("mood_cap"),
            fail: b("mood_fail"),
            active: b("mood_active"),
            curvature: Buffer::new("mood_curvature", Scaling::PerParticle(1)),
            curvature_ready: false,
        })
    }

    /// The settings.
    pub fn settings(&self) -> &MoodSettings {
        &self.settings
    }

    /// Whether MOOD checks anything.
    pub fn is_active(&self) -> bool {
        self.settings.criterion != Criterion::None
    }

    /// The current per-particle orders.
    pub fn orders(&self) -> &[u8] {
        self.orders.as_slice()
    }

    /// Which particles the last reduction asks to recompute.
    pub fn active(&self) -> &[u8] {
        self.active.as_slice()
    }

    /// The statistics so far, and resets them.
    pub fn take_stats(&mut self) -> MoodStats {
        self.rounds.take_stats()
    }

    /// The statistics so far.
    pub fn stats(&self) -> MoodStats {
        self.rounds.stats()
    }

    /// Orders back to each particle's maximum, `min(max_orders[i], order)`: the first stage of
    /// every step.
    pub fn reset(&mut self, max_orders: &[u8], order: usize) -> Result<(), CloudError> {
        let n = max_orders.len();
        for b in [
            &mut self.orders,
            &mut self.next,
            &mut self.cap,
            &mut self.fail,
            &mut self.active,
        ] {
            b.resize(n, 0)?;
        }
        let cap = order.min(u8::MAX as usize) as u8;
        for (o, &m) in self.orders.as_mut_slice().iter_mut().zip(max_orders) {
            *o = m.clamp(1, cap.max(1));
        }
        Ok(())
    }

    /// Starts checking a stage: every particle is checked in the first round.
    pub fn begin_stage(&mut self) {
        self.active.as_mut_slice().fill(1);
        self.curvature_ready = false;
        self.rounds.begin_stage();
    }

    /// Checks `candidate` against `input` for the particles marked active, reduces orders
    /// where it fails, and marks the particles to recompute. `true` when some order changed
    /// (the caller then recomputes the slope of the active particles). Each pass is one of
    /// the per-particle functions the device runs too (`formulas/mood_passes.rs`).
    #[allow(clippy::too_many_arguments)]
    pub fn detect_and_reduce<const D: usize, E: Equation<R, D>, L: SlotLayout>(
        &mut self,
        equation: &E,
        geometry: &Geometry<'_, R, D>,
        list: &NeighbourList<L>,
        mls: &Mls<R, D>,
        input: &[&[R]],
        candidate: &[&[R]],
        backend: CpuBackend,
    ) -> Result<bool, CloudError> {
        if !self.is_active() {
            return Ok(false);
        }
        let m = input.len();
        let delta = self.settings.delta_for::<R>();
        let (delta_r, tiny) = (R::cast(delta), R::cast(delta * delta * delta));
        let criterion = self.settings.criterion;
        let view = Neighbours::of(list);
        let tags = geometry.tags;
        // 1. Detection (u1 and admissibility). Every pass below writes one value per particle
        // from its neighbours' inputs: on several ranks each computes its range of blocks and
        // the ranges are gathered (`scheme::on_own_blocks`), so every rank holds the one
        // process's flags and orders.
        {
            let active = self.active.as_slice();
            crate::scheme::on_own_blocks(list.halo(), self.fail.as_mut_slice(), 1, |start, own| {
                backend.for_each_block(own, 1024, |first, out| {
                    let first = start + first;
                    let mut c = [R::zero(); MAX_VARIABLES];
                    for k in 0..SplitOutputs::len(&out) {
                        let i = first + k;
                        out[k] = if active[i] == 0 || tags[i] != INTERIOR {
                            PASS
                        } else {
                            for v in 0..m {
                                c[v] = candidate[v][i];
                            }
                            if !equation.admissible(&c[..m]) {
                                INADMISSIBLE
                            } else if criterion == Criterion::Always
                                || passes::leaves_range(
                                    input, candidate, &view, i, delta_r, tiny, m,
                                )
                            {
                                FAIL
                            } else {
                                PASS
                            }
                        };
                    }
                })
            });
        }
        // The counts are over every particle: a split cloud's ranks count their own and add.
        let halo = list.halo();
        let counted = halo.map_or(0..self.fail.as_slice().len(), |h| h.own());
        let total = |mut c: [u64; 2]| {
            if let Some(h) = halo {
                h.sum(&mut c);
            }
            c
        };
        let [failures, _] = total([
            self.fail.as_slice()[counted.clone()]
                .iter()
                .filter(|&&f| f != PASS)
                .count() as u64,
            0,
        ]);
        if failures == 0 {
            return Ok(false);
        }
        // 2. u2: accept smooth extrema (never inadmissible states).
        if criterion == Criterion::U2
            && self.curvature_ready_or_compute(mls, list, input, backend)?
        {
            let curvature = self.curvature.as_slice();
            let h = mls.spacing();
            let h2 = R::cast(h * h);
            crate::scheme::on_own_blocks(list.halo(), self.fail.as_mut_slice(), 1, |start, own| {
                backend.for_each_block(own, 1024, |first, out| {
                    let first = start + first;
                    for k in 0..SplitOutputs::len(&out) {
                        let i = first + k;
                        if out[k] == FAIL
                            && passes::smooth_extremum(curvature, &view, i, h2, delta_r, m, D)
                        {
                            out[k] = PASS;
                        }
                    }
                })
            });
        }
        let fail = self.fail.as_slice();
        let [failures, inadmissible] = total([
            fail[counted.clone()].iter().filter(|&&f| f != PASS).count() as u64,
            fail[counted.clone()]
                .iter()
                .filter(|&&f| f == INADMISSIBLE)
                .count() as u64,
        ]);
        if !self.rounds.detected(failures, inadmissible) {
            return Ok(false);
        }
        // 3. New orders, in the pull form.
        let strategy = self.settings.strategy.code();
        let orders = self.orders.as_slice();
        if strategy == passes::EPD2 {
            crate::scheme::on_own_blocks(list.halo(), self.cap.as_mut_slice(), 1, |start, own| {
                backend.for_each_block(own, 1024, |first, out| {
                    let first = start + first;
                    for k in 0..SplitOutputs::len(&out) {
                        out[k] = passes::halo_cap(fail, orders, &view, first + k);
                    }
                })
            });
        }
        let cap = self.cap.as_slice();
        crate::scheme::on_own_blocks(list.halo(), self.next.as_mut_slice(), 1, |start, own| {
            backend.for_each_block(own, 1024, |first, out| {
                let first = start + first;
                for k in 0..SplitOutputs::len(&out) {
                    out[k] = passes::next_order(fail, orders, cap, &view, first + k, strategy);
                }
            })
        });
        let next = self.next.as_slice();
        let [reductions, _] = total([
            orders[counted.clone()]
                .iter()
                .zip(&next[counted.clone()])
                .map(|(&a, &b)| u64::from(a - b.min(a)))
                .sum(),
            0,
        ]);
        if !self.rounds.reduced(failures, reductions) {
            return Ok(false);
        }
        crate::scheme::on_own_blocks(list.halo(), self.active.as_mut_slice(), 1, |start, own| {
            backend.for_each_block(own, 1024, |first, out| {
                let first = start + first;
                for k in 0..SplitOutputs::len(&out) {
                    out[k] = u8::from(passes::order_changed(orders, next, &view, first + k));
                }
            })
        });
        std::mem::swap(&mut self.orders, &mut self.next);
        Ok(true)
    }

    /// Computes the per-axis second derivatives of `input` once per stage (u2). `false` when the
    /// MLS fit has no second-degree terms (order-1 schemes: nothing to reduce anyway).
    fn curvature_ready_or_compute<const D: usize, L: SlotLayout>(
        &mut self,
        mls: &Mls<R, D>,
        list: &NeighbourList<L>,
        input: &[&[R]],
        backend: CpuBackend,
    ) -> Result<bool, CloudError> {
        let Some(terms) = mls.basis().second_derivatives() else {
            return Ok(false);
        };
        if self.curvature_ready {
            return Ok(true);
        }
        let m = input.len();
        let n = input.first().map_or(0, |x| x.len());
        self.curvature.resize(n * m * D, R::zero())?;
        let view = Neighbours::of(list);
        let coeffs: Vec<&[R]> = terms.iter().map(|&a| mls.coefficients(a)).collect();
        // Split between ranks as the other per-particle passes are.
        crate::scheme::on_own_blocks(
            list.halo(),
            self.curvature.as_mut_slice(),
            m * D,
            |start, own| {
                backend.for_each_block(mote_core::Chunks::new(own, m * D), 256, |first, mut out| {
                    for k in 0..SplitOutputs::len(&out) {
                        let i = start + first + k;
                        let rec = out.chunk_mut(k);
                        for v in 0..m {
                            for d in 0..D {
                                rec[v * D + d] =
                                    passes::curvature(input, coeffs[d], 0, &view, i, v);
                            }
                        }
                    }
                })
            },
        );
        self.curvature_ready = true;
        Ok(true)
    }
}

impl<R: Real> Budgeted for Mood<R> {
    fn buffers(&self) -> Vec<&dyn BudgetedBuffer> {
        vec![
            &self.orders,
            &self.next,
            &self.cap,
            &self.fail,
            &self.active,
            &self.curvature,
        ]
    }
    fn buffers_mut(&mut self) -> Vec<&mut dyn BudgetedBuffer> {
        vec![
            &mut self.orders,
            &mut self.next,
            &mut self.cap,
            &mut self.fail,
            &mut self.active,
            &mut self.curvature,
        ]
    }
}
