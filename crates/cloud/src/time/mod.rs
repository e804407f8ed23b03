//! Explicit Runge-Kutta time stepping driven by a Butcher tableau, and IMEX stepping ([`imex`])
//! driven by a pair of them.

pub mod imex;

pub use imex::{Imex, ImexTableau};

use mote_core::{Budgeted, BudgetedBuffer, Buffer, CpuBackend, Real, Scaling, SplitOutputs};

use crate::error::CloudError;

/// An explicit Butcher tableau: `k_s = f(u + dt sum_(l<s) a[s][l] k_l)`,
/// `u <- u + dt sum_s b[s] k_s`.
#[derive(Clone, Debug, PartialEq)]
pub struct Tableau {
    /// Name.
    pub name: &'static str,
    /// Order of accuracy.
    pub order: usize,
    /// Strictly lower-triangular stage coefficients.
    pub a: Vec<Vec<f64>>,
    /// Weights.
    pub b: Vec<f64>,
    /// Nodes (`c[s] = sum_l a[s][l]`).
    pub c: Vec<f64>,
}

impl Tableau {
    /// Forward Euler.
    pub fn euler() -> Self {
        Self {
            name: "euler",
            order: 1,
            a: vec![vec![]],
            b: vec![1.0],
            c: vec![0.0],
        }
    }

    /// Ralston's second-order method (minimal error bound).
    pub fn ralston2() -> Self {
        Self {
            name: "rk2",
            order: 2,
            a: vec![vec![], vec![2.0 / 3.0]],
            b: vec![0.25, 0.75],
            c: vec![0.0, 2.0 / 3.0],
        }
    }

    /// The strong-stability-preserving third-order method of Shu and Osher.
    pub fn ssp_rk3() -> Self {
        Self {
            name: "rk3",
            order: 3,
            a: vec![vec![], vec![1.0], vec![0.25, 0.25]],
            b: vec![1.0 / 6.0, 1.0 / 6.0, 2.0 / 3.0],
            c: vec![0.0, 1.0, 0.5],
        }
    }

    /// The classical fourth-order method.
    pub fn rk4() -> Self {
        Self {
            name: "rk4",
            order: 4,
            a: vec![vec![], vec![0.5], vec![0.0, 0.5], vec![0.0, 0.0, 1.0]],
            b: vec![1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0],
            c: vec![0.0, 0.5, 0.5, 1.0],
        }
    }

    /// By name: `euler`, `rk2`, `rk3`, `rk4`.
    pub fn by_name(name: &str) -> Result<Self, CloudError> {
        match name {
            "euler" => Ok(Self::euler()),
            "rk2" => Ok(Self::ralston2()),
            "rk3" => Ok(Self::ssp_rk3()),
            "rk4" => Ok(Self::rk4()),
            _ => Err(CloudError::invalid(
                "stepper",
                name,
                "euler, rk2, rk3 or rk4",
            )),
        }
    }

    /// Number of stages.
    pub fn stages(&self) -> usize {
        self.b.len()
    }
}

/// A time derivative: `rhs(state, out)` writes `du/dt` of `state` (one slice per variable).
pub type RhsFn<'a, R> = dyn FnMut(&[&[R]], Vec<&mut [R]>) + 'a;

/// What a Runge-Kutta step drives: the time derivative, and optionally constraints on every
/// stage state (boundary conditions) and an a-posteriori revision of each stage (MOOD).
pub trait StageOperator<R: Real> {
    /// `du/dt` of `u` at time `t` into `out`; `stage` is the stage's index in the tableau. An
    /// error (a full budgeted buffer when a moving cloud's neighbour search is redone) ends the
    /// step.
    fn rhs(
        &mut self,
        stage: usize,
        t: f64,
        u: &[&[R]],
        out: Vec<&mut [R]>,
    ) -> Result<(), CloudError>;

    /// Imposes constraints on a state at time `t` (boundary conditions): called on every stage
    /// state and on the new state.
    fn constrain(&mut self, _t: f64, _u: &mut [&mut [R]]) {}

    /// Whether [`revise`](Self::revise) does anything (when not, the final update is written in
    /// place, saving a copy).
    fn revises(&self) -> bool {
        false
    }

    /// After the slope of `stage` (evaluated at `input`, time `t`): checks `candidate`, the state
    /// the slope leads to (the next stage's state, or the new state after the last stage), and
    /// may recompute `slope` for some particles. Returns `true` when it changed the slope: the
    /// stepper then forms the candidate again and calls again.
    fn revise(
        &mut self,
        _stage: usize,
        _t: f64,
        _input: &[&[R]],
        _candidate: &[&[R]],
        _slope: Vec<&mut [R]>,
    ) -> Result<bool, CloudError> {
        Ok(false)
    }

    /// The split between ranks whose part of the cloud this operator computes (its passes
    /// compute the own particles and refresh the halo): element-wise work a stepper does per
    /// particle with side effects (a source's solves, which count positivity floors and fail
    /// by particle) then runs on the own particles and the halo takes the owners' results.
    fn halo(&self) -> Option<&crate::halo::Halo> {
        None
    }
}

/// A plain closure as a [`StageOperator`].
struct Closure<'r, 'a, R>(&'r mut RhsFn<'a, R>);

impl<R: Real> StageOperator<R> for Closure<'_, '_, R> {
    fn rhs(
        &mut self,
        _stage: usize,
        _t: f64,
        u: &[&[R]],
        out: Vec<&mut [R]>,
    ) -> Result<(), CloudError> {
        (self.0)(u, out);
        Ok(())
    }
}

/// The stepper's storage: one array per stage slope and variable, and two stage states per
/// variable (separate buffers, never arrays of arrays): the state a slope is evaluated at and
/// the candidate it leads to, which a revision compares.
pub struct RungeKutta<R: Real> {
    tableau: Tableau,
    slopes: Vec<Vec<Buffer<R>>>,
    stage: [Vec<Buffer<R>>; 2],
    /// Wall seconds in the stage-state and final-update passes since the last reset.
    seconds: [f64; 2],
}

impl<R: Real> RungeKutta<R> {
    /// A stepper for `variables` variables.
    pub fn new(tableau: Tableau, variables: usize) -> Self {
        let slopes = (0..tableau.stages())
            .map(|_| {
                (0..variables)
                    .map(|_| Buffer::new("rk_slope", Scaling::PerParticle(1)))
                    .collect()
            })
            .collect();
        let stage = std::array::from_fn(|_| {
            (0..variables)
                .map(|_| Buffer::new("rk_stage", Scaling::PerParticle(1)))
                .collect()
        });
        Self {
            tableau,
            slopes,
            stage,
            seconds: [0.0; 2],
        }
    }

    /// Seconds spent in the stage-state and final-update passes since the last call, and resets
    /// them.
    pub fn take_seconds(&mut self) -> [f64; 2] {
        std::mem::take(&mut self.seconds)
    }

    /// The tableau.
    pub fn tableau(&self) -> &Tableau {
        &self.tableau
    }

    /// Advances `u` (one slice per variable) by `dt`; `rhs(stage_state, out)` evaluates the time
    /// derivative.
    pub fn step(
        &mut self,
        u: &mut [&mut [R]],
        dt: f64,
        backend: CpuBackend,
        rhs: &mut RhsFn<'_, R>,
    ) -> Result<(), CloudError> {
        self.advance(u, 0.0, dt, backend, &mut Closure(rhs))
    }

    /// Advances `u` from time `t` by `dt` with the stage operator `op`: [`runge_kutta`] over
    /// this stepper's buffers.
    pub fn advance(
        &mut self,
        u: &mut [&mut [R]],
        t: f64,
        dt: f64,
        backend: CpuBackend,
        op: &mut dyn StageOperator<R>,
    ) -> Result<(), CloudError> {
        let n = u.first().map_or(0, |x| x.len());
        for b in self
            .slopes
            .iter_mut()
            .chain(self.stage.iter_mut())
            .flatten()
        {
            b.resize(n, R::zero())?;
        }
        let tableau = self.tableau.clone();
        let mut stages = HostStages {
            u,
            slopes: &mut self.slopes,
            stage: &mut self.stage,
            seconds: &mut self.seconds,
            backend,
            op,
        };
        runge_kutta(&tableau, t, dt, &mut stages)
    }
}

/// Where a stage's input is: the step's state, or one of the two stage buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StageState {
    /// The state the step started from.
    State,
    /// Stage buffer 0 or 1.
    Buffer(usize),
}

/// The storage and passes of one explicit Runge-Kutta step, as a backend provides them: the
/// state `u`, one slope per stage and two stage buffers (the state a slope is evaluated at and
/// the candidate it leads to). [`runge_kutta`] is the one stage loop that drives them, on the
/// CPU (`RungeKutta`) and on the device (`mote_gpu::DeviceSimulation`).
pub trait RkStages {
    /// What a pass can fail with.
    type Error;
    /// The slope of `stage` (at time `t`) from the state in `input`.
    fn rhs(&mut self, stage: usize, t: f64, input: StageState) -> Result<(), Self::Error>;
    /// Stage buffer `target` = `u + sum_l c_l slope_l`, the terms added in the order given
    /// (`(l, c_l)`, `c_l` the tableau's coefficient times the step).
    fn combine(&mut self, target: usize, terms: &[(usize, f64)]) -> Result<(), Self::Error>;
    /// Imposes the constraints (boundary conditions) at time `t` on stage buffer `target`
    /// (`None`: on the state). The default imposes none.
    fn constrain(&mut self, _t: f64, _target: Option<usize>) -> Result<(), Self::Error> {
        Ok(())
    }
    /// Whether stages are revised (MOOD): the new state is then the last candidate, formed
    /// and checked like a stage. The default revises nothing.
    fn revises(&self) -> bool {
        false
    }
    /// Checks candidate `target` (formed from the slope of `stage`, evaluated at `input` at
    /// time `t`) and recomputes the slope where it must; `true`: the slope changed, and the
    /// candidate is formed again.
    fn revise(
        &mut self,
        _stage: usize,
        _t: f64,
        _input: StageState,
        _target: usize,
    ) -> Result<bool, Self::Error> {
        Ok(false)
    }
    /// The state takes stage buffer `k` (a revised step's last candidate).
    fn accept(&mut self, k: usize) -> Result<(), Self::Error>;
    /// `u += sum_s w_s slope_s` (the weights times the step, one per stage).
    fn update(&mut self, weights: &[f64]) -> Result<(), Self::Error>;
}

/// One explicit Runge-Kutta step of `tableau` from time `t` by `dt`: the stage loop, written
/// once for every backend. Each stage's slope is evaluated at the previous candidate; with a
/// revising operator each candidate (and the new state, formed as a last candidate) is checked
/// and re-formed until the operator accepts it; without, the new state is updated in place.
pub fn runge_kutta<S: RkStages + ?Sized>(
    tableau: &Tableau,
    t: f64,
    dt: f64,
    b: &mut S,
) -> Result<(), S::Error> {
    let revises = b.revises();
    let stages = tableau.stages();
    // Which buffer holds the current stage state (None: the state itself).
    let mut input: Option<usize> = None;
    let at = |input: Option<usize>| input.map_or(StageState::State, StageState::Buffer);
    for s in 0..stages {
        let t_s = t + tableau.c[s] * dt;
        b.rhs(s, t_s, at(input))?;
        let last = s + 1 == stages;
        if last && !revises {
            break;
        }
        // The candidate: the next stage's state, or the new state.
        let (row, t_next) = if last {
            (&tableau.b, t + dt)
        } else {
            (&tableau.a[s + 1], t + tableau.c[s + 1] * dt)
        };
        let terms: Vec<(usize, f64)> = row
            .iter()
            .enumerate()
            .filter(|(_, a)| **a != 0.0)
            .map(|(l, &a)| (l, a * dt))
            .collect();
        let target = input.map_or(0, |k| 1 - k);
        loop {
            b.combine(target, &terms)?;
            b.constrain(t_next, Some(target))?;
            if !revises || !b.revise(s, t_s, at(input), target)? {
                break;
            }
        }
        input = Some(target);
    }
    if revises {
        // The last candidate is the new state.
        b.accept(input.expect("at least one stage"))
    } else {
        let weights: Vec<f64> = tableau.b.iter().map(|&w| w * dt).collect();
        b.update(&weights)?;
        b.constrain(t + dt, None)
    }
}

/// [`RungeKutta`]'s buffers and a [`StageOperator`] as [`RkStages`].
struct HostStages<'a, 'u, 'o, R: Real> {
    u: &'a mut [&'u mut [R]],
    slopes: &'a mut [Vec<Buffer<R>>],
    stage: &'a mut [Vec<Buffer<R>>; 2],
    seconds: &'a mut [f64; 2],
    backend: CpuBackend,
    op: &'a mut (dyn StageOperator<R> + 'o),
}

/// The arrays of stage state `s`: the state `u` or a stage buffer.
fn state_of<'b, R: Real>(
    u: &'b [&mut [R]],
    stage: &'b [Vec<Buffer<R>>; 2],
    s: StageState,
) -> Vec<&'b [R]> {
    match s {
        StageState::State => u.iter().map(|x| &**x).collect(),
        StageState::Buffer(k) => stage[k].iter().map(|b| b.as_slice()).collect(),
    }
}

impl<R: Real> RkStages for HostStages<'_, '_, '_, R> {
    type Error = CloudError;

    fn rhs(&mut self, stage: usize, t: f64, input: StageState) -> Result<(), CloudError> {
        let state = state_of(self.u, self.stage, input);
        let out: Vec<&mut [R]> = self.slopes[stage]
            .iter_mut()
            .map(|b| b.as_mut_slice())
            .collect();
        self.op.rhs(stage, t, &state, out)
    }

    fn combine(&mut self, target: usize, terms: &[(usize, f64)]) -> Result<(), CloudError> {
        let clock = std::time::Instant::now();
        let coeffs: Vec<(usize, R)> = terms.iter().map(|&(l, c)| (l, R::cast(c))).collect();
        let out: Vec<&mut [R]> = self.stage[target]
            .iter_mut()
            .map(|b| b.as_mut_slice())
            .collect();
        let u: Vec<&[R]> = self.u.iter().map(|x| &**x).collect();
        let slopes = &*self.slopes;
        self.backend.for_each_block(out, 1024, |first, mut blk| {
            for v in 0..u.len() {
                for k in 0..SplitOutputs::len(&blk) {
                    let i = first + k;
                    let mut x = u[v][i];
                    for &(l, c) in &coeffs {
                        x += c * slopes[l][v].as_slice()[i];
                    }
                    blk[v][k] = x;
                }
            }
        });
        self.seconds[0] += clock.elapsed().as_secs_f64();
        Ok(())
    }

    fn constrain(&mut self, t: f64, target: Option<usize>) -> Result<(), CloudError> {
        match target {
            Some(k) => {
                let mut x: Vec<&mut [R]> =
                    self.stage[k].iter_mut().map(|b| b.as_mut_slice()).collect();
                self.op.constrain(t, &mut x);
            }
            None => self.op.constrain(t, self.u),
        }
        Ok(())
    }

    fn revises(&self) -> bool {
        self.op.revises()
    }

    fn revise(
        &mut self,
        stage: usize,
        t: f64,
        input: StageState,
        target: usize,
    ) -> Result<bool, CloudError> {
        let input = state_of(self.u, self.stage, input);
        let candidate = state_of(self.u, self.stage, StageState::Buffer(target));
        let slope: Vec<&mut [R]> = self.slopes[stage]
            .iter_mut()
            .map(|b| b.as_mut_slice())
            .collect();
        self.op.revise(stage, t, &input, &candidate, slope)
    }

    fn accept(&mut self, k: usize) -> Result<(), CloudError> {
        let clock = std::time::Instant::now();
        for (x, b) in self.u.iter_mut().zip(&self.stage[k]) {
            x.copy_from_slice(b.as_slice());
        }
        self.seconds[1] += clock.elapsed().as_secs_f64();
        Ok(())
    }

    fn update(&mut self, weights: &[f64]) -> Result<(), CloudError> {
        let clock = std::time::Instant::now();
        // Every stage's term, zero weights included (the summation the results were
        // validated with).
        let weights: Vec<R> = weights.iter().map(|&w| R::cast(w)).collect();
        let slopes = &*self.slopes;
        let m = self.u.len();
        let out: Vec<&mut [R]> = self.u.iter_mut().map(|x| &mut **x).collect();
        self.backend.for_each_block(out, 1024, |first, mut blk| {
            for v in 0..m {
                for k in 0..SplitOutputs::len(&blk) {
                    let i = first + k;
                    let mut x = blk[v][k];
                    for (s, &w) in weights.iter().enumerate() {
                        x += w * slopes[s][v].as_slice()[i];
                    }
                    blk[v][k] = x;
                }
            }
        });
        self.seconds[1] += clock.elapsed().as_secs_f64();
        Ok(())
    }
}

impl<R: Real> Budgeted for RungeKutta<R> {
    fn buffers(&self) -> Vec<&dyn BudgetedBuffer> {
        self.slopes
            .iter()
            .flatten()
            .chain(self.stage.iter().flatten())
            .map(|b| b as &dyn BudgetedBuffer)
            .collect()
    }
    fn buffers_mut(&mut self) -> Vec<&mut dyn BudgetedBuffer> {
        self.slopes
            .iter_mut()
            .flatten()
            .chain(self.stage.iter_mut().flatten())
            .map(|b| b as &mut dyn BudgetedBuffer)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// du/dt = -u from u = 1 to t = 1; error against exp(-1) at two step sizes.
    fn order_of(t: Tableau) -> f64 {
        let err = |steps: usize| {
            let mut rk = RungeKutta::<f64>::new(t.clone(), 1);
            let mut u = [1.0f64; 3];
            let dt = 1.0 / steps as f64;
            for _ in 0..steps {
                let mut view = [&mut u[..]];
                rk.step(&mut view, dt, CpuBackend::Serial, &mut |x, mut out| {
                    for i in 0..x[0].len() {
                        out[0][i] = -x[0][i];
                    }
                })
                .unwrap();
            }
            (u[0] - (-1.0f64).exp()).abs()
        };
        (err(20) / err(40)).log2()
    }

    #[test]
    fn tableaux_have_their_orders() {
        for t in [
            Tableau::euler(),
            Tableau::ralston2(),
            Tableau::ssp_rk3(),
            Tableau::rk4(),
        ] {
            let p = order_of(t.clone());
            assert!((p - t.order as f64).abs() < 0.1, "{}: {p}", t.name);
            for s in 0..t.stages() {
                assert!((t.a[s].iter().sum::<f64>() - t.c[s]).abs() < 1e-15);
            }
            assert!((t.b.iter().sum::<f64>() - 1.0).abs() < 1e-15);
        }
        assert!(Tableau::by_name("rk5").is_err());
    }
}
