//! Whole steps on the device (`DeviceSimulation`: limiters, boundary conditions, MOOD) against
//! the CPU's `MeshlessSimulation` on the same cloud.

use mote_cloud::boundary::{Boundaries, Dirichlet, Outflow, SlipWall};
use mote_cloud::equations::{Equation, Euler, LinearAdvection};
use mote_cloud::flux::FluxKind;
use mote_cloud::mls::default_radius_factor;
use mote_cloud::mood::{MoodSettings, MoodStats};
use mote_cloud::scheme::{Formulation, Limiter, Muscl};
use mote_cloud::time::Tableau;
use mote_cloud::{Cloud, MeshlessSimulation, RowMajor, SlotLayout, SlotMajor, Weight};
use mote_core::memory::MemoryModel;
use mote_core::{Budgeted, CapacityUnit, CpuBackend, Precision};
use mote_gpu::{
    DeviceEquation, DeviceLayout, DeviceMuscl, DeviceSimulation, Gpu, GpuError, GpuFloat,
};

use crate::gpu;
use crate::muscl::{box_cloud, difference, initial_with_jump};

/// One configuration of a run on both sides.
struct Case<'a, R: GpuFloat, const D: usize> {
    what: String,
    cloud: Cloud<R, D>,
    order: usize,
    stepper: &'static str,
    limiter: Limiter,
    flux: FluxKind,
    formulation: Formulation,
    mood: MoodSettings,
    boundaries: Option<&'a dyn Fn() -> Boundaries<R, D>>,
    steps: usize,
}

/// Runs `case` on the CPU and the device; returns the state difference and both MOOD
/// statistics.
fn compare<R: GpuFloat, const D: usize, E: Equation<R, D> + Clone, L: SlotLayout>(
    g: &Gpu,
    case: &Case<'_, R, D>,
    eq: E,
    device_eq: DeviceEquation,
    layout: DeviceLayout,
) -> (f64, MoodStats, MoodStats) {
    let radius = default_radius_factor::<D>(case.order) * case.cloud.spacing()[0];
    let scheme = Muscl::<R, D, E>::new(eq, case.order, case.formulation, Weight::default())
        .unwrap()
        .with_limiter(case.limiter)
        .unwrap()
        .with_flux(case.flux)
        .unwrap();
    let tableau = Tableau::by_name(case.stepper).unwrap();
    let mut cpu = MeshlessSimulation::<R, D, E, L>::new(
        case.cloud.clone(),
        radius,
        scheme,
        tableau.clone(),
        CpuBackend::Serial,
    )
    .unwrap()
    .with_mood(case.mood)
    .unwrap();
    let scheme = DeviceMuscl::<R>::new::<D>(g, device_eq, case.order, Weight::default())
        .unwrap()
        .with_limiter::<D>(case.limiter)
        .unwrap()
        .with_flux(case.flux)
        .unwrap()
        .with_formulation(case.formulation);
    let mut dev = DeviceSimulation::<R, D>::new(g, &case.cloud, radius, scheme, tableau, layout)
        .unwrap()
        .with_mood(g, case.mood)
        .unwrap();
    if let Some(make) = case.boundaries {
        cpu = cpu.with_boundaries(make()).unwrap();
        dev = dev.with_boundaries(g, &case.cloud, make()).unwrap();
    }
    let dt = cpu.stable_dt(0.4);
    let ddt = dev.stable_dt(g, 0.4).unwrap();
    assert!(
        ((dt - ddt) / dt).abs() < 1e-5,
        "{}: stable dt {dt} on the CPU, {ddt} on the device",
        case.what
    );
    for _ in 0..case.steps {
        cpu.step(dt).unwrap();
        dev.step(g, dt).unwrap();
    }
    let n = case.cloud.len();
    let m = case.cloud.variables();
    let host: Vec<R> = (0..m).flat_map(|v| cpu.cloud.state(v).to_vec()).collect();
    let device = dev.state(g).unwrap();
    assert_eq!(device.len(), n * m);
    (
        difference(&device, &host),
        dev.take_mood_stats(),
        cpu.take_mood_stats(),
    )
}

fn cases<R: GpuFloat>(g: &Gpu, bound: f64) -> f64 {
    let mut worst: f64 = 0.0;
    let mut check = |what: &str, (diff, dev, cpu): (f64, MoodStats, MoodStats), mood: bool| {
        worst = worst.max(diff);
        assert!(
            diff <= bound,
            "{} {what}: states differ by {diff:e} (MOOD device {dev:?}, CPU {cpu:?})",
            R::PRECISION.name()
        );
        assert_eq!(dev, cpu, "{} {what}: MOOD statistics", R::PRECISION.name());
        if mood {
            // The case must make MOOD act, or it would test nothing.
            assert!(dev.reductions > 0, "{what}: MOOD reduced nothing: {dev:?}");
        }
    };
    let mood = |c: &str, s: &str| MoodSettings::by_name(c, s).unwrap();
    // 1-D advection of a jump, order 3, every criterion and halo strategy.
    let advection = LinearAdvection::<1>::scalar([1.0], 1);
    let dadv = DeviceEquation::advection(&advection).unwrap();
    for (c, s) in [
        ("u1", "epd0"),
        ("u1", "epd1"),
        ("u2", "epd2"),
        ("always", "strict"),
    ] {
        let mut cloud = box_cloud::<R, 1>(1.0 / 100.0, None, 41, 1);
        cloud.orders_mut().fill(3);
        initial_with_jump(&mut cloud, false, 1.0);
        let case = Case {
            what: format!("1-D advection of a jump, order 3, rk3, MOOD {c} {s}"),
            cloud,
            order: 3,
            stepper: "rk3",
            limiter: Limiter::none(),
            flux: FluxKind::Rusanov,
            formulation: Formulation::MlsDivergence,
            mood: mood(c, s),
            boundaries: None,
            steps: 4,
        };
        check(
            &case.what,
            compare::<R, 1, _, RowMajor>(
                g,
                &case,
                advection.clone(),
                dadv.clone(),
                DeviceLayout::RowMajor,
            ),
            true,
        );
    }
    // 2-D Euler with a density jump, periodic, order 3, MOOD u2 epd1 in both layouts.
    let euler = Euler::<2>::new(1.4).unwrap();
    let deu = DeviceEquation::euler(&euler);
    let mut cloud = box_cloud::<R, 2>(1.0 / 24.0, None, 42, 4);
    cloud.orders_mut().fill(3);
    initial_with_jump(&mut cloud, true, 1.0);
    let case = Case {
        what: "2-D Euler with a jump, order 3, rk2, MOOD u2 epd1".into(),
        cloud,
        order: 3,
        stepper: "rk2",
        limiter: Limiter::none(),
        flux: FluxKind::Rusanov,
        formulation: Formulation::MlsDivergence,
        mood: mood("u2", "epd1"),
        boundaries: None,
        steps: 3,
    };
    check(
        &format!("{}, row-major", case.what),
        compare::<R, 2, _, RowMajor>(g, &case, euler.clone(), deu.clone(), DeviceLayout::RowMajor),
        true,
    );
    check(
        &format!("{}, slot-major", case.what),
        compare::<R, 2, _, SlotMajor>(
            g,
            &case,
            euler.clone(),
            deu.clone(),
            DeviceLayout::SlotMajor,
        ),
        true,
    );
    // 2-D Euler in a walled box (slip walls along x, outflow and Dirichlet faces along y),
    // order 2: with a limiter and no MOOD, then with MOOD u1 strict.
    let make = || {
        Boundaries::<R, 2>::new()
            .with_axis(0, SlipWall::default())
            .with(Cloud::<R, 2>::face_tag(1, false), Outflow)
            .with(Cloud::<R, 2>::face_tag(1, true), Dirichlet)
    };
    let layers = Some(default_radius_factor::<2>(2) as usize);
    let mut cloud = box_cloud::<R, 2>(1.0 / 24.0, layers, 43, 4);
    cloud.orders_mut().fill(2);
    initial_with_jump(&mut cloud, true, 1.0);
    let mut case = Case {
        what: "2-D Euler in a walled box, order 2, rk3, Barth-Jespersen".into(),
        cloud,
        order: 2,
        stepper: "rk3",
        limiter: Limiter::by_name("bj", "soft").unwrap(),
        flux: FluxKind::Rusanov,
        formulation: Formulation::MlsDivergence,
        mood: MoodSettings::default(),
        boundaries: Some(&make),
        steps: 3,
    };
    check(
        &case.what,
        compare::<R, 2, _, RowMajor>(g, &case, euler.clone(), deu.clone(), DeviceLayout::RowMajor),
        false,
    );
    case.what = "2-D Euler in a walled box, order 2, rk3, MOOD u1 strict".into();
    case.limiter = Limiter::none();
    case.mood = mood("u1", "strict");
    check(
        &case.what,
        compare::<R, 2, _, SlotMajor>(
            g,
            &case,
            euler.clone(),
            deu.clone(),
            DeviceLayout::SlotMajor,
        ),
        true,
    );
    // The other numerical fluxes: HLLC in the walled box with MOOD and with a limiter, then
    // central on a smooth periodic flow.
    case.what = "2-D Euler in a walled box, order 2, rk3, HLLC, MOOD u1 epd1".into();
    case.flux = FluxKind::Hllc;
    case.mood = mood("u1", "epd1");
    check(
        &case.what,
        compare::<R, 2, _, RowMajor>(g, &case, euler.clone(), deu.clone(), DeviceLayout::RowMajor),
        true,
    );
    case.what = "2-D Euler in a walled box, order 2, rk3, HLLC, Venkatakrishnan".into();
    case.mood = MoodSettings::default();
    case.limiter = Limiter::by_name("vk", "soft").unwrap();
    check(
        &case.what,
        compare::<R, 2, _, SlotMajor>(
            g,
            &case,
            euler.clone(),
            deu.clone(),
            DeviceLayout::SlotMajor,
        ),
        false,
    );
    // The conservative formulation (antisymmetric face weights from the reverse slots).
    case.what = "2-D Euler in a walled box, order 2, rk3, HLLC, conservative, MOOD u1".into();
    case.formulation = Formulation::Conservative;
    case.limiter = Limiter::none();
    case.mood = mood("u1", "epd1");
    check(
        &case.what,
        compare::<R, 2, _, RowMajor>(g, &case, euler.clone(), deu.clone(), DeviceLayout::RowMajor),
        true,
    );
    case.what = "2-D Euler in a walled box, order 2, rk3, Rusanov, conservative, BJ".into();
    case.flux = FluxKind::Rusanov;
    case.limiter = Limiter::by_name("bj", "soft").unwrap();
    case.mood = MoodSettings::default();
    check(
        &case.what,
        compare::<R, 2, _, SlotMajor>(
            g,
            &case,
            euler.clone(),
            deu.clone(),
            DeviceLayout::SlotMajor,
        ),
        false,
    );
    let mut cloud = box_cloud::<R, 2>(1.0 / 20.0, None, 47, 4);
    cloud.orders_mut().fill(3);
    initial_with_jump(&mut cloud, true, 0.0);
    let case = Case {
        what: "2-D Euler, smooth, order 3, rk4, central".into(),
        cloud,
        order: 3,
        stepper: "rk4",
        limiter: Limiter::none(),
        flux: FluxKind::Central,
        formulation: Formulation::MlsDivergence,
        mood: MoodSettings::default(),
        boundaries: None,
        steps: 3,
    };
    check(
        &case.what,
        compare::<R, 2, _, RowMajor>(g, &case, euler, deu, DeviceLayout::RowMajor),
        false,
    );
    // Scalar advection with the upwind and central fluxes.
    for flux in [FluxKind::Upwind, FluxKind::Central] {
        let mut cloud = box_cloud::<R, 1>(1.0 / 100.0, None, 48, 1);
        cloud.orders_mut().fill(2);
        initial_with_jump(&mut cloud, false, 0.0);
        let case = Case {
            what: format!("1-D advection, order 2, rk3, {flux}"),
            cloud,
            order: 2,
            stepper: "rk3",
            limiter: Limiter::none(),
            flux,
            formulation: Formulation::MlsDivergence,
            mood: MoodSettings::default(),
            boundaries: None,
            steps: 4,
        };
        check(
            &case.what,
            compare::<R, 1, _, RowMajor>(
                g,
                &case,
                advection.clone(),
                dadv.clone(),
                DeviceLayout::RowMajor,
            ),
            false,
        );
    }
    worst
}

#[test]
fn device_simulation_steps_with_limiters_boundaries_and_mood_follow_the_cpu() {
    let Some(g) = gpu() else {
        return;
    };
    let worst = cases::<f32>(&g, 1e-5);
    eprintln!("f32: worst device/CPU state difference over whole steps {worst:.2e}");
    if g.supports(Precision::F64) {
        let worst = cases::<f64>(&g, 1e-12);
        eprintln!("f64: worst device/CPU state difference over whole steps {worst:.2e}");
    }
}

#[test]
fn a_non_finite_state_is_refused_naming_the_particle() {
    let Some(g) = gpu() else {
        return;
    };
    let mut cloud = box_cloud::<f32, 1>(1.0 / 50.0, None, 44, 1);
    cloud.state_var_mut(0).fill(1.0);
    cloud.state_var_mut(0)[7] = f32::NAN;
    let eq = LinearAdvection::<1>::scalar([1.0], 1);
    let scheme = DeviceMuscl::<f32>::new::<1>(
        &g,
        DeviceEquation::advection(&eq).unwrap(),
        2,
        Weight::default(),
    )
    .unwrap();
    let id = cloud.ids()[7];
    let err = DeviceSimulation::<f32, 1>::new(
        &g,
        &cloud,
        2.5 / 50.0,
        scheme,
        Tableau::by_name("rk2").unwrap(),
        DeviceLayout::RowMajor,
    )
    .err()
    .expect("a NaN in the initial state is refused")
    .to_string();
    assert!(
        err.contains(&format!("{id}")) && err.contains("before"),
        "{err}"
    );
}

#[test]
fn non_finite_values_are_found_by_their_bits_in_f32_and_f64() {
    let Some(g) = gpu() else {
        return;
    };
    // (`x - x != 0` would not do: the software driver folds it to false.)
    let x = g.upload("x", &[1.0f32, f32::MAX, f32::NAN, f32::INFINITY]);
    assert_eq!(g.first_non_finite(&x).unwrap(), Some(2));
    let x = g.upload("x", &[1.0f32, f32::MIN, 0.0, -f32::INFINITY]);
    assert_eq!(g.first_non_finite(&x).unwrap(), Some(3));
    let x = g.upload("x", &[1.0f32, f32::MAX, -0.0, f32::MIN_POSITIVE]);
    assert_eq!(g.first_non_finite(&x).unwrap(), None);
    if g.supports(Precision::F64) {
        let x = g.upload("x", &[f64::MAX, 2.0, f64::NAN, -f64::INFINITY]);
        assert_eq!(g.first_non_finite(&x).unwrap(), Some(2));
        let x = g.upload("x", &[f64::MAX, f64::MIN, 1e-310, 0.0]);
        assert_eq!(g.first_non_finite(&x).unwrap(), None);
    }
}

/// Builds the CPU and device simulations of `cloud` and steps both `steps` times.
#[allow(clippy::too_many_arguments)]
fn stepped<R: GpuFloat, const D: usize, E: Equation<R, D> + Clone>(
    g: &Gpu,
    cloud: &Cloud<R, D>,
    eq: E,
    device_eq: DeviceEquation,
    order: usize,
    boundaries: Option<&dyn Fn() -> Boundaries<R, D>>,
    steps: usize,
) -> (
    MeshlessSimulation<R, D, E, RowMajor>,
    DeviceSimulation<R, D>,
) {
    let radius = default_radius_factor::<D>(order) * cloud.spacing()[0];
    let tableau = Tableau::by_name("rk3").unwrap();
    let scheme =
        Muscl::<R, D, E>::new(eq, order, Formulation::MlsDivergence, Weight::default()).unwrap();
    let mut cpu = MeshlessSimulation::<R, D, E, RowMajor>::new(
        cloud.clone(),
        radius,
        scheme,
        tableau.clone(),
        CpuBackend::Serial,
    )
    .unwrap();
    let scheme = DeviceMuscl::<R>::new::<D>(g, device_eq, order, Weight::default()).unwrap();
    let mut dev =
        DeviceSimulation::<R, D>::new(g, cloud, radius, scheme, tableau, DeviceLayout::RowMajor)
            .unwrap();
    if let Some(make) = boundaries {
        cpu = cpu.with_boundaries(make()).unwrap();
        dev = dev.with_boundaries(g, cloud, make()).unwrap();
    }
    let dt = cpu.stable_dt(0.4);
    for _ in 0..steps {
        cpu.step(dt).unwrap();
        dev.step(g, dt).unwrap();
    }
    (cpu, dev)
}

fn diagnostic_cases<R: GpuFloat>(g: &Gpu, bound_total: f64, bound_errors: f64) -> f64 {
    use mote_cloud::exact;
    let mut worst: f64 = 0.0;
    let rel = |a: f64, b: f64| ((a - b) / b).abs();
    // 1-D advection of a sine (periodic): errors against the advected profile.
    let eq = LinearAdvection::<1>::scalar([1.0], 1);
    let mut cloud = box_cloud::<R, 1>(1.0 / 80.0, None, 45, 1);
    cloud.orders_mut().fill(2);
    initial_with_jump(&mut cloud, false, 0.0);
    let (cpu, dev) = stepped(
        g,
        &cloud,
        eq.clone(),
        DeviceEquation::advection(&eq).unwrap(),
        2,
        None,
        4,
    );
    let t = cpu.time();
    let profile = move |x: [f64; 1]| 1.0 + 0.5 * (std::f64::consts::TAU * (x[0] - t)).sin();
    let (c, d) = (
        exact::errors(&cpu.cloud, 0, profile),
        dev.errors(g, 0, profile).unwrap(),
    );
    // (The norms are differences of values of size 1, so they differ by as much as the
    // device's and the CPU's states do: compared absolutely.)
    for (a, b, what) in [
        (d.l1, c.l1, "L1"),
        (d.relative_l2, c.relative_l2, "relative L2"),
        (d.max, c.max, "max"),
    ] {
        worst = worst.max((a - b).abs());
        assert!(
            (a - b).abs() <= bound_errors,
            "{} {what} error: device {a:e}, CPU {b:e}",
            R::PRECISION.name()
        );
    }
    let (c, d) = (exact::total(&cpu.cloud, 0), dev.totals(g).unwrap()[0]);
    worst = worst.max(rel(d, c));
    assert!(
        rel(d, c) <= bound_total,
        "advection total: device {d}, CPU {c}"
    );
    // 2-D Euler in a walled box: the totals of every variable over the interior particles
    // only (boundary particles carry states too).
    let make = || {
        Boundaries::<R, 2>::new()
            .with_axis(0, SlipWall::default())
            .with_axis(1, Outflow)
    };
    let eq = Euler::<2>::new(1.4).unwrap();
    let layers = Some(default_radius_factor::<2>(2) as usize);
    let mut cloud = box_cloud::<R, 2>(1.0 / 20.0, layers, 46, 4);
    cloud.orders_mut().fill(2);
    initial_with_jump(&mut cloud, true, 0.5);
    let (cpu, dev) = stepped(
        g,
        &cloud,
        eq.clone(),
        DeviceEquation::euler(&eq),
        2,
        Some(&make),
        3,
    );
    let totals = dev.totals(g).unwrap();
    for (v, &d) in totals.iter().enumerate() {
        let c = exact::total(&cpu.cloud, v);
        let err = if c.abs() > 1e-3 {
            rel(d, c)
        } else {
            (d - c).abs()
        };
        worst = worst.max(err);
        assert!(
            err <= bound_total,
            "{} Euler total of variable {v}: device {d:e}, CPU {c:e}",
            R::PRECISION.name()
        );
    }
    worst
}

#[test]
fn device_diagnostics_equal_the_cpu_totals_and_error_norms() {
    let Some(g) = gpu() else {
        return;
    };
    let worst = diagnostic_cases::<f32>(&g, 1e-5, 1e-6);
    eprintln!("f32: worst device/CPU difference of the totals and error norms {worst:.2e}");
    if g.supports(Precision::F64) {
        let worst = diagnostic_cases::<f64>(&g, 1e-12, 1e-13);
        eprintln!("f64: worst device/CPU difference of the totals and error norms {worst:.2e}");
    }
}

/// The conservative formulation on a periodic cloud: the device totals of every variable
/// after the steps equal those before (the relative change returned).
fn conservation<R: GpuFloat>(g: &Gpu) -> f64 {
    let eq = Euler::<2>::new(1.4).unwrap();
    let mut cloud = box_cloud::<R, 2>(1.0 / 24.0, None, 49, 4);
    cloud.orders_mut().fill(2);
    initial_with_jump(&mut cloud, true, 1.0);
    let radius = default_radius_factor::<2>(2) * cloud.spacing()[0];
    let scheme = DeviceMuscl::<R>::new::<2>(g, DeviceEquation::euler(&eq), 2, Weight::default())
        .unwrap()
        .with_flux(FluxKind::Hllc)
        .unwrap()
        .with_formulation(Formulation::Conservative);
    let tableau = Tableau::by_name("rk3").unwrap();
    let mut dev =
        DeviceSimulation::<R, 2>::new(g, &cloud, radius, scheme, tableau, DeviceLayout::SlotMajor)
            .unwrap()
            .with_mood(g, MoodSettings::by_name("u1", "epd1").unwrap())
            .unwrap();
    let before = dev.totals(g).unwrap();
    let dt = dev.stable_dt(g, 0.4).unwrap();
    for _ in 0..5 {
        dev.step(g, dt).unwrap();
    }
    let after = dev.totals(g).unwrap();
    let stats = dev.take_mood_stats();
    assert!(stats.reductions > 0, "MOOD acted: {stats:?}");
    before
        .iter()
        .zip(&after)
        .map(|(b, a)| ((a - b) / b.abs().max(1e-300)).abs())
        .fold(0.0, f64::max)
}

#[test]
fn the_conservative_formulation_conserves_on_the_device() {
    let Some(g) = gpu() else {
        return;
    };
    // (Each step rounds every state once: the totals drift by about eps per step.)
    let change = conservation::<f32>(&g);
    eprintln!("f32: largest relative change of a total over 5 steps {change:.2e}");
    assert!(change < 1e-5, "f32 totals changed by {change:e}");
    if g.supports(Precision::F64) {
        let change = conservation::<f64>(&g);
        eprintln!("f64: largest relative change of a total over 5 steps {change:.2e}");
        assert!(change < 1e-14, "f64 totals changed by {change:e}");
    }
}

/// A whole device simulation reserved against a byte limit (`DeviceSimulation::reserve`): too
/// small a limit is a `CapacityError` that changes nothing; a sufficient one freezes every array,
/// MOOD's too (they are sized at the first step), and the steps then give the same bits as
/// those of an unreserved simulation; a state corrupted on the device fails the fingerprint
/// check. Returns the bytes reserved.
fn reserved<R: GpuFloat>(g: &Gpu) -> u64 {
    let eq = Euler::<2>::new(1.4).unwrap();
    let mut cloud = box_cloud::<R, 2>(1.0 / 24.0, None, 49, 4);
    cloud.orders_mut().fill(2);
    initial_with_jump(&mut cloud, true, 1.0);
    let radius = default_radius_factor::<2>(2) * cloud.spacing()[0];
    let make = || {
        let scheme =
            DeviceMuscl::<R>::new::<2>(g, DeviceEquation::euler(&eq), 2, Weight::default())
                .unwrap();
        let tableau = Tableau::by_name("rk3").unwrap();
        DeviceSimulation::<R, 2>::new(g, &cloud, radius, scheme, tableau, DeviceLayout::SlotMajor)
            .unwrap()
            .with_mood(g, MoodSettings::by_name("u1", "epd1").unwrap())
            .unwrap()
    };
    let mut plain = make();
    let mut budgeted = make();
    let model = MemoryModel::of(&[&budgeted]);
    // (The lists' offset table holds one entry more than there are particles.)
    assert!(
        (cloud.len()..=cloud.len() + 1).contains(&model.particles),
        "{model:?}"
    );
    assert!(model.per_particle > 0 && model.per_slot > 0, "{model:?}");
    // What the current counts need, with MOOD's per-particle arrays priced before they exist.
    let needed = model.bytes(model.particles, model.slots);

    let capacities =
        |s: &DeviceSimulation<R, 2>| s.buffers().iter().map(|b| b.capacity()).collect::<Vec<_>>();
    let before = capacities(&budgeted);
    let err = budgeted.reserve(g, &cloud, Some(needed)).unwrap_err();
    let GpuError::Capacity(e) = &err else {
        panic!("{err}")
    };
    assert_eq!((e.requested, e.unit), (needed, CapacityUnit::Bytes), "{e}");
    assert_eq!(
        before,
        capacities(&budgeted),
        "a refused reservation changed capacities"
    );

    let r = budgeted
        .reserve(g, &cloud, Some(2 * needed))
        .unwrap()
        .unwrap();
    assert!(r.particles > cloud.len() && r.bytes <= 2 * needed, "{r:?}");
    for b in budgeted.buffers() {
        assert!(b.is_frozen(), "{} not frozen", b.name());
    }
    let dt = plain.stable_dt(g, 0.4).unwrap();
    for _ in 0..3 {
        plain.step(g, dt).unwrap();
        budgeted.step(g, dt).unwrap();
    }
    let bits = |s: &DeviceSimulation<R, 2>| {
        s.state(g)
            .unwrap()
            .iter()
            .map(|x| x.to_f64().unwrap().to_bits())
            .collect::<Vec<_>>()
    };
    assert_eq!(bits(&plain), bits(&budgeted), "reserved steps differ");
    assert_eq!(plain.take_mood_stats(), budgeted.take_mood_stats());

    // The fingerprint check: a fresh reserved simulation whose state is altered on the device.
    let mut corrupted = make();
    g.write_element(corrupted.state_on_device(), 7, R::cast(2.5))
        .unwrap();
    let err = corrupted.reserve(g, &cloud, Some(2 * needed)).unwrap_err();
    assert!(
        matches!(&err, GpuError::Fingerprint { array, .. } if array == "state"),
        "{err}"
    );
    r.bytes
}

#[test]
fn a_device_simulation_reserves_its_memory_once_and_steps_as_before() {
    let Some(g) = gpu() else {
        return;
    };
    let bytes = reserved::<f32>(&g);
    eprintln!("f32: {bytes} bytes reserved");
    if g.supports(Precision::F64) {
        let bytes = reserved::<f64>(&g);
        eprintln!("f64: {bytes} bytes reserved");
    }
}
