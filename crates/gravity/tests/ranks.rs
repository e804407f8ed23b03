//! Forces split between ranks: a simulation whose force evaluations are shared by 2, 3 or 4
//! ranks (threads standing in for MPI processes, `mote_core::comm::thread_ranks`) ends bitwise
//! identical to the one-process run, for direct summation and the tree, in both precisions, and
//! its potential energy is the same number.

use std::sync::Arc;

use mote_core::comm::{Comm, SingleProcess, on_thread_ranks, thread_ranks};
use mote_core::{CpuBackend, ParticleData, Real};
use mote_gravity::initial_conditions::plummer;
use mote_gravity::tree::{Multipole, TreeSettings, TreeSolver};
use mote_gravity::{
    DirectSolver, ForceSolver, IntegratorKind, KernelChoice, Simulation, Softening,
};

fn solver<R: Real>(tree: bool, comm: Arc<dyn Comm>) -> Box<dyn ForceSolver<R>> {
    let softening = Softening::new(0.01).unwrap();
    // Two threads per rank: the split between threads and between ranks together.
    let backend = CpuBackend::threads(2);
    if tree {
        let settings = TreeSettings {
            theta: 0.6,
            multipole: Multipole::Quadrupole,
            // Small groups: many groups to cut between ranks.
            group_size: 32,
            ..TreeSettings::default()
        };
        Box::new(
            TreeSolver::<R>::new(softening, settings, KernelChoice::Auto, backend)
                .unwrap()
                .with_comm(comm),
        )
    } else {
        Box::new(
            DirectSolver::new(softening, KernelChoice::Auto, backend)
                .unwrap()
                .with_comm(comm),
        )
    }
}

/// Eight yoshida4 steps (three force evaluations each) on `comm`; the final state and the
/// potential energy.
fn run<R: Real>(p: &ParticleData<R>, tree: bool, comm: Arc<dyn Comm>) -> (ParticleData<R>, f64) {
    let integrator = IntegratorKind::Yoshida4.build::<R>(CpuBackend::threads(2));
    let mut sim = Simulation::new(p.clone(), solver::<R>(tree, comm), integrator);
    sim.run(8, 1e-3);
    let q = sim.particles.clone();
    let w = sim.solver().potential_energy(q.positions(), q.masses());
    (q, w)
}

fn bits<R: Real>(p: &ParticleData<R>) -> Vec<u64> {
    let mut out = Vec::new();
    for v in [p.positions(), p.velocities(), p.accelerations()] {
        for c in [v.x(), v.y(), v.z()] {
            out.extend(c.iter().map(|x| x.as_f64().to_bits()));
        }
    }
    out
}

fn check<R: Real>(tree: bool) {
    // Not a multiple of any rank count or block size.
    let p = plummer::<R>(1_037, 3).unwrap();
    let (one, w1) = run(&p, tree, Arc::new(SingleProcess));
    for k in 2..=4 {
        let ranks = thread_ranks(k);
        let results = on_thread_ranks(&ranks, |c| run(&p, tree, c));
        for (rank, (q, w)) in results.iter().enumerate() {
            assert!(
                bits(&one) == bits(q),
                "tree {tree}, {k} ranks: rank {rank}'s state differs from one process's"
            );
            assert_eq!(w.to_bits(), w1.to_bits(), "{k} ranks: potential energy");
        }
        // The ranks really split the work: each received the others' parts.
        for c in &ranks {
            assert!(c.bytes_received() > 0, "{k} ranks: nothing exchanged");
        }
    }
}

#[test]
fn direct_forces_shared_by_ranks_are_bitwise_those_of_one_process() {
    check::<f64>(false);
    check::<f32>(false);
}

#[test]
fn tree_forces_shared_by_ranks_are_bitwise_those_of_one_process() {
    check::<f64>(true);
    check::<f32>(true);
}

#[test]
fn a_ranks_essential_tree_holds_remote_entries_only() {
    use mote_gravity::tree::Tree;
    let p = plummer::<f64>(20_000, 5).unwrap();
    let settings = TreeSettings::default();
    let mut tree = Tree::<f64>::new(settings.multipole);
    tree.build(p.positions(), p.masses(), &settings, CpuBackend::Serial)
        .unwrap();
    let groups = tree.groups().len();
    // One rank owns everything: nothing to import.
    let all = tree.imports(0..groups);
    assert_eq!((all.nodes, all.particles, all.own), (0, 0, 20_000));
    for k in [2, 4, 16] {
        let counts: Vec<u64> = tree.groups().iter().map(|&[_, c]| c as u64).collect();
        let domains = mote_core::comm::cost_ranges(&counts, k);
        let imports: Vec<_> = domains.iter().map(|d| tree.imports(d.clone())).collect();
        assert_eq!(imports.iter().map(|i| i.own).sum::<usize>(), 20_000);
        for i in &imports {
            // Some remote entries, and fewer than the remote particles: the far field arrives
            // as nodes.
            assert!(
                i.nodes > 0 && i.nodes + i.particles < 20_000 - i.own,
                "{k} ranks: {i:?}"
            );
        }
    }
}

/// Eight yoshida4 steps with each rank holding its own particles (`mote_gravity::owned`):
/// migration after every step, and a cut by measured cost whenever the ranks' work drifts apart
/// by more than `threshold`. This rank's rows of the final state in slot order (what it passes
/// to the files) and every rank's potential energy.
fn run_owned<R: Real>(
    p: &ParticleData<R>,
    tree: bool,
    comm: Arc<dyn Comm>,
    threshold: f64,
) -> (ParticleData<R>, f64, u64, u64) {
    use mote_gravity::owned::{OwnedSolver, Ownership, Slots, rows_in_slot_order};
    // Each rank starts from its rows of the one-process order, as a run generates them.
    let even = mote_core::comm::even_ranges(p.len(), comm.size())[comm.rank()].clone();
    let mut rows = p.clone();
    rows.retain(|i| even.contains(&i));
    let slots = Arc::new(Slots::of_rows(comm.as_ref(), rows.ids(), even.start));
    assert_eq!(
        *slots,
        Slots::identity(p.len()),
        "generated ids are their rows"
    );
    let (mut own, local) = Ownership::start(comm.clone(), rows, &slots, threshold);
    let held = local.len();
    assert!(held < p.len() || comm.size() == 1, "a rank holds a share");
    let integrator = IntegratorKind::Yoshida4.build::<R>(CpuBackend::threads(2));
    let solver = OwnedSolver::new(solver::<R>(tree, comm.clone()), comm.clone(), slots.clone())
        .with_cut(own.domains());
    let mut sim = Simulation::new(local, Box::new(solver), integrator);
    for _ in 0..8 {
        sim.step(1e-3);
        let costs = sim.solver().costs().to_vec();
        own.settle(&mut sim.particles, &costs).unwrap();
        sim.solver().set_cut(own.domains());
    }
    // The tree needs only this rank's particles (priced for its share); direct summation
    // gathers every source.
    assert_eq!(sim.solver().holds_every_particle(), !tree);
    let w = sim.diagnostics(CpuBackend::threads(2)).potential;
    let rows = rows_in_slot_order(comm.as_ref(), &sim.particles, &slots);
    (rows, w, own.rebalances(), own.migrated())
}

/// The ranks' rows one after the other.
fn concatenated<R: Real>(parts: &[&ParticleData<R>]) -> ParticleData<R> {
    use mote_core::Component;
    let columns: Vec<Vec<R>> = Component::ALL
        .iter()
        .map(|&c| parts.iter().flat_map(|p| p.component(c).to_vec()).collect())
        .collect();
    let ids: Vec<u64> = parts.iter().flat_map(|p| p.ids().to_vec()).collect();
    ParticleData::restore(std::array::from_fn(|k| &columns[k][..]), &ids)
}

fn check_owned<R: Real>(tree: bool) {
    let p = plummer::<R>(1_037, 3).unwrap();
    let (one, w1) = run(&p, tree, Arc::new(SingleProcess));
    for k in 2..=4 {
        // A tight threshold for the tree (its costs differ per particle: cuts again), a loose
        // one for direct summation (equal costs: the first cut stays).
        let threshold = if tree { 1.01 } else { 2.0 };
        let ranks = thread_ranks(k);
        let results = on_thread_ranks(&ranks, |c| run_owned(&p, tree, c, threshold));
        let rows: Vec<&ParticleData<R>> = results.iter().map(|r| &r.0).collect();
        let whole = concatenated(&rows);
        assert!(
            bits(&one) == bits(&whole),
            "tree {tree}, {k} owning ranks: the ranks' rows differ from one process's state"
        );
        let even = mote_core::comm::even_ranges(p.len(), k);
        assert!(rows.iter().zip(&even).all(|(r, e)| r.len() == e.len()));
        assert_eq!(whole.ids(), p.ids(), "one-process order");
        for (rank, (w, (_, _, rebalances, _))) in results.iter().map(|r| (r.1, r)).enumerate() {
            assert_eq!(
                w.to_bits(),
                w1.to_bits(),
                "{k} ranks, rank {rank}: potential"
            );
            assert_eq!(
                *rebalances, results[0].2,
                "every rank cuts at the same steps"
            );
        }
        let migrated: u64 = results.iter().map(|r| r.3).sum();
        if tree {
            assert!(
                results[0].2 > 0,
                "{k} ranks: the tree's costs never cut again"
            );
            assert!(migrated > 0, "{k} ranks: a new cut moves particles");
        } else {
            assert_eq!(results[0].2, 0, "{k} ranks: equal costs stay cut");
        }
    }
}

#[test]
fn direct_forces_on_owned_particles_are_bitwise_those_of_one_process() {
    check_owned::<f64>(false);
    check_owned::<f32>(false);
}

#[test]
fn tree_forces_on_owned_particles_are_bitwise_those_of_one_process() {
    check_owned::<f64>(true);
    check_owned::<f32>(true);
}

/// A heavy clump in one corner and light particles spread through the box, with a few
/// particles sharing a position: deep trees, nodes across ranks at every level.
fn clumped(n: usize) -> ParticleData<f64> {
    let mut p = ParticleData::<f64>::new();
    let mut rng = mote_core::rng::Rng::new(11);
    for i in 0..n {
        let u = [rng.uniform(), rng.uniform(), rng.uniform()];
        if i % 2 == 0 {
            p.push(u.map(|c| 0.02 * c), [0.0; 3], 1.0).unwrap();
        } else if i % 97 == 1 {
            p.push([0.5; 3], [0.0; 3], 0.5).unwrap();
        } else {
            p.push(u, [0.0; 3], 1e-3).unwrap();
        }
    }
    p
}

/// The tree over ranks that own their particles (`ForceSolver::owned_accelerations`, the
/// locally essential tree): whatever rank holds a particle (here every `k`-th particle on one
/// rank, so nearly all of them first travel to the rank owning their key), on 1 to 5 ranks,
/// the accelerations, the interactions and the potential energy are one process's bit for bit,
/// for spread and clumped systems and shallow and deep trees.
#[test]
fn the_locally_essential_tree_gives_one_process_forces() {
    // And a handful of particles: ranks with none, a root holding everything.
    let systems = [
        plummer::<f64>(3_000, 7).unwrap(),
        clumped(3_000),
        plummer::<f64>(9, 4).unwrap(),
    ];
    let settings = [
        TreeSettings::default(),
        TreeSettings::new(0.8, Multipole::Monopole, 4, 8).unwrap(),
        // Leaves of one particle: more nodes than particles, where one process makes larger
        // leaves; the ranks decline together (the caller then builds the whole tree).
        TreeSettings::new(0.7, Multipole::Monopole, 1, 8).unwrap(),
        TreeSettings::new(0.3, Multipole::Quadrupole, 64, 32).unwrap(),
        TreeSettings::new(0.5, Multipole::Quadrupole, 40, 16).unwrap(),
    ];
    let softening = Softening::new(0.01).unwrap();
    let make = |s: TreeSettings, comm: Arc<dyn Comm>| {
        TreeSolver::<f64>::new(softening, s, KernelChoice::Auto, CpuBackend::threads(2))
            .unwrap()
            .with_comm(comm)
    };
    for (which, p) in systems.iter().enumerate() {
        let n = p.len();
        for &s in &settings {
            let mut one = make(s, Arc::new(SingleProcess));
            let mut acc = [vec![0.0; n], vec![0.0; n], vec![0.0; n]];
            {
                let [x, y, z] = &mut acc;
                one.accelerations(
                    p.positions(),
                    p.masses(),
                    mote_core::Vec3SpanMut::new(x, y, z),
                );
            }
            let interactions = one.stats().interactions;
            // One process ran out of nodes (larger leaves), which ranks decline to reproduce.
            let whole = one.tree().capped();
            assert_eq!(whole, s.leaf_size == 1, "{s:?}: capped");
            let w = one.potential_energy(p.positions(), p.masses());
            for k in 1..=5 {
                let ranks = thread_ranks(k);
                let results = on_thread_ranks(&ranks, |comm| {
                    let mine: Vec<usize> = (comm.rank()..n).step_by(k).collect();
                    let pick = |v: &[f64]| -> Vec<f64> { mine.iter().map(|&i| v[i]).collect() };
                    let (x, y, z) = p.positions().components();
                    let (x, y, z, m) = (pick(x), pick(y), pick(z), pick(p.masses()));
                    let mut solver = make(s, comm.clone());
                    let mut a = [
                        vec![0.0; mine.len()],
                        vec![0.0; mine.len()],
                        vec![0.0; mine.len()],
                    ];
                    let mut costs = vec![0u64; mine.len()];
                    let span = mote_core::Vec3Span::new(&x, &y, &z);
                    let [ax, ay, az] = &mut a;
                    let done = solver.owned_accelerations(
                        span,
                        &m,
                        &mine,
                        None,
                        mote_core::Vec3SpanMut::new(ax, ay, az),
                        &mut costs,
                    );
                    assert_eq!(done, !whole, "the tree evaluates over owned particles");
                    let wk = solver.owned_potential(span, &m, &mine, None);
                    assert_eq!(wk.is_some(), done, "forces and potential alike");
                    (mine, a, solver.stats().interactions, wk)
                });
                let what = format!("system {which}, {s:?}, {k} ranks");
                if whole {
                    continue;
                }
                let mut total = 0;
                for (rank, (mine, a, inter, wk)) in results.iter().enumerate() {
                    for (j, &i) in mine.iter().enumerate() {
                        for c in 0..3 {
                            assert_eq!(
                                a[c][j].to_bits(),
                                acc[c][i].to_bits(),
                                "{what}: rank {rank}, particle {i}, axis {c}"
                            );
                        }
                    }
                    total += inter;
                    assert_eq!(wk.map(f64::to_bits), Some(w.to_bits()), "{what}: potential");
                }
                assert_eq!(total, interactions, "{what}: interactions");
            }
        }
    }
}

/// The diagnostics of particles spread over ranks (`Diagnostics::owned`: each rank sums its own,
/// exactly, and the sums are reduced) are one process's bit for bit, on 1 to 5 ranks, for any
/// holding and order.
#[test]
fn diagnostics_over_owning_ranks_are_one_process_numbers() {
    use mote_gravity::Diagnostics;
    // Not a multiple of the 1024-particle blocks.
    let mut p = plummer::<f64>(5_000, 2).unwrap();
    let w = -0.37;
    let one = Diagnostics::with_potential(&p, w, CpuBackend::Serial);
    // Velocities of mixed sizes, so that the order of the sums shows in the last bits.
    let (vx, _, _) = p.view_mut().velocity.components_mut();
    for (i, v) in vx.iter_mut().enumerate() {
        *v *= 1.0 + (i % 7) as f64 * 1e3;
    }
    let one_mixed = Diagnostics::with_potential(&p, w, CpuBackend::Serial);
    assert_ne!(one.kinetic.to_bits(), one_mixed.kinetic.to_bits());
    for k in 1..=5 {
        let ranks = thread_ranks(k);
        let results = on_thread_ranks(&ranks, |comm| {
            // Every k-th particle, in reverse: neither contiguous nor in order.
            let (rank, mut q) = (comm.rank(), p.clone());
            q.retain(|i| i % k == rank);
            let reversed = mote_core::Permutation::new((0..q.len()).rev().collect()).unwrap();
            q.apply_permutation(&reversed);
            Diagnostics::owned(comm.as_ref(), &q, w)
        });
        for (rank, d) in results.iter().enumerate() {
            assert_eq!(
                bytemuck::bytes_of(d),
                bytemuck::bytes_of(&one_mixed),
                "{k} ranks, rank {rank}"
            );
        }
    }
}

/// Every generator's rows, made on 1 to 4 ranks (cuts anywhere, empty rows included, the
/// collision's cuts inside either galaxy), are the one-process bodies bit for bit: positions,
/// velocities, masses and ids (the centre-of-mass corrections are exact sums over the ranks).
#[test]
fn initial_conditions_generated_by_rows_are_the_one_process_bodies() {
    use mote_gravity::initial_conditions::{
        DiscGalaxy, GalaxyCollision, Rows, disc_galaxy_rows, galaxy_collision_rows, plummer_rows,
        uniform_sphere_rows,
    };
    type Make = dyn Fn(Rows<'_>) -> ParticleData<f64> + Sync;
    let galaxy = DiscGalaxy {
        particles: 301,
        ..DiscGalaxy::default()
    };
    let collision = GalaxyCollision {
        first: galaxy,
        second: DiscGalaxy {
            particles: 250,
            ..galaxy
        },
        ..GalaxyCollision::default()
    };
    let makers: Vec<(&str, usize, Box<Make>)> = vec![
        (
            "plummer",
            1_037,
            Box::new(|r| plummer_rows(1_037, 3, r).unwrap()),
        ),
        (
            "uniform sphere",
            515,
            Box::new(|r| uniform_sphere_rows(515, 1.5, 0.5, 7, r).unwrap()),
        ),
        (
            "disc galaxy",
            301,
            Box::new(move |r| disc_galaxy_rows(&galaxy, 2, r).unwrap()),
        ),
        (
            "galaxy collision",
            551,
            Box::new(move |r| galaxy_collision_rows(&collision, 4, r).unwrap()),
        ),
    ];
    for (name, n, make) in &makers {
        let one = make(Rows::all(*n));
        assert_eq!(one.ids(), (0..*n as u64).collect::<Vec<_>>(), "{name}");
        let uneven = vec![0, 0, n / 3, n / 3 + 1, *n];
        let mut cuts: Vec<Vec<usize>> = (1..=4)
            .map(|k| {
                let even = mote_core::comm::even_ranges(*n, k);
                std::iter::once(0)
                    .chain(even.iter().map(|r| r.end))
                    .collect()
            })
            .collect();
        cuts.push(uneven);
        for cut in cuts {
            let k = cut.len() - 1;
            let ranks = thread_ranks(k);
            let parts = on_thread_ranks(&ranks, |c| {
                let r = c.rank();
                make(Rows::new(cut[r]..cut[r + 1], c.as_ref()))
            });
            let refs: Vec<&ParticleData<f64>> = parts.iter().collect();
            let whole = concatenated(&refs);
            assert!(
                bits(&whole) == bits(&one)
                    && whole.ids() == one.ids()
                    && whole.masses() == one.masses(),
                "{name}: rows cut at {cut:?} differ from the one-process bodies"
            );
        }
    }
}

/// A rank's slots from its rows: ids that run on by one over the ranks (generated, or a file's
/// `1..=n`) need nothing gathered; any other ids (shuffled, or consecutive on each rank with a
/// gap between ranks) are gathered into the one-process map. Every slot is the one-process
/// slot.
#[test]
fn slots_of_rows_are_the_one_process_slots() {
    use mote_gravity::owned::Slots;
    let n = 50u64;
    let generated: Vec<u64> = (0..n).collect();
    let gadget: Vec<u64> = (1..=n).collect();
    let shuffled: Vec<u64> = (0..n).map(|i| (i * 37) % 101 + 1000).collect();
    let gap: Vec<u64> = (0..n).map(|i| if i < 20 { i } else { i + 1 }).collect();
    assert_eq!(Slots::of(&generated), Slots::identity(50));
    assert_eq!(Slots::of(&gadget), Slots::Consecutive { first: 1, n: 50 });
    assert!(matches!(Slots::of(&shuffled), Slots::Map(_)));
    assert!(matches!(Slots::of(&gap), Slots::Map(_)));
    let mut cuts: Vec<Vec<usize>> = (1..=4)
        .map(|k| {
            let even = mote_core::comm::even_ranges(50, k);
            std::iter::once(0)
                .chain(even.iter().map(|r| r.end))
                .collect()
        })
        .collect();
    // An empty rank, and a cut at the gap.
    cuts.push(vec![0, 0, 20, 50]);
    for cut in cuts {
        let ranks = thread_ranks(cut.len() - 1);
        for ids in [&generated, &gadget, &shuffled, &gap] {
            let one = Slots::of(ids);
            let got = on_thread_ranks(&ranks, |c| {
                let rows = cut[c.rank()]..cut[c.rank() + 1];
                Slots::of_rows(c.as_ref(), &ids[rows.clone()], rows.start)
            });
            for slots in got {
                assert_eq!(slots, one, "cut {cut:?}, ids {:?}", &ids[..3]);
                for (i, &id) in ids.iter().enumerate() {
                    assert_eq!(slots.slot(id), i);
                }
            }
        }
    }
}
