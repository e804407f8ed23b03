//! The moving-cloud passes on the device against the CPU's: the particle velocities' MLS
//! gradients and the ALE flux pass (interface velocities, the relative-speed Rusanov flux, the
//! upwinded `-u w` part of the other fluxes).

use mote_cloud::equations::{Burgers, Equation, Euler, LinearAdvection};
use mote_cloud::flux::FluxKind;
use mote_cloud::mls::default_radius_factor;
use mote_cloud::motion::{Motion, builtin};
use mote_cloud::scheme::{Formulation, Muscl, Velocities};
use mote_cloud::{Cloud, NeighbourList, NeighbourSearch, RowMajor, SlotLayout, SlotMajor, Weight};
use mote_core::{CpuBackend, Precision};
use mote_gpu::{
    DeviceCloud, DeviceEquation, DeviceLayout, DeviceMuscl, DeviceNeighbours, Gpu, GpuFloat,
    GpuNeighbourSearch,
};

use crate::gpu;
use crate::muscl::{box_cloud, difference, initial_with_jump};
use crate::search::lattice;

/// Device and CPU results side by side: the velocity gradients, then `du`.
type Results<R> = ((Vec<R>, Vec<R>), (Vec<R>, Vec<R>));

/// One configuration: the cloud, the scheme's order and flux.
struct Case<'a, R: GpuFloat, const D: usize> {
    what: &'a str,
    cloud: &'a Cloud<R, D>,
    order: usize,
    flux: FluxKind,
}

/// The CPU's and the device's velocity gradients and `du/dt` on a cloud whose particles move
/// with the built-in rotation (peak speed 0.3): `((device, cpu) gradients, (device, cpu) du)`.
fn passes<R: GpuFloat, const D: usize, E: Equation<R, D>, L: SlotLayout>(
    g: &Gpu,
    case: &Case<'_, R, D>,
    eq: E,
    device_eq: DeviceEquation,
    layout: DeviceLayout,
) -> Results<R> {
    let cloud = case.cloud;
    let n = cloud.len();
    let m = eq.variables();
    let radius = default_radius_factor::<D>(case.order) * cloud.spacing()[0];
    let mut row = NeighbourList::<RowMajor>::default();
    NeighbourSearch::new(radius)
        .unwrap()
        .build(cloud, CpuBackend::Serial, &mut row)
        .unwrap();
    let list: NeighbourList<L> = row.to_layout(CpuBackend::Serial).unwrap();
    let mut cpu = Muscl::<R, D, E>::new(
        eq,
        case.order,
        Formulation::MlsDivergence,
        Weight::default(),
    )
    .unwrap()
    .with_flux(case.flux)
    .unwrap();
    cpu.prepare(cloud, &list, CpuBackend::Serial).unwrap();
    let geometry = cloud.geometry();
    let u: Vec<&[R]> = (0..m).map(|v| cloud.state(v)).collect();
    // The particle velocities and their gradients.
    let motion = builtin::<D>("rotation", 0.3, [0.0; D], [1.0; D]).unwrap();
    let mut w = vec![R::cast(0.0); D * n];
    {
        let mut parts = w.chunks_mut(n);
        let out: [&mut [R]; D] = std::array::from_fn(|_| parts.next().unwrap());
        motion.velocities(0.0, geometry.positions, &u, out, CpuBackend::Serial);
    }
    let mut grad = vec![R::cast(0.0); D * D * n];
    let ws: [&[R]; D] = std::array::from_fn(|a| &w[a * n..(a + 1) * n]);
    cpu.velocity_gradients(&list, ws, &mut grad, CpuBackend::Serial);
    let mut du = vec![R::cast(0.0); m * n];
    cpu.derivatives_pass(&geometry, &list, &u, CpuBackend::Serial);
    let velocities = Velocities { w: ws, grad: &grad };
    cpu.moving_flux_pass(
        &geometry,
        &list,
        &u,
        du.chunks_mut(n).collect(),
        CpuBackend::Serial,
        geometry.orders,
        None,
        Some(velocities),
    );

    let dc = DeviceCloud::upload(g, cloud).unwrap();
    let orders: Vec<u32> = cloud.orders().iter().map(|&o| o as u32).collect();
    let orders = g.upload("order", &orders);
    let mut ds = GpuNeighbourSearch::new(g, radius).unwrap();
    let mut dl = DeviceNeighbours::new(g, layout);
    ds.build(g, &dc, &mut dl).unwrap();
    let mut dev = DeviceMuscl::<R>::new::<D>(g, device_eq, case.order, Weight::default())
        .unwrap()
        .with_flux(case.flux)
        .unwrap();
    dev.prepare(g, &dc, &dl).unwrap();
    let state: Vec<R> = u.concat();
    let du_state = g.upload("state", &state);
    let dw = g.upload("velocity", &w);
    let dgrad = g.output::<R>("velocity_gradient", D * D * n);
    let ddu = g.output::<R>("du", m * n);
    dev.velocity_gradients(g, &dc, &dl, &dw, &dgrad).unwrap();
    dev.derivatives_pass(g, &dc, &dl, &du_state).unwrap();
    dev.moving_flux_pass(g, &dc, &dl, &orders, &du_state, &ddu, &dw, &dgrad)
        .unwrap();
    let (dev_grad, dev_du) = (g.download(&dgrad).unwrap(), g.download(&ddu).unwrap());

    // The motion must matter, or the case tests nothing: the fixed pass differs.
    let mut fixed = vec![R::cast(0.0); m * n];
    cpu.flux_pass(
        &geometry,
        &list,
        &u,
        fixed.chunks_mut(n).collect(),
        CpuBackend::Serial,
        geometry.orders,
        None,
    );
    let change = difference(&fixed, &du);
    assert!(
        change > 1e-3,
        "{}: the motion changed du by {change:e}",
        case.what
    );
    ((dev_grad, grad), (dev_du, du))
}

fn cases<R: GpuFloat>(g: &Gpu, bound: f64) -> f64 {
    let mut worst: f64 = 0.0;
    let mut check = |what: &str, ((ga, gb), (da, db)): Results<R>| {
        let (grad, du) = (difference(&ga, &gb), difference(&da, &db));
        worst = worst.max(grad).max(du);
        assert!(
            grad <= bound && du <= bound,
            "{} {what}: velocity gradients differ by {grad:e}, du by {du:e}",
            R::PRECISION.name()
        );
    };
    for order in [1, 2, 3] {
        // 1-D advection of a jump: Rusanov and upwind.
        let mut c1 = lattice::<R, 1>(1.0 / 60.0, true, 41);
        c1.orders_mut().fill(order as u8);
        initial_with_jump(&mut c1, false, 0.5);
        let eq1 = LinearAdvection::<1>::scalar([1.0], 1);
        let de = DeviceEquation::advection(&eq1).unwrap();
        for flux in [FluxKind::Rusanov, FluxKind::Upwind] {
            let case = Case {
                what: "1-D advection",
                cloud: &c1,
                order,
                flux,
            };
            check(
                case.what,
                passes::<R, 1, _, RowMajor>(
                    g,
                    &case,
                    eq1.clone(),
                    de.clone(),
                    DeviceLayout::RowMajor,
                ),
            );
        }
        // 2-D advection and Burgers on a mixed-order cloud, slot-major; central for advection.
        let mut c2 = lattice::<R, 2>(1.0 / 24.0, true, 42);
        for (i, o) in c2.orders_mut().iter_mut().enumerate() {
            *o = if i % 5 == 0 { 1 } else { order as u8 };
        }
        initial_with_jump(&mut c2, false, 0.0);
        let eq2 = LinearAdvection::<2>::scalar([1.0, 0.5], 1);
        let de = DeviceEquation::advection(&eq2).unwrap();
        let case = Case {
            what: "2-D advection, central, slot-major",
            cloud: &c2,
            order,
            flux: FluxKind::Central,
        };
        check(
            case.what,
            passes::<R, 2, _, SlotMajor>(g, &case, eq2, de, DeviceLayout::SlotMajor),
        );
        let case = Case {
            what: "2-D Burgers",
            cloud: &c2,
            order,
            flux: FluxKind::Rusanov,
        };
        let de = DeviceEquation::burgers(&Burgers::<2>);
        check(
            case.what,
            passes::<R, 2, _, RowMajor>(g, &case, Burgers::<2>, de, DeviceLayout::RowMajor),
        );
        // 2-D Euler with a density jump: Rusanov (both layouts), HLLC, central.
        let mut ce = box_cloud::<R, 2>(1.0 / 24.0, None, 44, 4);
        ce.orders_mut().fill(order as u8);
        initial_with_jump(&mut ce, true, 0.5);
        let eq = Euler::<2>::new(1.4).unwrap();
        let de = DeviceEquation::euler(&eq);
        for (flux, slot_major) in [
            (FluxKind::Rusanov, false),
            (FluxKind::Rusanov, true),
            (FluxKind::Hllc, false),
            (FluxKind::Central, true),
        ] {
            let case = Case {
                what: "2-D Euler",
                cloud: &ce,
                order,
                flux,
            };
            let result = if slot_major {
                passes::<R, 2, _, SlotMajor>(
                    g,
                    &case,
                    eq.clone(),
                    de.clone(),
                    DeviceLayout::SlotMajor,
                )
            } else {
                passes::<R, 2, _, RowMajor>(
                    g,
                    &case,
                    eq.clone(),
                    de.clone(),
                    DeviceLayout::RowMajor,
                )
            };
            check(
                &format!("2-D Euler, {flux}, slot-major {slot_major}"),
                result,
            );
        }
    }
    eprintln!(
        "{}: worst device/CPU difference of the velocity gradients and the moving du \
         {worst:.2e}",
        R::PRECISION.name()
    );
    worst
}

#[test]
fn device_moving_cloud_passes_agree_with_the_cpu() {
    let Some(g) = gpu() else {
        return;
    };
    cases::<f32>(&g, 1e-5);
    if g.supports(Precision::F64) {
        cases::<f64>(&g, 1e-12);
    }
}

#[test]
fn a_moving_flux_pass_needs_the_mls_divergence_formulation() {
    let Some(g) = gpu() else {
        return;
    };
    let mut cloud = lattice::<f32, 1>(1.0 / 20.0, true, 43);
    initial_with_jump(&mut cloud, false, 0.0);
    let n = cloud.len();
    let eq = LinearAdvection::<1>::scalar([1.0], 1);
    let dc = DeviceCloud::upload(&g, &cloud).unwrap();
    let mut ds = GpuNeighbourSearch::new(&g, default_radius_factor::<1>(2) / 20.0).unwrap();
    let mut dl = DeviceNeighbours::new(&g, DeviceLayout::RowMajor);
    ds.build(&g, &dc, &mut dl).unwrap();
    let mut dev = DeviceMuscl::<f32>::new::<1>(
        &g,
        DeviceEquation::advection(&eq).unwrap(),
        2,
        Weight::default(),
    )
    .unwrap()
    .with_formulation(Formulation::Conservative);
    dev.prepare(&g, &dc, &dl).unwrap();
    let orders = g.upload("order", &vec![2u32; n]);
    let u = g.upload("state", cloud.state(0));
    let (du, w, grad) = (
        g.output::<f32>("du", n),
        g.output::<f32>("w", n),
        g.output::<f32>("grad", n),
    );
    let err = dev
        .moving_flux_pass(&g, &dc, &dl, &orders, &u, &du, &w, &grad)
        .expect_err("the conservative formulation refused")
        .to_string();
    assert!(err.contains("MLS-divergence"), "{err}");
}

/// A moving run on both sides: the built-in motion `motion` (peak speed 0.3), explicit
/// `stepper`, `steps` steps at 0.4 of the stable step. Returns the state and position
/// differences.
#[allow(clippy::too_many_arguments)]
fn run_moving<R: GpuFloat, const D: usize, E: Equation<R, D> + Clone, L: SlotLayout>(
    g: &Gpu,
    case: &Case<'_, R, D>,
    eq: E,
    device_eq: DeviceEquation,
    layout: DeviceLayout,
    stepper: &str,
    motion: &str,
    steps: usize,
) -> (f64, f64) {
    let cloud = case.cloud;
    let radius = default_radius_factor::<D>(case.order) * cloud.spacing()[0];
    let make_motion = || builtin::<D>(motion, 0.3, [0.0; D], [1.0; D]).unwrap();
    let tableau = mote_cloud::time::Tableau::by_name(stepper).unwrap();
    let scheme = Muscl::<R, D, E>::new(
        eq,
        case.order,
        Formulation::MlsDivergence,
        Weight::default(),
    )
    .unwrap()
    .with_flux(case.flux)
    .unwrap();
    let mut cpu = mote_cloud::MeshlessSimulation::<R, D, E, L>::new(
        cloud.clone(),
        radius,
        scheme,
        tableau.clone(),
        CpuBackend::Serial,
    )
    .unwrap()
    .with_motion(make_motion(), f64::INFINITY)
    .unwrap();
    let scheme = DeviceMuscl::<R>::new::<D>(g, device_eq, case.order, Weight::default())
        .unwrap()
        .with_flux(case.flux)
        .unwrap();
    let mut dev =
        mote_gpu::DeviceSimulation::<R, D>::new(g, cloud, radius, scheme, tableau, layout)
            .unwrap()
            .with_motion(g, make_motion())
            .unwrap();
    assert!(dev.is_moving());
    let dt = cpu.stable_dt(0.4);
    let ddt = dev.stable_dt(g, 0.4).unwrap();
    assert!(
        ((dt - ddt) / dt).abs() < 1e-5,
        "{}: stable dt {dt} on the CPU, {ddt} on the device",
        case.what
    );
    for _ in 0..steps {
        cpu.step(dt).unwrap();
        dev.step(g, dt).unwrap();
    }
    let n = cloud.len();
    let m = cloud.variables();
    let host: Vec<R> = (0..m).flat_map(|v| cpu.cloud.state(v).to_vec()).collect();
    let host_x: Vec<R> = cpu.cloud.positions().concat();
    let dev_x: Vec<R> = dev.positions(g).unwrap().concat();
    let start_x: Vec<R> = cloud.positions().concat();
    // The particles must have moved (by more than a thousandth of the spacing somewhere).
    let moved = host_x
        .iter()
        .zip(&start_x)
        .map(|(a, b)| (a.as_f64() - b.as_f64()).abs())
        .fold(0.0f64, f64::max);
    assert!(
        moved > 1e-3 * cloud.spacing()[0],
        "{}: the particles moved only {moved:e}",
        case.what
    );
    assert_eq!(dev.steps(), steps as u64);
    let state = difference(&dev.state(g).unwrap(), &host);
    assert_eq!(dev_x.len(), D * n);
    (state, difference(&dev_x, &host_x))
}

fn moving_cases<R: GpuFloat>(g: &Gpu, bound: f64) -> f64 {
    let mut worst: f64 = 0.0;
    let mut check = |what: &str, (state, x): (f64, f64)| {
        worst = worst.max(state).max(x);
        assert!(
            state <= bound && x <= bound,
            "{} {what}: moving states differ by {state:e}, positions by {x:e}",
            R::PRECISION.name()
        );
    };
    // 2-D advection on counter-rotating cells, MUSCL3, SSP-RK3, row-major.
    let mut c2 = lattice::<R, 2>(1.0 / 20.0, true, 45);
    c2.orders_mut().fill(3);
    initial_with_jump(&mut c2, false, 0.0);
    let eq2 = LinearAdvection::<2>::scalar([1.0, 0.5], 1);
    let de = DeviceEquation::advection(&eq2).unwrap();
    let case = Case {
        what: "2-D advection, rotation",
        cloud: &c2,
        order: 3,
        flux: FluxKind::Rusanov,
    };
    check(
        case.what,
        run_moving::<R, 2, _, RowMajor>(
            g,
            &case,
            eq2,
            de,
            DeviceLayout::RowMajor,
            "rk3",
            "rotation",
            5,
        ),
    );
    // 2-D Euler in a shear flow, MUSCL2, Heun, HLLC, slot-major.
    let mut ce = box_cloud::<R, 2>(1.0 / 20.0, None, 46, 4);
    ce.orders_mut().fill(2);
    initial_with_jump(&mut ce, true, 0.0);
    let eq = Euler::<2>::new(1.4).unwrap();
    let de = DeviceEquation::euler(&eq);
    let case = Case {
        what: "2-D Euler, shear, HLLC",
        cloud: &ce,
        order: 2,
        flux: FluxKind::Hllc,
    };
    check(
        case.what,
        run_moving::<R, 2, _, SlotMajor>(
            g,
            &case,
            eq,
            de,
            DeviceLayout::SlotMajor,
            "rk2",
            "shear",
            5,
        ),
    );
    // 1-D Burgers translated uniformly (positions wrap around the period), MUSCL2, RK4.
    let mut c1 = lattice::<R, 1>(1.0 / 50.0, true, 47);
    c1.orders_mut().fill(2);
    initial_with_jump(&mut c1, false, 0.0);
    let de = DeviceEquation::burgers(&Burgers::<1>);
    let case = Case {
        what: "1-D Burgers, translation",
        cloud: &c1,
        order: 2,
        flux: FluxKind::Rusanov,
    };
    check(
        case.what,
        run_moving::<R, 1, _, RowMajor>(
            g,
            &case,
            Burgers::<1>,
            de,
            DeviceLayout::RowMajor,
            "rk4",
            "shear",
            8,
        ),
    );
    eprintln!(
        "{}: worst device/CPU difference of moving states and positions {worst:.2e}",
        R::PRECISION.name()
    );
    worst
}

#[test]
fn device_moving_simulation_steps_follow_the_cpu() {
    let Some(g) = gpu() else {
        return;
    };
    moving_cases::<f32>(&g, 1e-5);
    if g.supports(Precision::F64) {
        moving_cases::<f64>(&g, 1e-12);
    }
}

#[test]
fn what_moving_device_runs_lack_is_refused() {
    let Some(g) = gpu() else {
        return;
    };
    let radius = default_radius_factor::<2>(2) / 16.0;
    let eq = LinearAdvection::<2>::scalar([1.0, 0.5], 1);
    let de = DeviceEquation::advection(&eq).unwrap();
    let motion = || builtin::<2>("rotation", 0.3, [0.0; 2], [1.0; 2]).unwrap();
    let sim = |cloud: &Cloud<f32, 2>, formulation| {
        let scheme = DeviceMuscl::<f32>::new::<2>(&g, de.clone(), 2, Weight::default())
            .unwrap()
            .with_formulation(formulation);
        mote_gpu::DeviceSimulation::<f32, 2>::new(
            &g,
            cloud,
            radius,
            scheme,
            mote_cloud::time::Tableau::ssp_rk3(),
            DeviceLayout::RowMajor,
        )
        .unwrap()
    };
    let mut periodic = lattice::<f32, 2>(1.0 / 16.0, true, 48);
    initial_with_jump(&mut periodic, false, 0.0);
    let mood = || mote_cloud::mood::MoodSettings::by_name("u1", "epd1").unwrap();
    let refused = |r: Result<mote_gpu::DeviceSimulation<f32, 2>, mote_gpu::GpuError>,
                   what: &str| {
        let e = r.err().expect("refused").to_string();
        assert!(e.contains(what), "{e}");
    };
    refused(
        sim(&periodic, Formulation::Conservative).with_motion(&g, motion()),
        "MLS-divergence",
    );
    refused(
        sim(&periodic, Formulation::MlsDivergence)
            .with_mood(&g, mood())
            .unwrap()
            .with_motion(&g, motion()),
        "MOOD",
    );
    refused(
        sim(&periodic, Formulation::MlsDivergence)
            .with_motion(&g, motion())
            .unwrap()
            .with_mood(&g, mood()),
        "moving",
    );
    let mut walled = box_cloud::<f32, 2>(1.0 / 16.0, Some(2), 49, 1);
    initial_with_jump(&mut walled, false, 0.0);
    refused(
        sim(&walled, Formulation::MlsDivergence).with_motion(&g, motion()),
        "boundary particles",
    );
}
