//! The device memory budget: estimate, reservation, `CapacityError`, and the fingerprint check
//! after a reservation moved the data.

use mote_cloud::mls::default_radius_factor;
use mote_core::memory::memory_estimate;
use mote_core::{Budgeted, BudgetedBuffer, CapacityUnit, MemoryModel, Precision, ReserveOptions};
use mote_gpu::{
    DeviceCloud, DeviceLayout, DeviceNeighbours, GpuDirectSolver, GpuError, GpuNeighbourSearch,
    host_fingerprint,
};
use mote_gravity::initial_conditions::plummer;
use mote_gravity::{ForceSolver, Softening};

use crate::gpu;
use crate::search::{compare, lattice};

#[test]
fn the_fingerprint_sees_every_single_word_change() {
    let Some(g) = gpu() else {
        return;
    };
    let data: Vec<f64> = (0..1000).map(|i| (i as f64 * 0.37).sin()).collect();
    let a = g.upload("data", &data);
    let fp = g.fingerprint(&a).unwrap();
    assert_eq!(fp, host_fingerprint(bytemuck::cast_slice(&data)));
    g.verify(&a, &data).unwrap();
    // One bit of one element, anywhere: a different fingerprint, and a refusal naming the array.
    for i in [0, 1, 499, 999] {
        let mut changed = data.clone();
        changed[i] = f64::from_bits(changed[i].to_bits() ^ 1);
        assert_ne!(host_fingerprint(bytemuck::cast_slice(&changed)), fp);
        let err = g.verify(&a, &changed).unwrap_err();
        assert!(matches!(err, GpuError::Fingerprint { .. }), "{err}");
        assert!(err.to_string().contains("`data`"), "{err}");
    }
    // Swapping two elements changes it too (the words are weighted by position).
    let mut swapped = data.clone();
    swapped.swap(3, 4);
    assert_ne!(host_fingerprint(bytemuck::cast_slice(&swapped)), fp);
}

#[test]
fn a_device_reservation_after_earlier_runs_is_budgeted_frozen_and_fingerprinted() {
    let Some(g) = gpu() else {
        return;
    };
    // An earlier device run in the same process: gravity on its own device arrays.
    {
        let other = gpu().unwrap();
        let mut solver =
            GpuDirectSolver::new(other, Softening::new(0.01).unwrap(), Precision::F32).unwrap();
        let mut p = plummer::<f32>(700, 3).unwrap();
        solver.update(&mut p);
        assert!(p.accelerations().get(0).iter().all(|a| a.is_finite()));
    }
    let cloud = lattice::<f32, 2>(1.0 / 40.0, true, 9);
    let n = cloud.len();
    let radius = default_radius_factor::<2>(2) / 40.0;
    let mut dc = DeviceCloud::upload(&g, &cloud).unwrap();
    let mut search = GpuNeighbourSearch::new(&g, radius).unwrap();
    let mut list = DeviceNeighbours::new(&g, DeviceLayout::SlotMajor);
    search.build(&g, &dc, &mut list).unwrap();
    let (max, total) = (list.max(), list.total());
    let before = g.download(list.indices()).unwrap();

    // The estimate prices slot-major lists at the padded count, n x max slots (the row starts
    // hold n + 1 entries, so the model counts one particle more).
    let parts: [&dyn Budgeted; 3] = [&dc, &list, &search];
    let model = MemoryModel::of(&parts);
    assert_eq!((model.particles, model.slots), (n + 1, n * max));
    assert_eq!(
        model.current_bytes(),
        memory_estimate(&parts, n + 1, n * max)
    );
    // Reserved at the padded count per particle.
    let options = ReserveOptions {
        slots_per_particle: Some(max as f64),
        ..Default::default()
    };
    let needed = model.bytes(n + 1, (n + 1) * max);
    assert_eq!(list.indices().len(), n * max);
    assert!(n * max > total);

    // Too small a limit: a CapacityError in bytes, and no capacity changed.
    let capacities = |parts: &[&dyn Budgeted]| -> Vec<usize> {
        parts
            .iter()
            .flat_map(|p| p.buffers())
            .map(|b| b.capacity())
            .collect()
    };
    let old = capacities(&[&dc, &list, &search]);
    let err = g
        .reserve(
            &mut [&mut dc, &mut list, &mut search],
            Some(needed),
            options,
        )
        .unwrap_err();
    let GpuError::Capacity(e) = &err else {
        panic!("{err}")
    };
    assert_eq!(e.unit, CapacityUnit::Bytes);
    assert_eq!(e.requested, needed);
    assert_eq!(old, capacities(&[&dc, &list, &search]));

    // Twice the need: about twice the particles, every array frozen at its capacity.
    let r = g
        .reserve(
            &mut [&mut dc, &mut list, &mut search],
            Some(2 * needed),
            options,
        )
        .unwrap()
        .unwrap();
    assert!(r.particles > n && r.particles < 2 * n, "{r:?}");
    assert_eq!(r.slots, r.particles * max);
    assert!(r.bytes <= 2 * needed);
    for b in [&dc as &dyn Budgeted, &list, &search]
        .iter()
        .flat_map(|p| p.buffers())
    {
        assert!(b.is_frozen(), "{}", b.name());
    }
    assert_eq!(list.indices().capacity(), r.slots);
    assert_eq!(dc.positions()[0].capacity(), r.particles);

    // The data moved with the reservation: the fingerprints match the host, the lists are
    // intact, and a new search on the reserved buffers gives the CPU's lists again.
    dc.verify(&g, &cloud).unwrap();
    assert_eq!(g.download(list.indices()).unwrap(), before);
    search.build(&g, &dc, &mut list).unwrap();
    assert_eq!(g.download(list.indices()).unwrap(), before);
    compare::<f32, 2>(&g, &cloud, radius);

    // A list that needs more slots than reserved: a CapacityError naming the buffer; the list
    // is unchanged.
    let mut wide = GpuNeighbourSearch::new(&g, 2.0 * radius).unwrap();
    let err = wide.build(&g, &dc, &mut list).unwrap_err();
    assert!(err.to_string().contains("neighbour_index"), "{err}");
    assert_eq!(g.download(list.indices()).unwrap(), before);
    assert_eq!((list.max(), list.total()), (max, total));

    // A corrupted device buffer: the run is refused.
    let x0 = cloud.positions()[0][17];
    g.write_element(&dc.positions()[0], 17, x0 + 1e-3).unwrap();
    let err = dc.verify(&g, &cloud).unwrap_err();
    assert!(matches!(err, GpuError::Fingerprint { .. }), "{err}");
    assert!(err.to_string().contains("`x`"), "{err}");
}

#[test]
fn a_device_limit_beyond_the_device_memory_is_refused() {
    let Some(g) = gpu() else {
        return;
    };
    match g.memory().total {
        Some(total) => {
            let err = g.memory_limit(Some(total + 1)).unwrap_err();
            assert!(matches!(err, GpuError::Capacity(_)), "{err}");
            assert_eq!(g.memory_limit(None).unwrap(), Some(total));
        }
        // The wgpu runtime does not report the memory: only a given limit budgets.
        None => {
            assert_eq!(g.memory_limit(None).unwrap(), None);
            assert_eq!(g.memory_limit(Some(1 << 20)).unwrap(), Some(1 << 20));
        }
    }
    assert!(g.memory().max_buffer > 0);
}

#[test]
fn a_frozen_device_array_grows_within_its_capacity_only() {
    let Some(g) = gpu() else {
        return;
    };
    let mut a = g.upload("a", &[7u32; 10]);
    // Unfrozen: growth moves it, keeping the contents.
    a.resize(40).unwrap();
    assert_eq!(&g.download(&a).unwrap()[..10], &[7; 10]);
    a.resize(10).unwrap();
    a.reserve_and_freeze(12).unwrap();
    assert_eq!((a.len(), a.capacity()), (10, 12));
    assert_eq!(g.download(&a).unwrap(), vec![7; 10]);
    a.resize(12).unwrap();
    let err = a.resize(13).unwrap_err();
    assert_eq!((err.requested, err.available), (13, 12));
    assert!(err.to_string().contains("`a`"), "{err}");
    assert_eq!(a.len(), 12);
    // A reservation below the length is refused.
    assert!(a.reserve_and_freeze(11).is_err());
}
