//! Device forces split between ranks (threads standing in for MPI processes,
//! `mote_core::comm::thread_ranks`, each with its own opened device): a simulation whose
//! device force evaluations are shared by 2 or 3 ranks ends bitwise identical to one device's
//! run, for direct summation and the tree, and its potential energy is the same number.

use std::sync::Arc;

use mote_core::comm::{Comm, SingleProcess, on_thread_ranks, thread_ranks};
use mote_core::{CpuBackend, ParticleData, Real};
use mote_gpu::{Gpu, GpuDirectSolver, GpuTreeSolver};
use mote_gravity::initial_conditions::plummer;
use mote_gravity::tree::{Multipole, TreeSettings};
use mote_gravity::{ForceSolver, IntegratorKind, Simulation, Softening};

use crate::gpu;

fn solver<R: Real>(g: Gpu, tree: bool, comm: Arc<dyn Comm>) -> Box<dyn ForceSolver<R>> {
    let softening = Softening::new(0.01).unwrap();
    if tree {
        let settings = TreeSettings {
            theta: 0.6,
            multipole: Multipole::Quadrupole,
            // Small groups: many groups to cut between ranks.
            group_size: 32,
            ..TreeSettings::default()
        };
        Box::new(
            GpuTreeSolver::<R>::new(g, softening, settings)
                .unwrap()
                .with_comm(comm),
        )
    } else {
        Box::new(
            GpuDirectSolver::new(g, softening, R::PRECISION)
                .unwrap()
                .with_comm(comm),
        )
    }
}

/// Four yoshida4 steps (three force evaluations each) on `comm`; the final state, the
/// potential energy and the interactions counted.
fn run<R: Real>(
    p: &ParticleData<R>,
    g: Gpu,
    tree: bool,
    comm: Arc<dyn Comm>,
) -> (ParticleData<R>, f64, u64) {
    let integrator = IntegratorKind::Yoshida4.build::<R>(CpuBackend::Serial);
    let mut sim = Simulation::new(p.clone(), solver::<R>(g, tree, comm), integrator);
    sim.run(4, 1e-3);
    let q = sim.particles.clone();
    let w = sim.solver().potential_energy(q.positions(), q.masses());
    (q, w, sim.solver().interactions())
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
    let Some(g) = gpu() else {
        return;
    };
    if !g.supports(R::PRECISION) {
        eprintln!("SKIPPED: {} cannot compute in {}", g.name(), R::PRECISION);
        return;
    }
    // Not a multiple of the workgroup or of any rank count.
    let p = plummer::<R>(1_037, 3).unwrap();
    let (one, w1, i1) = run(&p, g, tree, Arc::new(SingleProcess));
    for k in [2, 3] {
        let ranks = thread_ranks(k);
        // Each rank opens its own device (the same adapter here).
        let results = on_thread_ranks(&ranks, |c| run(&p, gpu().unwrap(), tree, c));
        for (rank, (q, w, i)) in results.iter().enumerate() {
            assert!(
                bits(&one) == bits(q),
                "tree {tree}, {k} ranks: rank {rank}'s state differs from one device's"
            );
            assert_eq!(w.to_bits(), w1.to_bits(), "{k} ranks: potential energy");
            assert_eq!(*i, i1, "{k} ranks: every rank counts every interaction");
        }
        for c in &ranks {
            assert!(c.bytes_received() > 0, "{k} ranks: nothing exchanged");
        }
    }
}

#[test]
fn device_direct_forces_shared_by_ranks_are_bitwise_those_of_one_device() {
    check::<f32>(false);
    check::<f64>(false);
}

#[test]
fn device_tree_forces_shared_by_ranks_are_bitwise_those_of_one_device() {
    check::<f32>(true);
    check::<f64>(true);
}
