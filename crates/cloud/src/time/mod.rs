//! Explicit Runge-Kutta time stepping driven by a Butcher tableau.

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

/// The stepper's storage: one array per stage slope and variable, and a stage state per
/// variable (separate buffers, never arrays of arrays).
pub struct RungeKutta<R: Real> {
    tableau: Tableau,
    slopes: Vec<Vec<Buffer<R>>>,
    stage: Vec<Buffer<R>>,
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
        let stage = (0..variables)
            .map(|_| Buffer::new("rk_stage", Scaling::PerParticle(1)))
            .collect();
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
        let n = u.first().map_or(0, |x| x.len());
        for b in self
            .slopes
            .iter_mut()
            .flatten()
            .chain(self.stage.iter_mut())
        {
            b.resize(n, R::zero())?;
        }
        let m = u.len();
        for s in 0..self.tableau.stages() {
            let coeffs: Vec<(usize, R)> = self.tableau.a[s]
                .iter()
                .enumerate()
                .filter(|(_, a)| **a != 0.0)
                .map(|(l, &a)| (l, R::cast(a * dt)))
                .collect();
            let (done, rest) = self.slopes.split_at_mut(s);
            let out: Vec<&mut [R]> = rest[0].iter_mut().map(|b| b.as_mut_slice()).collect();
            if coeffs.is_empty() {
                let state: Vec<&[R]> = u.iter().map(|x| &**x).collect();
                rhs(&state, out);
            } else {
                let clock = std::time::Instant::now();
                let stage: Vec<&mut [R]> =
                    self.stage.iter_mut().map(|b| b.as_mut_slice()).collect();
                let uref: Vec<&[R]> = u.iter().map(|x| &**x).collect();
                backend.for_each_block(stage, 1024, |first, mut blk| {
                    for v in 0..m {
                        for k in 0..SplitOutputs::len(&blk) {
                            let i = first + k;
                            let mut x = uref[v][i];
                            for &(l, c) in &coeffs {
                                x += c * done[l][v].as_slice()[i];
                            }
                            blk[v][k] = x;
                        }
                    }
                });
                self.seconds[0] += clock.elapsed().as_secs_f64();
                let state: Vec<&[R]> = self.stage.iter().map(|b| b.as_slice()).collect();
                rhs(&state, out);
            }
        }
        let clock = std::time::Instant::now();
        let weights: Vec<R> = self.tableau.b.iter().map(|&b| R::cast(b * dt)).collect();
        let slopes = &self.slopes;
        let out: Vec<&mut [R]> = u.iter_mut().map(|x| &mut **x).collect();
        backend.for_each_block(out, 1024, |first, mut blk| {
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
            .chain(self.stage.iter())
            .map(|b| b as &dyn BudgetedBuffer)
            .collect()
    }
    fn buffers_mut(&mut self) -> Vec<&mut dyn BudgetedBuffer> {
        self.slopes
            .iter_mut()
            .flatten()
            .chain(self.stage.iter_mut())
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
