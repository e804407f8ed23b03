//! `mote bench decomposition`: what K ranks owning contiguous ranges of the Morton curve
//! exchange, measured in one process: the imports of a distributed tree (each range's locally
//! essential tree: the remote nodes and leaf particles its groups' walks need), the halo
//! of a meshless cloud (remote particles within the search radius), and the bytes of the
//! replicated-state design that runs today (decision 0027), against the number of ranks. The
//! inputs of the scaling model in `docs/performance.md`.

use std::error::Error;
use std::ops::Range;

use clap::Args;
use mote_core::comm::{cost_ranges, even_ranges};
use mote_core::{CpuBackend, ParticleData};
use mote_gravity::initial_conditions::{plummer, uniform_sphere};
use mote_gravity::tree::{Imports, Multipole, Tree, TreeSettings};

/// Options of `mote bench decomposition`.
#[derive(Debug, Args)]
pub struct DecompositionArgs {
    /// Bodies of the gravity systems (a Plummer sphere and a uniform sphere).
    #[arg(long, default_value_t = 262_144)]
    particles: usize,
    /// Particles of the meshless cloud (a jittered lattice in the unit square).
    #[arg(long, default_value_t = 262_144)]
    cloud: usize,
    /// Rank counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32,64")]
    ranks: Vec<usize>,
    /// The tree's opening angle.
    #[arg(long, default_value_t = 0.5)]
    theta: f64,
    /// Meshless search radius in lattice spacings (2.0: about 12.6 neighbours in 2-D).
    #[arg(long, default_value_t = 2.0)]
    radius: f64,
}

/// Bytes of one imported record, f64: a particle's position and mass; a node's centre of mass
/// and mass (plus 5 quadrupole components where the tree has them).
const PARTICLE_BYTES: usize = 32;
const NODE_BYTES: usize = 32;
/// Bytes of one meshless halo particle per exchange: position (2), volume, and a 2-D Euler
/// state (4 conserved variables), f64.
const HALO_BYTES: usize = 56;

/// Prints the tables.
pub fn run(args: &DecompositionArgs, threads: usize) -> Result<(), Box<dyn Error>> {
    if args.ranks.contains(&0) {
        return Err("--ranks: every rank count must be at least 1".into());
    }
    crate::check_fits("the bodies and their tree", args.particles as u128 * 400)?;
    let backend = CpuBackend::threads(threads);
    let settings = TreeSettings {
        theta: args.theta,
        multipole: Multipole::Monopole,
        ..TreeSettings::default()
    }
    .checked()?;
    println!(
        "# distributed tree: imports of the largest locally essential tree among the ranks \
         (theta = {}, f64, monopole; a node or particle = {NODE_BYTES} bytes); replicated = \
         the bytes each rank receives per force evaluation today (24 (N - N/K)); imb. = the \
         largest rank's walk over the mean, cut by particle count and by measured cost",
        args.theta
    );
    for (name, p) in [
        ("plummer", plummer::<f64>(args.particles, 1)?),
        (
            "uniform",
            uniform_sphere::<f64>(args.particles, 1.0, 0.5, 1)?,
        ),
    ] {
        tree_table(name, &p, &settings, backend, &args.ranks)?;
    }
    println!(
        "# meshless halo: remote particles within {} spacings of a rank's particles, 2-D \
         jittered lattice, {HALO_BYTES} bytes each per exchange",
        args.radius
    );
    halo_table(args.cloud, args.radius, &args.ranks);
    Ok(())
}

fn tree_table(
    name: &str,
    p: &ParticleData<f64>,
    settings: &TreeSettings,
    backend: CpuBackend,
    ranks: &[usize],
) -> Result<(), Box<dyn Error>> {
    let n = p.len();
    let mut tree = Tree::<f64>::new(settings.multipole);
    tree.build(p.positions(), p.masses(), settings, backend)?;
    let work = tree.group_costs();
    println!(
        "{:>8} {:>5} {:>10} {:>12} {:>12} {:>10} {:>14} {:>14} {:>10} {:>10}",
        "system",
        "ranks",
        "own",
        "nodes(max)",
        "parts(max)",
        "fraction",
        "LET bytes",
        "replicated",
        "imb.count",
        "imb.cost"
    );
    let mut fit = Vec::new();
    for &k in ranks {
        // Contiguous ranges of groups with equal particle counts, as a run cuts them.
        let counts: Vec<u64> = tree.groups().iter().map(|&[_, c]| c as u64).collect();
        let domains = cost_ranges(&counts, k);
        let imports: Vec<Imports> = domains
            .iter()
            .map(|d: &Range<usize>| tree.imports(d.clone()))
            .collect();
        let worst = imports
            .iter()
            .max_by_key(|i| i.nodes + i.particles)
            .copied()
            .unwrap_or_default();
        let own = worst.own;
        let bytes = worst.nodes * NODE_BYTES + worst.particles * PARTICLE_BYTES;
        let fraction = (worst.nodes + worst.particles) as f64 / own.max(1) as f64;
        let replicated = 24 * (n - n / k);
        // Load imbalance (largest rank's walk over the mean) of the cut by particle count
        // and of the cut by measured cost, which a run uses from its second evaluation.
        let imbalance = |cut: &[Range<usize>]| {
            let per: Vec<u64> = cut.iter().map(|g| work[g.clone()].iter().sum()).collect();
            let mean = per.iter().sum::<u64>() as f64 / k as f64;
            *per.iter().max().unwrap_or(&0) as f64 / mean
        };
        let by_cost = cost_ranges(&work, k);
        println!(
            "{name:>8} {k:>5} {own:>10} {:>12} {:>12} {fraction:>10.3} {bytes:>14} {replicated:>14} {:>10.3} {:>10.3}",
            worst.nodes,
            worst.particles,
            imbalance(&domains),
            imbalance(&by_cost)
        );
        if k >= 4 {
            fit.push((own as f64, bytes as f64));
        }
    }
    print_fit(name, &fit, 2.0 / 3.0);
    Ok(())
}

fn halo_table(n: usize, radius: f64, ranks: &[usize]) {
    // A jittered lattice, Morton-ordered as clouds are.
    let side = (n as f64).sqrt().round().max(2.0) as usize;
    let h = 1.0 / side as f64;
    let mut rng = mote_core::rng::Rng::new(7);
    let mut points: Vec<(u64, [f64; 2])> = (0..side * side)
        .map(|k| {
            let (i, j) = (k % side, k / side);
            let x = (i as f64 + 0.5 + 0.3 * (rng.uniform() - 0.5)) * h;
            let y = (j as f64 + 0.5 + 0.3 * (rng.uniform() - 0.5)) * h;
            let key = mote_core::morton::interleave([i as u64, j as u64], 21);
            (key, [x, y])
        })
        .collect();
    points.sort_by_key(|p| p.0);
    let n = points.len();
    let r = radius * h;
    // Cells of side r: a particle's neighbours are in its own and the 8 adjacent cells.
    let cells = (1.0 / r).floor().max(1.0) as usize;
    let cell_of = |x: f64| ((x * cells as f64) as usize).min(cells - 1);
    let mut heads: Vec<Vec<u32>> = vec![Vec::new(); cells * cells];
    for (k, (_, [x, y])) in points.iter().enumerate() {
        heads[cell_of(*y) * cells + cell_of(*x)].push(k as u32);
    }
    println!(
        "{:>8} {:>5} {:>10} {:>12} {:>10} {:>14}",
        "cloud", "ranks", "own", "halo(max)", "fraction", "halo bytes"
    );
    let mut fit = Vec::new();
    for &k in ranks {
        let domains = even_ranges(n, k);
        let owner = |i: usize| domains.iter().position(|d| d.contains(&i)).unwrap_or(0);
        let owners: Vec<u32> = (0..n).map(|i| owner(i) as u32).collect();
        let mut worst = 0usize;
        for d in &domains {
            let mut halo: Vec<u32> = Vec::new();
            for i in d.clone() {
                let [x, y] = points[i].1;
                let (cx, cy) = (cell_of(x) as isize, cell_of(y) as isize);
                for dy in -1..=1 {
                    for dx in -1..=1 {
                        let (ax, ay) = (cx + dx, cy + dy);
                        if ax < 0 || ay < 0 || ax >= cells as isize || ay >= cells as isize {
                            continue;
                        }
                        for &j in &heads[ay as usize * cells + ax as usize] {
                            let [u, v] = points[j as usize].1;
                            if owners[j as usize] != owners[i]
                                && (u - x).powi(2) + (v - y).powi(2) < r * r
                            {
                                halo.push(j);
                            }
                        }
                    }
                }
            }
            halo.sort_unstable();
            halo.dedup();
            worst = worst.max(halo.len());
        }
        let own = n / k;
        println!(
            "{:>8} {k:>5} {own:>10} {worst:>12} {:>10.4} {:>14}",
            "lattice",
            worst as f64 / own.max(1) as f64,
            worst * HALO_BYTES
        );
        if k >= 4 {
            fit.push((own as f64, (worst * HALO_BYTES) as f64));
        }
    }
    print_fit("lattice", &fit, 0.5);
}

/// The least-squares exponent of bytes against particles per rank, and the surface's.
fn print_fit(name: &str, points: &[(f64, f64)], surface: f64) {
    let pts: Vec<(f64, f64)> = points
        .iter()
        .filter(|(x, y)| *x > 0.0 && *y > 0.0)
        .map(|(x, y)| (x.ln(), y.ln()))
        .collect();
    if pts.len() < 2 {
        return;
    }
    let m = pts.len() as f64;
    let (sx, sy) = pts.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / m, sy / m);
    let (num, den) = pts.iter().fold((0.0, 0.0), |(a, b), (x, y)| {
        (a + (x - mx) * (y - my), b + (x - mx) * (x - mx))
    });
    println!(
        "# {name}: halo bytes per rank ~ (particles per rank)^{:.3} over 4+ ranks \
         (a domain's surface: ^{surface:.3})",
        num / den
    );
}
