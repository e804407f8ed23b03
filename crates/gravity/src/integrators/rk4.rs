//! The classical fourth-order Runge-Kutta method.

use mote_core::{
    AnyBuffer, Budgeted, BudgetedBuffer, Buffer, CpuBackend, ParticleData, Real, Scaling, Vec3Span,
    Vec3SpanMut,
};

use super::Integrator;
use crate::solver::ForceSolver;

/// Classical RK4 on `(x, v)`: fourth order, not symplectic. Four force evaluations per step
/// (the first stage reuses the carried accelerations; the last evaluation leaves accelerations
/// that belong to the new positions).
///
/// Its stage storage (initial state and weighted slope sums, twelve per-particle arrays) is
/// budgeted like every other buffer: [`Budgeted`] lists it for the run's reservation.
pub struct Rk4<R: Real> {
    backend: CpuBackend,
    stages: [Buffer<R>; 12],
}

const STAGE_NAMES: [&str; 12] = [
    "rk4_x0_x",
    "rk4_x0_y",
    "rk4_x0_z",
    "rk4_v0_x",
    "rk4_v0_y",
    "rk4_v0_z",
    "rk4_sum_x_x",
    "rk4_sum_x_y",
    "rk4_sum_x_z",
    "rk4_sum_v_x",
    "rk4_sum_v_y",
    "rk4_sum_v_z",
];

impl<R: Real> Rk4<R> {
    /// An RK4 integrator whose element-wise updates run on `backend`.
    pub fn new(backend: CpuBackend) -> Self {
        Self {
            backend,
            stages: STAGE_NAMES.map(|n| Buffer::new(n, Scaling::PerParticle(1))),
        }
    }
}

impl<R: Real> Budgeted for Rk4<R> {
    fn buffers(&self) -> Vec<&dyn BudgetedBuffer> {
        self.stages
            .iter()
            .map(|b| b as &dyn BudgetedBuffer)
            .collect()
    }
    fn buffers_mut(&mut self) -> Vec<&mut dyn BudgetedBuffer> {
        self.stages
            .iter_mut()
            .map(|b| b as &mut dyn BudgetedBuffer)
            .collect()
    }
}

impl<R: Real> Integrator<R> for Rk4<R> {
    fn name(&self) -> &'static str {
        "rk4"
    }
    fn order(&self) -> u32 {
        4
    }
    fn force_evaluations_per_step(&self) -> u32 {
        4
    }
    fn step(&mut self, p: &mut ParticleData<R>, solver: &mut dyn ForceSolver<R>, dt: f64) {
        let n = p.len();
        let mut all: Vec<&mut dyn AnyBuffer> = self
            .stages
            .iter_mut()
            .map(|b| b as &mut dyn AnyBuffer)
            .collect();
        // Budgeted runs reserve the stage arrays with the particles, so they always fit.
        mote_core::columns::resize_all(&mut all, n)
            .expect("RK4 stage arrays reserved below the particle count");
        let [x0x, x0y, x0z, v0x, v0y, v0z, sxx, sxy, sxz, svx, svy, svz] = &mut self.stages;
        let b = self.backend;
        let (h, h6) = (R::cast(dt), R::cast(dt / 6.0));
        // Stage 1: save the state; slopes k1 = (v0, a0); start the weighted sums.
        {
            let q = p.view_mut();
            let (x, y, z) = q.position.as_span().components();
            let (vx, vy, vz) = q.velocity.as_span().components();
            let (ax, ay, az) = q.acceleration.as_span().components();
            b.for_each_particle(
                (
                    Vec3SpanMut::new(x0x.as_mut_slice(), x0y.as_mut_slice(), x0z.as_mut_slice()),
                    Vec3SpanMut::new(v0x.as_mut_slice(), v0y.as_mut_slice(), v0z.as_mut_slice()),
                    Vec3SpanMut::new(sxx.as_mut_slice(), sxy.as_mut_slice(), sxz.as_mut_slice()),
                    Vec3SpanMut::new(svx.as_mut_slice(), svy.as_mut_slice(), svz.as_mut_slice()),
                ),
                |i| {
                    (
                        [x[i], y[i], z[i]],
                        [vx[i], vy[i], vz[i]],
                        [vx[i], vy[i], vz[i]],
                        [ax[i], ay[i], az[i]],
                    )
                },
            );
        }
        let x0 = Vec3Span::new(x0x.as_slice(), x0y.as_slice(), x0z.as_slice());
        let v0 = Vec3Span::new(v0x.as_slice(), v0y.as_slice(), v0z.as_slice());
        let mut sum_x =
            Vec3SpanMut::new(sxx.as_mut_slice(), sxy.as_mut_slice(), sxz.as_mut_slice());
        let mut sum_v =
            Vec3SpanMut::new(svx.as_mut_slice(), svy.as_mut_slice(), svz.as_mut_slice());
        // Stages 2-4: move to x0 + c dt k, evaluate, add w k to the sums; then the final update.
        let stages = [
            (R::cast(0.5), R::cast(2.0)),
            (R::cast(0.5), R::cast(2.0)),
            (R::one(), R::one()),
        ];
        for (c, w) in stages {
            let ch = c * h;
            // Move to the stage point using the previous stage's slope (current v and a).
            {
                let q = p.view_mut();
                let (ax, ay, az) = q.acceleration.as_span().components();
                let (x0x, x0y, x0z) = x0.components();
                let (v0x, v0y, v0z) = v0.components();
                b.update_each((q.position, q.velocity), |i, (_, v)| {
                    (
                        [x0x[i] + ch * v[0], x0y[i] + ch * v[1], x0z[i] + ch * v[2]],
                        [
                            v0x[i] + ch * ax[i],
                            v0y[i] + ch * ay[i],
                            v0z[i] + ch * az[i],
                        ],
                    )
                });
            }
            solver.update(p);
            let q = p.view_mut();
            let (vx, vy, vz) = q.velocity.as_span().components();
            let (ax, ay, az) = q.acceleration.as_span().components();
            b.update_each((sum_x.reborrow(), sum_v.reborrow()), |i, (sx, sv)| {
                (
                    [sx[0] + w * vx[i], sx[1] + w * vy[i], sx[2] + w * vz[i]],
                    [sv[0] + w * ax[i], sv[1] + w * ay[i], sv[2] + w * az[i]],
                )
            });
        }
        {
            let q = p.view_mut();
            let (x0x, x0y, x0z) = x0.components();
            let (v0x, v0y, v0z) = v0.components();
            let (sxx, sxy, sxz) = sum_x.as_span().components();
            let (svx, svy, svz) = sum_v.as_span().components();
            b.for_each_particle((q.position, q.velocity), |i| {
                (
                    [
                        x0x[i] + h6 * sxx[i],
                        x0y[i] + h6 * sxy[i],
                        x0z[i] + h6 * sxz[i],
                    ],
                    [
                        v0x[i] + h6 * svx[i],
                        v0y[i] + h6 * svy[i],
                        v0z[i] + h6 * svz[i],
                    ],
                )
            });
        }
        solver.update(p);
    }
}
