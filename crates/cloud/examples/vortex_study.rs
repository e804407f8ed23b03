//! Convergence study of the isentropic vortex (2-D Euler, periodic [-5, 5)^2, strength 5 on a
//! uniform flow (1, 1)): density L1 and max errors and the measured orders between successive
//! resolutions, to see where a scheme's order becomes asymptotic.
//!
//! ```text
//! cargo run --release -p mote-cloud --example vortex_study -- ORDER JITTER FLUX CFL END [SIZES]
//! cargo run --release -p mote-cloud --example vortex_study -- 3 0.25 rusanov 0.4 1.0 32,64,128
//! ```
//! `FLUX` is rusanov, hllc or central; `SIZES` are particles per side (default
//! 32,48,64,96,128,192). The test `isentropic_vortex_converges_at_design_order_for_muscl2_and_muscl3`
//! takes its resolutions from this study.

use mote_cloud::equations::Euler;
use mote_cloud::exact::{IsentropicVortex, errors};
use mote_cloud::flux::FluxKind;
use mote_cloud::mls::default_radius_factor;
use mote_cloud::scheme::{Formulation, Muscl};
use mote_cloud::time::Tableau;
use mote_cloud::{Cloud, Domain, LatticeOptions, MeshlessSimulation, RowMajor, Weight};
use mote_core::CpuBackend;

const GAMMA: f64 = 1.4;
const HALF: f64 = 5.0;
/// Strength 5 on [-5, 5)^2.
const VORTEX: IsentropicVortex = IsentropicVortex {
    gamma: GAMMA,
    strength: 5.0,
    half: HALF,
};

/// The run's settings.
struct Study {
    order: usize,
    jitter: f64,
    flux: FluxKind,
    cfl: f64,
    end: f64,
}

/// Density (L1, max) errors at `study.end` with `per_side` particles per side.
fn vortex_errors(study: &Study, per_side: usize) -> (f64, f64) {
    let spacing = 2.0 * HALF / per_side as f64;
    let domain = Domain::new_box([-HALF; 2], [HALF; 2], [true; 2]).unwrap();
    let lattice = LatticeOptions {
        spacing,
        jitter: study.jitter,
        seed: 11,
        boundary_layers: 0,
    };
    let eq = Euler::<2>::new(GAMMA).unwrap();
    let mut cloud = Cloud::<f64, 2>::lattice(domain, lattice, 4).unwrap();
    cloud.reorder_morton();
    for o in cloud.orders_mut() {
        *o = study.order as u8;
    }
    VORTEX.fill(&mut cloud, 0.0).unwrap();
    let scheme = Muscl::new(
        eq,
        study.order,
        Formulation::MlsDivergence,
        Weight::default(),
    )
    .and_then(|s| s.with_flux(study.flux))
    .unwrap();
    let mut sim = MeshlessSimulation::<f64, 2, _, RowMajor>::new(
        cloud,
        default_radius_factor::<2>(study.order) * spacing,
        scheme,
        Tableau::ssp_rk3(),
        CpuBackend::threads(2),
    )
    .unwrap();
    let dt = sim.stable_dt(study.cfl);
    while sim.time() < study.end {
        sim.step(dt.min(study.end - sim.time())).unwrap();
    }
    let e = errors(&sim.cloud, 0, |x| VORTEX.state(x, study.end).0);
    (e.l1, e.max)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 5 {
        eprintln!("usage: vortex_study ORDER JITTER FLUX CFL END [SIZES, e.g. 32,64,128]");
        std::process::exit(2);
    }
    let number = |i: usize| -> f64 {
        args[i].parse().unwrap_or_else(|_| {
            eprintln!("argument {}: not a number: {}", i + 1, args[i]);
            std::process::exit(2)
        })
    };
    let study = Study {
        order: number(0) as usize,
        jitter: number(1),
        flux: FluxKind::by_name(&args[2]).unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(2)
        }),
        cfl: number(3),
        end: number(4),
    };
    let sizes: Vec<usize> = args
        .get(5)
        .map_or("32,48,64,96,128,192", String::as_str)
        .split(',')
        .map(|s| {
            s.parse()
                .expect("SIZES: particles per side, comma-separated")
        })
        .collect();
    let mut previous: Option<(usize, f64, f64)> = None;
    for n in sizes {
        let start = std::time::Instant::now();
        let (l1, max) = vortex_errors(&study, n);
        let seconds = start.elapsed().as_secs_f64();
        match previous {
            Some((pn, pl1, pmax)) => {
                let ratio = (n as f64 / pn as f64).ln();
                println!(
                    "{n:4}^2  L1 {l1:.3e} order {:.2}  max {max:.3e} order {:.2}  ({seconds:.1} s)",
                    (pl1 / l1).ln() / ratio,
                    (pmax / max).ln() / ratio
                );
            }
            None => println!("{n:4}^2  L1 {l1:.3e}  max {max:.3e}  ({seconds:.1} s)"),
        }
        previous = Some((n, l1, max));
    }
}
