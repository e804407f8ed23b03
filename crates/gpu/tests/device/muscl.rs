//! The MUSCL stage passes and Runge-Kutta updates on the device against the CPU's.

// Set-up loops index positions, states and components together.
#![allow(clippy::needless_range_loop)]

use std::f64::consts::TAU;

use mote_cloud::equations::{Equation, Euler, LinearAdvection};
use mote_cloud::mls::default_radius_factor;
use mote_cloud::scheme::{Formulation, Muscl};
use mote_cloud::{Cloud, NeighbourList, NeighbourSearch, RowMajor, SlotLayout, SlotMajor, Weight};
use mote_core::{CpuBackend, Precision};
use mote_gpu::{
    DeviceCloud, DeviceEquation, DeviceLayout, DeviceMuscl, DeviceNeighbours, Gpu, GpuFloat,
    GpuNeighbourSearch,
};

use crate::gpu;
use crate::search::lattice;

/// A smooth state: a sine profile for advection; for Euler a density and pressure wave with a
/// uniform flow.
fn initial<R: GpuFloat, const D: usize>(cloud: &mut Cloud<R, D>, euler: bool) {
    let n = cloud.len();
    let x: Vec<[f64; D]> = (0..n).map(|i| cloud.position_of(i)).collect();
    let wave = |p: &[f64; D]| p.iter().map(|&c| (TAU * c).sin()).product::<f64>();
    if !euler {
        let u = cloud.state_var_mut(0);
        for i in 0..n {
            u[i] = R::cast(1.0 + 0.5 * wave(&x[i]));
        }
        return;
    }
    let gamma = 1.4;
    for i in 0..n {
        let rho = 1.0 + 0.2 * wave(&x[i]);
        let p = 1.0 + 0.1 * (TAU * x[i][0]).cos();
        let v: [f64; D] = std::array::from_fn(|d| 0.5 - 0.3 * d as f64);
        let kinetic: f64 = v.iter().map(|c| 0.5 * rho * c * c).sum();
        cloud.state_var_mut(0)[i] = R::cast(rho);
        for d in 0..D {
            cloud.state_var_mut(1 + d)[i] = R::cast(rho * v[d]);
        }
        cloud.state_var_mut(D + 1)[i] = R::cast(p / (gamma - 1.0) + kinetic);
    }
}

/// Norm-wise relative difference.
fn difference<R: GpuFloat>(a: &[R], b: &[R]) -> f64 {
    let (mut d, mut s) = (0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        d += (x.as_f64() - y.as_f64()).powi(2);
        s += y.as_f64().powi(2);
    }
    (d / s).sqrt()
}

/// Device and CPU results side by side.
type Pair<R> = (Vec<R>, Vec<R>);

/// The CPU's and the device's `du/dt` (variables end to end), and after `steps` of Heun's
/// method (RK2) with step `dt`, the two states.
fn run<R: GpuFloat, const D: usize, E: Equation<R, D> + Clone, L: SlotLayout>(
    g: &Gpu,
    cloud: &Cloud<R, D>,
    eq: E,
    device_eq: DeviceEquation,
    order: usize,
    layout: DeviceLayout,
    steps: usize,
) -> (Pair<R>, Pair<R>, [f64; 2]) {
    let n = cloud.len();
    let m = eq.variables();
    let radius = default_radius_factor::<D>(order) * cloud.spacing()[0];
    let mut search = NeighbourSearch::new(radius).unwrap();
    let mut row = NeighbourList::<RowMajor>::default();
    search.build(cloud, CpuBackend::Serial, &mut row).unwrap();
    let list: NeighbourList<L> = row.to_layout(CpuBackend::Serial).unwrap();
    let mut cpu =
        Muscl::<R, D, E>::new(eq, order, Formulation::MlsDivergence, Weight::default()).unwrap();
    cpu.prepare(cloud, &list, CpuBackend::Serial).unwrap();
    let geometry = cloud.geometry();
    let rhs = |cpu: &mut Muscl<R, D, E>, u: &[R]| -> Vec<R> {
        let slices: Vec<&[R]> = u.chunks(n).collect();
        let mut du = vec![R::cast(0.0); n * m];
        cpu.rhs(
            &geometry,
            &list,
            &slices,
            du.chunks_mut(n).collect(),
            CpuBackend::Serial,
        );
        du
    };
    let u0: Vec<R> = (0..m).flat_map(|v| cloud.state(v).to_vec()).collect();
    let cpu_du = rhs(&mut cpu, &u0);

    let dc = DeviceCloud::upload(g, cloud).unwrap();
    let mut ds = GpuNeighbourSearch::new(g, radius).unwrap();
    let mut dl = DeviceNeighbours::new(g, layout);
    ds.build(g, &dc, &mut dl).unwrap();
    let mut dev = DeviceMuscl::<R>::new::<D>(g, device_eq, order, Weight::default()).unwrap();
    dev.prepare(g, &dc, &dl).unwrap();
    let orders: Vec<u32> = cloud.orders().iter().map(|&o| o as u32).collect();
    let orders = g.upload("order", &orders);
    let u = g.upload("state", &u0);
    let (k1, k2, tmp) = (
        g.output::<R>("k1", n * m),
        g.output::<R>("k2", n * m),
        g.output::<R>("stage", n * m),
    );
    dev.rhs(g, &dc, &dl, &orders, &u, &k1).unwrap();
    let dev_du = g.download(&k1).unwrap();
    // The geometric CFL step, reduced on the device.
    let slices: Vec<&[R]> = u0.chunks(n).collect();
    let dts = [
        dev.stable_dt(g, &dc, &dl, &u, 0.4).unwrap(),
        cpu.stable_dt(cloud, &list, &slices, 0.4, CpuBackend::Serial),
    ];

    // Heun: u1 = u + dt k1; u <- (u + dt/2 k1) + dt/2 k2, the same operations on both sides.
    let dt = R::cast(0.2 * cloud.spacing()[0]);
    let half = R::cast(0.5) * dt;
    let mut uc = u0.clone();
    for _ in 0..steps {
        let a = rhs(&mut cpu, &uc);
        let u1: Vec<R> = uc.iter().zip(&a).map(|(&x, &k)| x + dt * k).collect();
        let b = rhs(&mut cpu, &u1);
        uc = uc
            .iter()
            .zip(&a)
            .zip(&b)
            .map(|((&x, &ka), &kb)| {
                let t = x + half * ka;
                t + half * kb
            })
            .collect();
    }
    for _ in 0..steps {
        dev.rhs(g, &dc, &dl, &orders, &u, &k1).unwrap();
        g.axpy(&u, &k1, dt, &tmp).unwrap();
        dev.rhs(g, &dc, &dl, &orders, &tmp, &k2).unwrap();
        g.axpy(&u, &k1, half, &tmp).unwrap();
        g.axpy(&tmp, &k2, half, &u).unwrap();
    }
    g.sync().unwrap();
    let ud = g.download(&u).unwrap();
    assert!(ud.iter().all(|x| x.as_f64().is_finite()));
    ((dev_du, cpu_du), (ud, uc), dts)
}

fn cases<R: GpuFloat>(g: &Gpu, bound: f64) {
    let mut worst: f64 = 0.0;
    let mut check = |what: &str, ((a, b), (c, d), dt): (Pair<R>, Pair<R>, [f64; 2])| {
        let (rhs, state) = (difference(&a, &b), difference(&c, &d));
        let dt = ((dt[0] - dt[1]) / dt[1]).abs();
        worst = worst.max(rhs).max(state).max(dt);
        assert!(
            rhs <= bound && state <= bound && dt <= bound,
            "{} {what}: du {rhs:e}, state after the steps {state:e}, stable dt {dt:e}",
            R::PRECISION.name()
        );
    };
    for order in [1, 2, 3, 4] {
        // Scalar advection in 1, 2 and 3-D (3-D up to order 3: the degree-4 fits there have 34
        // basis functions, an unrolled kernel the software driver compiles slowly). (`du` sums terms of size |u| / h that cancel to
        // |du|: its f32 difference from the CPU grows like the round-off times 1 / h, 6e-6 at
        // 100 particles in 1-D; the states after the steps agree to f32 round-off.)
        let mut c1 = lattice::<R, 1>(1.0 / 100.0, true, 21);
        c1.orders_mut().fill(order as u8);
        initial(&mut c1, false);
        let eq1 = LinearAdvection::<1>::scalar([1.0], 1);
        let de = DeviceEquation::advection(&eq1).unwrap();
        check(
            "1-D advection",
            run::<R, 1, _, RowMajor>(g, &c1, eq1, de, order, DeviceLayout::RowMajor, 5),
        );
        let mut c2 = lattice::<R, 2>(1.0 / 30.0, true, 22);
        // Mixed orders: every fifth particle first order.
        for (i, o) in c2.orders_mut().iter_mut().enumerate() {
            *o = if i % 5 == 0 { 1 } else { order as u8 };
        }
        initial(&mut c2, false);
        let eq2 = LinearAdvection::<2>::scalar([1.0, 0.5], 1);
        let de = DeviceEquation::advection(&eq2).unwrap();
        check(
            "2-D advection, slot-major",
            run::<R, 2, _, SlotMajor>(g, &c2, eq2.clone(), de, order, DeviceLayout::SlotMajor, 5),
        );
        if order <= 3 {
            let mut c3 = lattice::<R, 3>(1.0 / 10.0, true, 23);
            c3.orders_mut().fill(order as u8);
            initial(&mut c3, false);
            let eq3 = LinearAdvection::<3>::scalar([1.0, 0.5, -0.25], 1);
            let de = DeviceEquation::advection(&eq3).unwrap();
            check(
                "3-D advection",
                run::<R, 3, _, RowMajor>(g, &c3, eq3, de, order, DeviceLayout::RowMajor, 3),
            );
        }
        // Euler in 2-D, both layouts.
        let mut ce = Cloud::<R, 2>::lattice(
            mote_cloud::Domain::new_box([0.0; 2], [1.0; 2], [true; 2]).unwrap(),
            mote_cloud::LatticeOptions {
                spacing: 1.0 / 30.0,
                jitter: 0.6,
                seed: 24,
                boundary_layers: 0,
            },
            4,
        )
        .unwrap();
        ce.orders_mut().fill(order as u8);
        initial(&mut ce, true);
        let eq = Euler::<2>::new(1.4).unwrap();
        let de = DeviceEquation::euler(&eq);
        check(
            "2-D Euler, row-major",
            run::<R, 2, _, RowMajor>(g, &ce, eq.clone(), de, order, DeviceLayout::RowMajor, 5),
        );
        check(
            "2-D Euler, slot-major",
            run::<R, 2, _, SlotMajor>(g, &ce, eq, de, order, DeviceLayout::SlotMajor, 5),
        );
    }
    eprintln!(
        "{}: worst device/CPU difference of du, the stable dt and the state after RK2 steps \
         {worst:.2e}",
        R::PRECISION.name()
    );
}

#[test]
fn device_muscl_passes_and_rk_steps_agree_with_the_cpu() {
    let Some(g) = gpu() else {
        return;
    };
    cases::<f32>(&g, 1e-5);
    if g.supports(Precision::F64) {
        cases::<f64>(&g, 1e-12);
    }
}

#[test]
fn what_the_device_passes_lack_is_refused_by_name() {
    let Some(g) = gpu() else {
        return;
    };
    let eq = Euler::<2>::new(1.4).unwrap();
    let err = DeviceMuscl::<f32>::new::<2>(&g, DeviceEquation::euler(&eq), 6, Weight::default())
        .err()
        .unwrap();
    assert!(err.to_string().contains("MUSCL order"), "{err}");
    let system = LinearAdvection::<2>::system(vec![vec![1.0, 0.0, 0.0, 1.0]; 2]).unwrap();
    let err = DeviceEquation::advection(&system).unwrap_err();
    assert!(
        err.to_string().contains("not supported on the GPU backend"),
        "{err}"
    );
}
