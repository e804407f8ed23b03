//! Implicit-explicit (IMEX) Runge-Kutta stepping: the transport term explicit, a stiff source
//! term implicit, driven by a pair of Butcher tableaux.
//!
//! For `du/dt = F(u) + S(u)` with an explicit tableau `(A~, b~, c~)` (strictly lower triangular)
//! and a diagonally implicit one `(A, b, c)`, stage `i` is
//!
//! ```text
//! U_i = u + dt sum_(j<i) (A~_ij F(U_j) + A_ij S(U_j)) + dt A_ii S(U_i)
//! u  <- u + dt sum_i (b~_i F(U_i) + b_i S(U_i))
//! ```
//!
//! The implicit equation of each stage is solved per particle by the [`Source`] itself (closed
//! form or iteratively). The source slope of an implicit stage is taken as
//! `S(U_i) = (U_i - rhs_i) / (dt A_ii)`, never by evaluating `S`: with a stiff source
//! (`S ~ 1/epsilon`) evaluating it would multiply the solve's round-off by `1/epsilon`.

use mote_core::{Budgeted, BudgetedBuffer, Buffer, CpuBackend, Real, Scaling, SplitOutputs};

use crate::error::CloudError;
use crate::source::Source;
use crate::time::StageOperator;

/// A pair of Butcher tableaux for IMEX Runge-Kutta, stored as full `s x s` matrices.
#[derive(Clone, Debug, PartialEq)]
pub struct ImexTableau {
    /// Name.
    pub name: &'static str,
    /// Order of accuracy of the pair (order conditions of both tableaux and the coupling ones).
    pub order: usize,
    /// Explicit stage coefficients, strictly lower triangular.
    pub explicit_a: Vec<Vec<f64>>,
    /// Explicit weights.
    pub explicit_b: Vec<f64>,
    /// Implicit stage coefficients, lower triangular (the diagonal is the implicit part).
    pub implicit_a: Vec<Vec<f64>>,
    /// Implicit weights.
    pub implicit_b: Vec<f64>,
}

impl ImexTableau {
    /// IMEX (forward-backward) Euler, first order: explicit transport, then an implicit source
    /// step.
    pub fn euler() -> Self {
        Self {
            name: "imex-euler",
            order: 1,
            explicit_a: vec![vec![0.0, 0.0], vec![1.0, 0.0]],
            explicit_b: vec![1.0, 0.0],
            implicit_a: vec![vec![0.0, 0.0], vec![0.0, 1.0]],
            implicit_b: vec![0.0, 1.0],
        }
    }

    /// ARS(2,2,2) of Ascher, Ruuth and Spiteri: second order, L-stable and stiffly accurate
    /// (the new state is the last stage), so the stiff limit is the relaxed scheme.
    pub fn ars222() -> Self {
        let g = 1.0 - 0.5f64.sqrt();
        let d = 1.0 - 1.0 / (2.0 * g);
        Self {
            name: "ars222",
            order: 2,
            explicit_a: vec![
                vec![0.0, 0.0, 0.0],
                vec![g, 0.0, 0.0],
                vec![d, 1.0 - d, 0.0],
            ],
            explicit_b: vec![d, 1.0 - d, 0.0],
            implicit_a: vec![
                vec![0.0, 0.0, 0.0],
                vec![0.0, g, 0.0],
                vec![0.0, 1.0 - g, g],
            ],
            implicit_b: vec![0.0, 1.0 - g, g],
        }
    }

    /// ARS(2,3,3) of Ascher, Ruuth and Spiteri: third order (A-stable implicit part).
    pub fn ars233() -> Self {
        let g = (3.0 + 3.0f64.sqrt()) / 6.0;
        Self {
            name: "ars233",
            order: 3,
            explicit_a: vec![
                vec![0.0, 0.0, 0.0],
                vec![g, 0.0, 0.0],
                vec![g - 1.0, 2.0 * (1.0 - g), 0.0],
            ],
            explicit_b: vec![0.0, 0.5, 0.5],
            implicit_a: vec![
                vec![0.0, 0.0, 0.0],
                vec![0.0, g, 0.0],
                vec![0.0, 1.0 - 2.0 * g, g],
            ],
            implicit_b: vec![0.0, 0.5, 0.5],
        }
    }

    /// SSP2(3,3,2) of Pareschi and Russo: second order, the explicit part strong-stability
    /// preserving, the implicit part L-stable and stiffly accurate.
    pub fn ssp2_332() -> Self {
        let t = 1.0 / 3.0;
        Self {
            name: "ssp2-332",
            order: 2,
            explicit_a: vec![
                vec![0.0, 0.0, 0.0],
                vec![0.5, 0.0, 0.0],
                vec![0.5, 0.5, 0.0],
            ],
            explicit_b: vec![t, t, t],
            implicit_a: vec![vec![0.25, 0.0, 0.0], vec![0.0, 0.25, 0.0], vec![t, t, t]],
            implicit_b: vec![t, t, t],
        }
    }

    /// SSP3(4,3,3) of Pareschi and Russo: third order, the explicit part the three-stage SSP
    /// Runge-Kutta method (Shu-Osher), the implicit part L-stable.
    pub fn ssp3_433() -> Self {
        // The published coefficients (Pareschi & Russo 2005, table VI), to 14 digits.
        let al = 0.241_694_260_788_21;
        let be = 0.060_423_565_197_05;
        let et = 0.129_152_869_605_90;
        Self {
            name: "ssp3-433",
            order: 3,
            explicit_a: vec![
                vec![0.0, 0.0, 0.0, 0.0],
                vec![0.0, 0.0, 0.0, 0.0],
                vec![0.0, 1.0, 0.0, 0.0],
                vec![0.0, 0.25, 0.25, 0.0],
            ],
            explicit_b: vec![0.0, 1.0 / 6.0, 1.0 / 6.0, 2.0 / 3.0],
            implicit_a: vec![
                vec![al, 0.0, 0.0, 0.0],
                vec![-al, al, 0.0, 0.0],
                vec![0.0, 1.0 - al, al, 0.0],
                vec![be, et, 0.5 - be - et - al, al],
            ],
            implicit_b: vec![0.0, 1.0 / 6.0, 1.0 / 6.0, 2.0 / 3.0],
        }
    }

    /// Every pair, in order of cost.
    pub fn all() -> Vec<Self> {
        vec![
            Self::euler(),
            Self::ars222(),
            Self::ssp2_332(),
            Self::ars233(),
            Self::ssp3_433(),
        ]
    }

    /// By name: `imex-euler`, `ars222`, `ars233`, `ssp2-332`, `ssp3-433`.
    pub fn by_name(name: &str) -> Result<Self, CloudError> {
        Self::all()
            .into_iter()
            .find(|t| t.name == name)
            .ok_or_else(|| {
                CloudError::invalid(
                    "IMEX tableau",
                    name,
                    "imex-euler, ars222, ssp2-332, ars233 or ssp3-433",
                )
            })
    }

    /// Number of stages.
    pub fn stages(&self) -> usize {
        self.explicit_b.len()
    }

    /// Whether the pair is globally stiffly accurate: both weight vectors equal the last rows of
    /// their matrices, so the new state is the last stage, on which the implicit solve acted
    /// last (the stiff limit then lands on the equilibrium).
    pub fn stiffly_accurate(&self) -> bool {
        let s = self.stages();
        self.explicit_a
            .last()
            .is_some_and(|r| *r == self.explicit_b)
            && self
                .implicit_a
                .last()
                .is_some_and(|r| *r == self.implicit_b)
            && s > 0
    }

    /// Which stage slopes a later stage or the update reads, per stage: `[transport,
    /// source]` (the others need not be computed or kept).
    pub fn needed_slopes(&self) -> Vec<[bool; 2]> {
        let s = self.stages();
        (0..s)
            .map(|j| {
                let used =
                    |a: &[Vec<f64>], b: &[f64]| b[j] != 0.0 || (j + 1..s).any(|i| a[i][j] != 0.0);
                [
                    used(&self.explicit_a, &self.explicit_b),
                    used(&self.implicit_a, &self.implicit_b),
                ]
            })
            .collect()
    }

    /// Explicit nodes `c~_i = sum_j A~_ij` (the times of the transport evaluations).
    pub fn explicit_c(&self) -> Vec<f64> {
        self.explicit_a.iter().map(|r| r.iter().sum()).collect()
    }

    /// Implicit nodes `c_i = sum_j A_ij` (the times of the source solves).
    pub fn implicit_c(&self) -> Vec<f64> {
        self.implicit_a.iter().map(|r| r.iter().sum()).collect()
    }

    /// Checks the shapes: square `s x s` matrices, weights of length `s`, the explicit matrix
    /// strictly and the implicit one non-strictly lower triangular, non-negative diagonal.
    pub fn validate(&self) -> Result<(), CloudError> {
        let s = self.stages();
        let square = |a: &[Vec<f64>]| a.len() == s && a.iter().all(|r| r.len() == s);
        let bad = |what: &str| Err(CloudError::invalid("IMEX tableau", self.name, what));
        if s == 0 || self.implicit_b.len() != s {
            return bad("weights of equal, non-zero length");
        }
        if !square(&self.explicit_a) || !square(&self.implicit_a) {
            return bad("square stage matrices of the stage count");
        }
        for i in 0..s {
            if (i..s).any(|j| self.explicit_a[i][j] != 0.0) {
                return bad("a strictly lower triangular explicit matrix");
            }
            if (i + 1..s).any(|j| self.implicit_a[i][j] != 0.0) || self.implicit_a[i][i] < 0.0 {
                return bad("a lower triangular implicit matrix with a non-negative diagonal");
            }
        }
        Ok(())
    }

    /// The residuals of the order conditions of the partitioned Runge-Kutta method up to order
    /// `p` (at most 3), one per bi-coloured rooted tree: `sum b^a = 1` (order 1),
    /// `sum b^a c^b = 1/2` (order 2), `sum b^a c^b c^g = 1/3` and `sum b^a A^b c^g = 1/6` (order
    /// 3), for every choice of colours `a, b, g` among explicit and implicit. With both colours
    /// equal they are the classical conditions of each tableau; the mixed ones are the coupling
    /// conditions.
    pub fn order_residuals(&self, p: usize) -> Vec<(String, f64)> {
        let s = self.stages();
        let a = [&self.explicit_a, &self.implicit_a];
        let b = [&self.explicit_b, &self.implicit_b];
        let c = [self.explicit_c(), self.implicit_c()];
        let names = ["E", "I"];
        let mut out = Vec::new();
        for x in 0..2 {
            if p >= 1 {
                let r: f64 = b[x].iter().sum::<f64>() - 1.0;
                out.push((format!("b{}", names[x]), r));
            }
            for y in 0..2 {
                if p >= 2 {
                    let r: f64 = (0..s).map(|i| b[x][i] * c[y][i]).sum::<f64>() - 0.5;
                    out.push((format!("b{} c{}", names[x], names[y]), r));
                }
                for z in 0..2 {
                    if p >= 3 {
                        let r: f64 =
                            (0..s).map(|i| b[x][i] * c[y][i] * c[z][i]).sum::<f64>() - 1.0 / 3.0;
                        out.push((format!("b{} c{} c{}", names[x], names[y], names[z]), r));
                        let r: f64 = (0..s)
                            .map(|i| b[x][i] * (0..s).map(|j| a[y][i][j] * c[z][j]).sum::<f64>())
                            .sum::<f64>()
                            - 1.0 / 6.0;
                        out.push((format!("b{} A{} c{}", names[x], names[y], names[z]), r));
                    }
                }
            }
        }
        out
    }

    /// The highest order (at most 3) whose conditions all hold to `tol`.
    pub fn satisfied_order(&self, tol: f64) -> usize {
        (1..=3)
            .take_while(|&p| self.order_residuals(p).iter().all(|(_, r)| r.abs() <= tol))
            .last()
            .unwrap_or(0)
    }
}

/// The IMEX stepper's storage: a transport slope and a source slope per stage, the stage state
/// and the stage's right-hand side (separate buffers per variable).
pub struct Imex<R: Real> {
    tableau: ImexTableau,
    transport: Vec<Vec<Buffer<R>>>,
    source: Vec<Vec<Buffer<R>>>,
    stage: Vec<Buffer<R>>,
    seconds: [f64; 2],
}

impl<R: Real> Imex<R> {
    /// A stepper for `variables` variables.
    pub fn new(tableau: ImexTableau, variables: usize) -> Result<Self, CloudError> {
        tableau.validate()?;
        let s = tableau.stages();
        let buffers = |name: &'static str| -> Vec<Buffer<R>> {
            (0..variables)
                .map(|_| Buffer::new(name, Scaling::PerParticle(1)))
                .collect()
        };
        Ok(Self {
            transport: (0..s).map(|_| buffers("imex_transport_slope")).collect(),
            source: (0..s).map(|_| buffers("imex_source_slope")).collect(),
            stage: buffers("imex_stage"),
            tableau,
            seconds: [0.0; 2],
        })
    }

    /// The tableaux.
    pub fn tableau(&self) -> &ImexTableau {
        &self.tableau
    }

    /// Seconds spent in the stage-combination and source-solve passes since the last call, and
    /// resets them.
    pub fn take_seconds(&mut self) -> [f64; 2] {
        std::mem::take(&mut self.seconds)
    }

    /// Advances `u` from time `t` by `dt`: the transport from `op` (its `rhs` and `constrain`;
    /// an operator that revises stages, MOOD, is refused), the source from `source`.
    pub fn advance(
        &mut self,
        u: &mut [&mut [R]],
        t: f64,
        dt: f64,
        backend: CpuBackend,
        op: &mut dyn StageOperator<R>,
        source: &dyn Source<R>,
    ) -> Result<(), CloudError> {
        if op.revises() {
            return Err(CloudError::invalid(
                "stepper",
                self.tableau.name,
                "an explicit Runge-Kutta tableau: a-posteriori stage revision (MOOD) is not \
                 available with IMEX steppers",
            ));
        }
        let m = u.len();
        if source.variables() != m {
            return Err(CloudError::invalid(
                "source variables",
                source.variables(),
                format!("the state's variable count ({m})"),
            ));
        }
        let n = u.first().map_or(0, |x| x.len());
        for b in self
            .transport
            .iter_mut()
            .chain(self.source.iter_mut())
            .flatten()
            .chain(self.stage.iter_mut())
        {
            b.resize(n, R::zero())?;
        }
        let tableau = self.tableau.clone();
        let mut stages = HostImex {
            u,
            transport: &mut self.transport,
            source_slopes: &mut self.source,
            stage: &mut self.stage,
            seconds: &mut self.seconds,
            backend,
            op,
            source,
        };
        imex_step(&tableau, t, dt, &mut stages)
    }
}

/// A slope of an IMEX stage: the transport's or the source's, of stage `j`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImexSlope {
    /// The transport (explicit) slope `K_j`.
    Transport(usize),
    /// The source (implicit) slope `S_j`.
    Source(usize),
}

/// The storage and passes of one IMEX step, as a backend provides them: the state `u`, the
/// stage state, a transport and a source slope per stage. [`imex_step`] is the one stage loop
/// that drives them, on the CPU ([`Imex`]) and on the device (`mote_gpu::DeviceSimulation`).
pub trait ImexStages {
    /// What a pass can fail with.
    type Error;
    /// The stage state = `u + sum c slope`, the terms added in the order given (`c` the
    /// tableau's coefficient times the step).
    fn combine(&mut self, terms: &[(ImexSlope, f64)]) -> Result<(), Self::Error>;
    /// Solves `U - h S(U) = rhs` in place on the stage state (time `t`); with `keep`, the
    /// source slope of stage `i` becomes `(U - rhs) / h`.
    fn solve(&mut self, i: usize, t: f64, h: f64, keep: bool) -> Result<(), Self::Error>;
    /// Imposes the constraints (boundary conditions) at time `t` on the stage state, or with
    /// `on_state` on the state.
    fn constrain(&mut self, t: f64, on_state: bool) -> Result<(), Self::Error>;
    /// The source slope of stage `i`: the source of the stage state at time `t`.
    fn source(&mut self, i: usize, t: f64) -> Result<(), Self::Error>;
    /// The transport slope of stage `i` from the stage state at time `t`.
    fn transport(&mut self, i: usize, t: f64) -> Result<(), Self::Error>;
    /// After the stages, before the state changes: an error where a solve failed (for a
    /// backend that finds out only then).
    fn solved(&mut self) -> Result<(), Self::Error>;
    /// `u += sum c slope`, the terms added in the order given.
    fn update(&mut self, terms: &[(ImexSlope, f64)]) -> Result<(), Self::Error>;
}

/// One IMEX step of the pair `tableau` from time `t` by `dt`, the stage loop written once for
/// every backend: per stage `rhs_i = u + dt sum_(j<i) (A~_ij K_j + A_ij S_j)`, the implicit
/// solve where `A_ii > 0` (else the source evaluated explicitly where a later stage reads it),
/// the constraints, the transport slope where it is read; then
/// `u <- u + dt sum_i (b~_i K_i + b_i S_i)`. A failed solve ends the step before the state
/// changes.
pub fn imex_step<S: ImexStages + ?Sized>(
    tableau: &ImexTableau,
    t: f64,
    dt: f64,
    b: &mut S,
) -> Result<(), S::Error> {
    let needed = tableau.needed_slopes();
    let (ec, ic) = (tableau.explicit_c(), tableau.implicit_c());
    // Every (slope, coefficient times dt) with a non-zero coefficient, transport before source
    // per stage.
    let terms = |explicit: &[f64], implicit: &[f64], stages: usize| -> Vec<(ImexSlope, f64)> {
        (0..stages)
            .flat_map(|j| {
                [
                    (ImexSlope::Transport(j), explicit[j]),
                    (ImexSlope::Source(j), implicit[j]),
                ]
            })
            .filter(|(_, a)| *a != 0.0)
            .map(|(slope, a)| (slope, a * dt))
            .collect()
    };
    for i in 0..tableau.stages() {
        b.combine(&terms(&tableau.explicit_a[i], &tableau.implicit_a[i], i))?;
        let diag = tableau.implicit_a[i][i];
        let [need_transport, need_source] = needed[i];
        if diag > 0.0 {
            b.solve(i, t + ic[i] * dt, diag * dt, need_source)?;
        }
        b.constrain(t + ec[i] * dt, false)?;
        if diag == 0.0 && need_source {
            b.source(i, t + ic[i] * dt)?;
        }
        if need_transport {
            b.transport(i, t + ec[i] * dt)?;
        }
    }
    b.solved()?;
    let s = tableau.stages();
    b.update(&terms(&tableau.explicit_b, &tableau.implicit_b, s))?;
    b.constrain(t + dt, true)
}

/// [`Imex`]'s buffers, a [`StageOperator`] (the transport) and a [`Source`] as [`ImexStages`].
struct HostImex<'a, 'u, 'o, R: Real> {
    u: &'a mut [&'u mut [R]],
    transport: &'a mut [Vec<Buffer<R>>],
    source_slopes: &'a mut [Vec<Buffer<R>>],
    stage: &'a mut [Buffer<R>],
    seconds: &'a mut [f64; 2],
    backend: CpuBackend,
    op: &'a mut (dyn StageOperator<R> + 'o),
    source: &'a dyn Source<R>,
}

impl<R: Real> ImexStages for HostImex<'_, '_, '_, R> {
    type Error = CloudError;

    fn combine(&mut self, terms: &[(ImexSlope, f64)]) -> Result<(), CloudError> {
        let clock = std::time::Instant::now();
        combine(
            self.backend,
            self.u.iter().map(|x| &**x).collect(),
            &coefficients(terms),
            self.transport,
            self.source_slopes,
            self.stage.iter_mut().map(|b| b.as_mut_slice()).collect(),
        );
        self.seconds[0] += clock.elapsed().as_secs_f64();
        Ok(())
    }

    fn solve(&mut self, i: usize, t: f64, h: f64, keep: bool) -> Result<(), CloudError> {
        let clock = std::time::Instant::now();
        let h = R::cast(h);
        if keep {
            for (k, x) in self.source_slopes[i].iter_mut().zip(&*self.stage) {
                k.as_mut_slice().copy_from_slice(x.as_slice());
            }
        }
        // A split cloud's ranks solve their own particles (the halo's solves would count
        // floors and failures one process does not) and the halo takes the owners' solutions;
        // the first failure in the one-process order is agreed.
        let halo = self.op.halo();
        let own = halo.map_or(0..self.stage.first().map_or(0, |b| b.len()), |h| h.own());
        let solved = self.source.solve(
            t,
            h,
            self.stage
                .iter_mut()
                .map(|b| &mut b.as_mut_slice()[own.clone()])
                .collect(),
            self.backend,
        );
        let failed = match halo {
            Some(halo) => {
                let mine = solved.err().map(|i| [(halo.first() + i) as u64]);
                let first = halo.first_failure(mine).map(|[g]| g as usize);
                if first.is_none() {
                    let mut stage: Vec<&mut [R]> =
                        self.stage.iter_mut().map(|b| b.as_mut_slice()).collect();
                    halo.exchange_columns(&mut stage);
                }
                first
            }
            None => solved.err(),
        };
        if let Some(i) = failed {
            return Err(self.source.solve_error(i));
        }
        if keep {
            let inv = R::one() / h;
            let stage: Vec<&[R]> = self.stage.iter().map(|b| b.as_slice()).collect();
            let out: Vec<&mut [R]> = self.source_slopes[i]
                .iter_mut()
                .map(|b| b.as_mut_slice())
                .collect();
            self.backend.for_each_block(out, 1024, |first, mut blk| {
                for v in 0..stage.len() {
                    for k in 0..SplitOutputs::len(&blk) {
                        blk[v][k] = (stage[v][first + k] - blk[v][k]) * inv;
                    }
                }
            });
        }
        self.seconds[1] += clock.elapsed().as_secs_f64();
        Ok(())
    }

    fn constrain(&mut self, t: f64, on_state: bool) -> Result<(), CloudError> {
        if on_state {
            self.op.constrain(t, self.u);
        } else {
            let mut stage: Vec<&mut [R]> =
                self.stage.iter_mut().map(|b| b.as_mut_slice()).collect();
            self.op.constrain(t, &mut stage);
        }
        Ok(())
    }

    fn source(&mut self, i: usize, t: f64) -> Result<(), CloudError> {
        let stage: Vec<&[R]> = self.stage.iter().map(|b| b.as_slice()).collect();
        // On a split cloud: the own particles' (see `solve`), then the owners' into the halo.
        let halo = self.op.halo();
        let own = halo.map_or(0..stage.first().map_or(0, |x| x.len()), |h| h.own());
        let stage: Vec<&[R]> = stage.iter().map(|x| &x[own.clone()]).collect();
        let out: Vec<&mut [R]> = self.source_slopes[i]
            .iter_mut()
            .map(|b| &mut b.as_mut_slice()[own.clone()])
            .collect();
        self.source.implicit(t, &stage, out, self.backend);
        if let Some(halo) = halo {
            let mut out: Vec<&mut [R]> = self.source_slopes[i]
                .iter_mut()
                .map(|b| b.as_mut_slice())
                .collect();
            halo.exchange_columns(&mut out);
        }
        Ok(())
    }

    fn transport(&mut self, i: usize, t: f64) -> Result<(), CloudError> {
        let stage: Vec<&[R]> = self.stage.iter().map(|b| b.as_slice()).collect();
        let mut out: Vec<&mut [R]> = self.transport[i]
            .iter_mut()
            .map(|b| b.as_mut_slice())
            .collect();
        self.op
            .rhs(i, t, &stage, out.iter_mut().map(|o| &mut **o).collect())?;
        // On a split cloud: the own particles' explicit source (see `solve`), then the owners'
        // slopes into the halo (the transport's were exchanged by its pass).
        if !self.source.has_explicit() {
            return Ok(());
        }
        let halo = self.op.halo();
        let own = halo.map_or(0..stage.first().map_or(0, |x| x.len()), |h| h.own());
        let own_stage: Vec<&[R]> = stage.iter().map(|x| &x[own.clone()]).collect();
        let own_out: Vec<&mut [R]> = out.iter_mut().map(|o| &mut o[own.clone()]).collect();
        self.source
            .add_explicit(t, &own_stage, own_out, self.backend);
        if let Some(halo) = halo {
            halo.exchange_columns(&mut out);
        }
        Ok(())
    }

    fn solved(&mut self) -> Result<(), CloudError> {
        // The CPU's solves fail at once.
        Ok(())
    }

    fn update(&mut self, terms: &[(ImexSlope, f64)]) -> Result<(), CloudError> {
        let clock = std::time::Instant::now();
        for (x, st) in self.stage.iter_mut().zip(self.u.iter()) {
            x.as_mut_slice().copy_from_slice(st);
        }
        combine(
            self.backend,
            self.stage.iter().map(|b| b.as_slice()).collect(),
            &coefficients(terms),
            self.transport,
            self.source_slopes,
            self.u.iter_mut().map(|x| &mut **x).collect(),
        );
        self.seconds[0] += clock.elapsed().as_secs_f64();
        Ok(())
    }
}

/// The terms as [`combine`] takes them: `(is the source's, stage, coefficient)`.
fn coefficients<R: Real>(terms: &[(ImexSlope, f64)]) -> Vec<(bool, usize, R)> {
    terms
        .iter()
        .map(|&(slope, c)| match slope {
            ImexSlope::Transport(j) => (false, j, R::cast(c)),
            ImexSlope::Source(j) => (true, j, R::cast(c)),
        })
        .collect()
}

/// `out = base + sum (c * slope)` per particle and variable; a coefficient `(true, j, c)` reads
/// the source slope of stage `j`, `(false, j, c)` the transport slope.
fn combine<R: Real>(
    backend: CpuBackend,
    base: Vec<&[R]>,
    coeffs: &[(bool, usize, R)],
    transport: &[Vec<Buffer<R>>],
    source: &[Vec<Buffer<R>>],
    out: Vec<&mut [R]>,
) {
    backend.for_each_block(out, 1024, |first, mut blk| {
        for v in 0..base.len() {
            for k in 0..SplitOutputs::len(&blk) {
                let i = first + k;
                let mut x = base[v][i];
                for &(src, j, c) in coeffs {
                    let slope = if src { &source[j] } else { &transport[j] };
                    x += c * slope[v].as_slice()[i];
                }
                blk[v][k] = x;
            }
        }
    });
}

impl<R: Real> Budgeted for Imex<R> {
    fn buffers(&self) -> Vec<&dyn BudgetedBuffer> {
        self.transport
            .iter()
            .chain(self.source.iter())
            .flatten()
            .chain(self.stage.iter())
            .map(|b| b as &dyn BudgetedBuffer)
            .collect()
    }
    fn buffers_mut(&mut self) -> Vec<&mut dyn BudgetedBuffer> {
        self.transport
            .iter_mut()
            .chain(self.source.iter_mut())
            .flatten()
            .chain(self.stage.iter_mut())
            .map(|b| b as &mut dyn BudgetedBuffer)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::PointSource;

    /// Explicit part `-y^2 + sin t`.
    struct Transport;

    impl StageOperator<f64> for Transport {
        fn rhs(
            &mut self,
            _stage: usize,
            t: f64,
            u: &[&[f64]],
            mut out: Vec<&mut [f64]>,
        ) -> Result<(), CloudError> {
            for i in 0..u[0].len() {
                out[0][i] = -u[0][i] * u[0][i] * u[0][i] + 2.0 * (2.0 * t).sin();
            }
            Ok(())
        }
    }

    /// Implicit part `-k (y - cos t)`, solved in closed form.
    struct Pull(f64);

    impl PointSource<f64> for Pull {
        fn name(&self) -> &'static str {
            "pull"
        }
        fn variables(&self) -> usize {
            1
        }
        fn implicit_at(&self, t: f64, u: &[f64], out: &mut [f64]) {
            out[0] = -self.0 * (u[0] - t.cos());
        }
        fn solve_at(&self, t: f64, h: f64, u: &mut [f64]) -> bool {
            u[0] = (u[0] + h * self.0 * t.cos()) / (1.0 + h * self.0);
            true
        }
    }

    /// `y(1)` from `y(0) = 1` in `steps` IMEX steps.
    fn imex_solution(tableau: &ImexTableau, k: f64, steps: usize) -> f64 {
        let mut stepper = Imex::<f64>::new(tableau.clone(), 1).unwrap();
        let mut y = [1.0f64, 1.0];
        let dt = 1.0 / steps as f64;
        for s in 0..steps {
            let mut view = [&mut y[..]];
            stepper
                .advance(
                    &mut view,
                    s as f64 * dt,
                    dt,
                    CpuBackend::Serial,
                    &mut Transport,
                    &Pull(k),
                )
                .unwrap();
        }
        y[0]
    }

    /// `y(1)` by classical RK4 on the whole right-hand side with a small step.
    fn reference(k: f64) -> f64 {
        let f = |t: f64, y: f64| -y * y * y + 2.0 * (2.0 * t).sin() - k * (y - t.cos());
        let steps = 20_000;
        let h = 1.0 / steps as f64;
        let mut y = 1.0;
        for s in 0..steps {
            let t = s as f64 * h;
            let k1 = f(t, y);
            let k2 = f(t + h / 2.0, y + h / 2.0 * k1);
            let k3 = f(t + h / 2.0, y + h / 2.0 * k2);
            let k4 = f(t + h, y + h * k3);
            y += h / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4);
        }
        y
    }

    #[test]
    fn tableaux_satisfy_their_order_conditions_and_no_more() {
        for t in ImexTableau::all() {
            t.validate().unwrap();
            assert_eq!(t.satisfied_order(1e-12), t.order, "{}", t.name);
            assert_eq!(ImexTableau::by_name(t.name).unwrap(), t);
        }
        assert!(ImexTableau::by_name("ars443").is_err());
        // A wrong coefficient breaks a coupling condition, not only a classical one.
        let mut t = ImexTableau::ars233();
        t.implicit_a[2][1] += 1e-3;
        t.implicit_a[2][2] -= 1e-3;
        assert!(t.satisfied_order(1e-12) < 3);
        let bad = t.order_residuals(3);
        assert!(
            bad.iter()
                .any(|(name, r)| name.contains('E') && name.contains('I') && r.abs() > 1e-6)
        );
    }

    #[test]
    fn pairs_converge_at_their_order_on_a_split_ode() {
        let k = 1.0;
        let exact = reference(k);
        for t in ImexTableau::all() {
            let e1 = (imex_solution(&t, k, 20) - exact).abs();
            let e2 = (imex_solution(&t, k, 40) - exact).abs();
            let p = (e1 / e2).log2();
            eprintln!("{}: {e1:.3e} -> {e2:.3e}, order {p:.2}", t.name);
            assert!((p - t.order as f64).abs() < 0.25, "{}: order {p}", t.name);
        }
    }

    #[test]
    fn stiff_source_stays_stable_and_relaxes() {
        // k dt = 1e6: the exact solution follows cos t to O(1/k). Every pair stays bounded;
        // those whose new state is their last stage (globally stiffly accurate) land on it,
        // the others keep an O(dt) error in this limit (0.045 for SSP3(4,3,3) at dt = 0.1).
        let k = 1e7;
        for t in ImexTableau::all() {
            let y = imex_solution(&t, k, 10);
            let err = (y - 1f64.cos()).abs();
            eprintln!("{}: stiff error {err:.2e}", t.name);
            let bound = if t.stiffly_accurate() { 1e-5 } else { 0.1 };
            assert!(y.is_finite() && err < bound, "{}: {y}", t.name);
        }
        assert!(
            ImexTableau::ars222().stiffly_accurate() && ImexTableau::euler().stiffly_accurate()
        );
    }

    #[test]
    fn malformed_tableaux_are_refused() {
        let mut t = ImexTableau::ars222();
        t.explicit_a[1][1] = 0.5;
        assert!(t.validate().is_err());
        let mut t = ImexTableau::ars222();
        t.implicit_a[0][2] = 0.5;
        assert!(Imex::<f64>::new(t, 1).is_err());
        let mut t = ImexTableau::ars222();
        t.implicit_b.pop();
        assert!(t.validate().is_err());
    }
}
