//! Kinetic relaxation with IMEX steppers on the device against the CPU: the kinetic transport's
//! passes, whole IMEX steps (every tableau, stiff and non-stiff), and the refusals.

use std::f64::consts::TAU;

use mote_cloud::equations::{Burgers, Equation, Euler};
use mote_cloud::flux::FluxKind;
use mote_cloud::mls::default_radius_factor;
use mote_cloud::mood::MoodSettings;
use mote_cloud::scheme::{Formulation, Muscl};
use mote_cloud::source::KineticRelaxation;
use mote_cloud::time::{ImexTableau, Tableau};
use mote_cloud::{Cloud, Domain, LatticeOptions, MeshlessSimulation, RowMajor, Weight};
use mote_core::{CpuBackend, Precision};
use mote_gpu::{
    DeviceEquation, DeviceLayout, DeviceMuscl, DeviceRelaxation, DeviceSimulation, Gpu, GpuFloat,
};

use crate::gpu;
use crate::muscl::difference;

/// A jittered periodic cloud with `n` particles per unit length, every particle at the
/// Maxwellian of the macroscopic state `state(x)`, MUSCL `order`.
fn kinetic_cloud<R: GpuFloat, const D: usize, E: Equation<R, D>>(
    relax: &KineticRelaxation<D, E>,
    n: usize,
    order: usize,
    state: impl Fn([f64; D]) -> Vec<f64>,
) -> Cloud<R, D> {
    let options = LatticeOptions {
        spacing: 1.0 / n as f64,
        jitter: 0.3,
        seed: 31,
        boundary_layers: 0,
    };
    let k = relax.kinetic_variables();
    let mut cloud = Cloud::<R, D>::lattice(Domain::unit_periodic(), options, k).unwrap();
    cloud.reorder_morton();
    cloud.orders_mut().fill(order as u8);
    let mut f = vec![R::cast(0.0); k];
    for i in 0..cloud.len() {
        let u: Vec<R> = state(cloud.position_of(i))
            .into_iter()
            .map(R::cast)
            .collect();
        relax.maxwellian(&u, &mut f);
        for (v, x) in f.iter().enumerate() {
            cloud.state_var_mut(v)[i] = *x;
        }
    }
    cloud
}

/// The CPU's and the device's simulations of `cloud` with the relaxation `relax` (device
/// macroscopic equation `macro_eq`), IMEX pair `tableau` and the numerical flux `flux`.
fn simulations<R: GpuFloat, const D: usize, E: Equation<R, D> + Clone + 'static>(
    g: &Gpu,
    cloud: &Cloud<R, D>,
    relax: &KineticRelaxation<D, E>,
    macro_eq: DeviceEquation,
    order: usize,
    tableau: ImexTableau,
    flux: FluxKind,
) -> (
    MeshlessSimulation<R, D, mote_cloud::equations::KineticTransport<D>, RowMajor>,
    DeviceSimulation<R, D>,
) {
    let radius = default_radius_factor::<D>(order) * cloud.spacing()[0];
    let transport = relax.transport();
    let scheme = Muscl::new(
        transport,
        order,
        Formulation::MlsDivergence,
        Weight::default(),
    )
    .unwrap()
    .with_flux(flux)
    .unwrap();
    let cpu = MeshlessSimulation::new(
        cloud.clone(),
        radius,
        scheme,
        Tableau::ssp_rk3(),
        CpuBackend::Serial,
    )
    .unwrap()
    .with_source(tableau.clone(), relax.clone())
    .unwrap();
    let scheme = DeviceMuscl::<R>::new::<D>(
        g,
        DeviceEquation::kinetic(&transport),
        order,
        Weight::default(),
    )
    .unwrap()
    .with_flux(flux)
    .unwrap();
    let source = DeviceRelaxation::new(g, relax, macro_eq).unwrap();
    let dev = DeviceSimulation::new(
        g,
        cloud,
        radius,
        scheme,
        Tableau::ssp_rk3(),
        DeviceLayout::RowMajor,
    )
    .unwrap()
    .with_relaxation(g, tableau, source)
    .unwrap();
    (cpu, dev)
}

/// `steps` steps on both sides at 0.4 times the stable step: the state difference.
#[allow(clippy::too_many_arguments)]
fn compare<R: GpuFloat, const D: usize, E: Equation<R, D> + Clone + 'static>(
    g: &Gpu,
    cloud: &Cloud<R, D>,
    relax: &KineticRelaxation<D, E>,
    macro_eq: DeviceEquation,
    order: usize,
    tableau: ImexTableau,
    flux: FluxKind,
    steps: usize,
) -> f64 {
    let (mut cpu, mut dev) = simulations(g, cloud, relax, macro_eq, order, tableau, flux);
    let dt = 0.4 * cpu.stable_dt(1.0);
    let ddt = 0.4 * dev.stable_dt(g, 1.0).unwrap();
    assert!(((dt - ddt) / dt).abs() < 1e-5, "stable dt {dt} vs {ddt}");
    for _ in 0..steps {
        cpu.step(dt).unwrap();
        dev.step(g, dt).unwrap();
    }
    let m = cloud.variables();
    let host: Vec<R> = (0..m).flat_map(|v| cpu.cloud.state(v).to_vec()).collect();
    let device = dev.state(g).unwrap();
    // The run must have relaxed something: the state moved away from the initial one.
    let initial: Vec<R> = (0..m).flat_map(|v| cloud.state(v).to_vec()).collect();
    assert!(
        difference(&host, &initial) > 1e-4,
        "the run changed nothing"
    );
    difference(&device, &host)
}

fn cases<R: GpuFloat>(g: &Gpu, bound: f64) -> f64 {
    let mut worst: f64 = 0.0;
    let mut check = |what: String, diff: f64| {
        worst = worst.max(diff);
        assert!(
            diff <= bound,
            "{} {what}: device and CPU states differ by {diff:e}",
            R::PRECISION.name()
        );
    };
    // 1-D Burgers relaxed (2 kinetic variables): every IMEX pair, stiff (dt / epsilon about
    // 3000) and not (about 0.3), MUSCL 1 and 2.
    let wave = |x: [f64; 1]| vec![1.0 + 0.5 * (TAU * x[0]).sin()];
    let rusanov = FluxKind::Rusanov;
    for epsilon in [1e-6, 1e-2] {
        let relax = KineticRelaxation::new::<R>(Burgers::<1>, 1.6, epsilon).unwrap();
        let macro_eq = DeviceEquation::burgers(&Burgers::<1>);
        for order in [1, 2] {
            let cloud = kinetic_cloud::<R, 1, _>(&relax, 120, order, wave);
            for tableau in ImexTableau::all() {
                let name = tableau.name;
                check(
                    format!("1-D Burgers, epsilon {epsilon:e}, MUSCL{order}, {name}"),
                    compare(
                        g,
                        &cloud,
                        &relax,
                        macro_eq.clone(),
                        order,
                        tableau,
                        rusanov,
                        8,
                    ),
                );
            }
        }
        // The other fluxes of the kinetic transport (upwind is Rusanov's component-wise form).
        let cloud = kinetic_cloud::<R, 1, _>(&relax, 120, 2, wave);
        for flux in [FluxKind::Upwind, FluxKind::Central] {
            check(
                format!("1-D Burgers, epsilon {epsilon:e}, MUSCL2, ars222, {flux}"),
                compare(
                    g,
                    &cloud,
                    &relax,
                    macro_eq.clone(),
                    2,
                    ImexTableau::ars222(),
                    flux,
                    8,
                ),
            );
        }
    }
    // 2-D Euler relaxed (16 kinetic variables), MUSCL2, ARS(2,2,2) and SSP3(4,3,3).
    let eq = Euler::<2>::new(1.4).unwrap();
    let gas = eq.clone();
    let flow = move |x: [f64; 2]| {
        let rho = 1.0 + 0.2 * (TAU * x[0]).sin() * (TAU * x[1]).sin();
        gas.conservative(rho, [0.5, 0.2], 1.0).to_vec()
    };
    let relax = KineticRelaxation::new::<R>(eq.clone(), 4.0, 1e-4).unwrap();
    let cloud = kinetic_cloud::<R, 2, _>(&relax, 16, 2, flow);
    for tableau in [ImexTableau::ars222(), ImexTableau::ssp3_433()] {
        let name = tableau.name;
        check(
            format!("2-D Euler, {name}"),
            compare(
                g,
                &cloud,
                &relax,
                DeviceEquation::euler(&eq),
                2,
                tableau,
                rusanov,
                4,
            ),
        );
    }
    eprintln!(
        "{}: worst device/CPU state difference after IMEX steps {worst:.2e}",
        R::PRECISION.name()
    );
    worst
}

#[test]
fn device_imex_relaxation_steps_agree_with_the_cpu() {
    let Some(g) = gpu() else {
        return;
    };
    cases::<f32>(&g, 1e-5);
    if g.supports(Precision::F64) {
        cases::<f64>(&g, 1e-12);
    }
}

#[test]
fn imex_refusals_and_failed_solves_match_the_cpu() {
    let Some(g) = gpu() else {
        return;
    };
    if !g.supports(Precision::F64) {
        return;
    }
    let wave = |x: [f64; 1]| vec![1.0 + 0.5 * (TAU * x[0]).sin()];
    let relax = KineticRelaxation::new::<f64>(Burgers::<1>, 1.6, 1e-3).unwrap();
    let burgers = DeviceEquation::burgers(&Burgers::<1>);
    let cloud = kinetic_cloud::<f64, 1, _>(&relax, 40, 2, wave);
    // MOOD after an IMEX stepper, and an IMEX stepper after MOOD.
    let (_, dev) = simulations(
        &g,
        &cloud,
        &relax,
        burgers.clone(),
        2,
        ImexTableau::ars222(),
        FluxKind::Rusanov,
    );
    let err = dev
        .with_mood(&g, MoodSettings::by_name("u1", "epd1").unwrap())
        .err()
        .expect("MOOD with IMEX refused")
        .to_string();
    assert!(err.contains("IMEX"), "{err}");
    let radius = default_radius_factor::<1>(2) / 40.0;
    let transport = DeviceEquation::kinetic(&relax.transport());
    let plain = || {
        let scheme =
            DeviceMuscl::<f64>::new::<1>(&g, transport.clone(), 2, Weight::default()).unwrap();
        DeviceSimulation::new(
            &g,
            &cloud,
            radius,
            scheme,
            Tableau::ssp_rk3(),
            DeviceLayout::RowMajor,
        )
        .unwrap()
    };
    let source = || DeviceRelaxation::new(&g, &relax, burgers.clone()).unwrap();
    let err = plain()
        .with_mood(&g, MoodSettings::by_name("u1", "epd1").unwrap())
        .unwrap()
        .with_relaxation(&g, ImexTableau::ars222(), source())
        .err()
        .expect("IMEX with MOOD refused")
        .to_string();
    assert!(err.contains("IMEX"), "{err}");
    // A macroscopic equation that is not the relaxed one's size, or a kinetic one.
    let euler = DeviceEquation::euler(&Euler::<1>::new(1.4).unwrap());
    for wrong in [euler.clone(), transport.clone()] {
        let err = DeviceRelaxation::<f64>::new(&g, &relax, wrong)
            .err()
            .expect("wrong macroscopic equation refused")
            .to_string();
        assert!(err.contains("macroscopic"), "{err}");
    }
    // A source of another variable count than the scheme's.
    let relax2 = KineticRelaxation::new::<f64>(Euler::<1>::new(1.4).unwrap(), 4.0, 1e-3).unwrap();
    let other = DeviceRelaxation::new(&g, &relax2, euler).unwrap();
    let err = plain()
        .with_relaxation(&g, ImexTableau::ars222(), other)
        .err()
        .expect("a source of other variables refused")
        .to_string();
    assert!(err.contains("source variables"), "{err}");
    // A relaxation time so small that h / epsilon overflows: the solve gives NaN for every
    // particle; both sides name particle index 0 and keep the state.
    let stiff = KineticRelaxation::new::<f64>(Burgers::<1>, 1.6, f64::from_bits(1)).unwrap();
    let (mut cpu, mut dev) = simulations(
        &g,
        &cloud,
        &stiff,
        burgers,
        2,
        ImexTableau::ars222(),
        FluxKind::Rusanov,
    );
    let before = dev.state(&g).unwrap();
    let e_cpu = cpu.step(1e-3).expect_err("CPU solve fails").to_string();
    let e_dev = dev
        .step(&g, 1e-3)
        .expect_err("device solve fails")
        .to_string();
    for e in [&e_cpu, &e_dev] {
        assert!(
            e.contains("implicit source solve") && e.contains("particle index 0"),
            "{e}"
        );
    }
    assert_eq!(
        dev.state(&g).unwrap(),
        before,
        "a failed step changed the state"
    );
    assert_eq!(dev.steps(), 0);
}
