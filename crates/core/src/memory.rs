//! The memory budget of a run: price it before it starts, size it once, never reallocate.
//!
//! Every per-particle or per-neighbour-slot buffer of a run belongs to a container that
//! implements [`Budgeted`]. Because each buffer knows its element size and how its length scales
//! ([`Scaling`]), a run's memory is a linear function of its particle and slot counts:
//!
//! `bytes = particles * per_particle + slots * per_slot + fixed`
//!
//! [`MemoryModel`] holds those coefficients, [`memory_estimate`] evaluates them for any counts,
//! and [`reserve`] sizes every buffer once, to the largest particle count that fits a byte limit,
//! and freezes them. After that, any growth beyond the reservation is a
//! [`CapacityError`](crate::CapacityError) naming the buffer, never a silent reallocation.
//! See `docs/decisions/0003-memory-budget.md`.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::buffer::{BudgetedBuffer, CapacityError, CapacityUnit, Scaling};

/// A container whose buffers belong to a run's memory budget.
///
/// Implementations list every buffer they own, host or device; the budget functions only ever
/// see this list.
pub trait Budgeted {
    /// Every buffer of the container.
    fn buffers(&self) -> Vec<&dyn BudgetedBuffer>;
    /// Every buffer of the container, mutably (for [`reserve`]).
    fn buffers_mut(&mut self) -> Vec<&mut dyn BudgetedBuffer>;
}

/// The linear price of a run: bytes per particle, per neighbour slot, and fixed, with the
/// counts the buffers hold now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryModel {
    /// Bytes for every particle (sum over per-particle buffers of elements per particle times
    /// element size).
    pub per_particle: u64,
    /// Bytes for every neighbour slot.
    pub per_slot: u64,
    /// Bytes that do not scale with the counts (priced at their current length).
    pub fixed: u64,
    /// Particle count the buffers hold now (the largest over per-particle buffers).
    pub particles: usize,
    /// Neighbour-slot count the buffers hold now (the largest over per-slot buffers).
    pub slots: usize,
}

impl MemoryModel {
    /// The model of a run made of `parts`.
    pub fn of(parts: &[&dyn Budgeted]) -> Self {
        let mut m = MemoryModel::default();
        for part in parts {
            for b in part.buffers() {
                let elem = b.element_bytes() as u64;
                match b.scaling() {
                    Scaling::PerParticle(k) => {
                        m.per_particle += k as u64 * elem;
                        m.particles = m.particles.max(b.len() / k.max(1));
                    }
                    Scaling::PerSlot(k) => {
                        m.per_slot += k as u64 * elem;
                        m.slots = m.slots.max(b.len() / k.max(1));
                    }
                    Scaling::Fixed => m.fixed += b.len() as u64 * elem,
                }
            }
        }
        m
    }

    /// Bytes the run needs for `particles` particles and `slots` neighbour slots (saturating at
    /// `u64::MAX`).
    pub fn bytes(&self, particles: usize, slots: usize) -> u64 {
        let b = particles as u128 * self.per_particle as u128
            + slots as u128 * self.per_slot as u128
            + self.fixed as u128;
        u64::try_from(b).unwrap_or(u64::MAX)
    }

    /// Bytes the run needs for the counts it holds now.
    pub fn current_bytes(&self) -> u64 {
        self.bytes(self.particles, self.slots)
    }

    /// Neighbour slots per particle the buffers hold now (0 without particles).
    pub fn slots_per_particle(&self) -> f64 {
        if self.particles == 0 {
            0.0
        } else {
            self.slots as f64 / self.particles as f64
        }
    }
}

/// Bytes a run made of `parts` needs for `particles` particles and `slots` neighbour slots.
pub fn memory_estimate(parts: &[&dyn Budgeted], particles: usize, slots: usize) -> u64 {
    MemoryModel::of(parts).bytes(particles, slots)
}

/// Options of [`reserve`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReserveOptions {
    /// Fraction of the limit kept free for what runtimes, reductions and transient work
    /// allocate outside the budgeted buffers. Default 5 %.
    pub tolerance: f64,
    /// Neighbour slots to reserve per particle. `None` keeps what the current neighbour lists
    /// occupy; raise it for moving or adaptive clouds whose neighbourhoods grow.
    pub slots_per_particle: Option<f64>,
}

impl Default for ReserveOptions {
    fn default() -> Self {
        Self {
            tolerance: 0.05,
            slots_per_particle: None,
        }
    }
}

/// What [`reserve`] sized the run to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reservation {
    /// Particle capacity of every per-particle buffer.
    pub particles: usize,
    /// Neighbour-slot capacity of every per-slot buffer.
    pub slots: usize,
    /// Bytes the reserved buffers occupy.
    pub bytes: u64,
    /// The byte limit the reservation was made against.
    pub limit: u64,
}

/// Sizes every buffer of `parts` once, to the largest particle capacity whose memory fits
/// `limit * (1 - tolerance)`, and freezes them.
///
/// Returns the capacities and bytes reserved. Fails with a [`CapacityError`] in bytes, and
/// changes nothing, when not even the particles and slots held now fit; fails likewise, with
/// every buffer unfrozen again, if an allocation fails.
///
/// # Panics
/// If `tolerance` is not in `[0, 1)` or `slots_per_particle` is negative or not finite: those
/// are programming errors (configuration values are validated where they are read).
///
/// ```
/// use mote_core::{ParticleData, Budgeted, memory::{reserve, ReserveOptions}};
///
/// let mut p = ParticleData::<f64>::zeroed(1000);
/// // 11 arrays of 8 bytes: 88 bytes a particle. 1 MB with 5 % tolerance holds 10 795.
/// let r = reserve(&mut [&mut p], 1_000_000, ReserveOptions::default()).unwrap();
/// assert_eq!(r.particles, 10_795);
/// assert!(p.resize(10_795).is_ok());
/// assert!(p.resize(10_796).is_err());
/// ```
pub fn reserve(
    parts: &mut [&mut dyn Budgeted],
    limit: u64,
    options: ReserveOptions,
) -> Result<Reservation, CapacityError> {
    let ReserveOptions {
        tolerance,
        slots_per_particle,
    } = options;
    assert!(
        (0.0..1.0).contains(&tolerance),
        "memory tolerance must be in [0, 1), got {tolerance}"
    );
    let model = MemoryModel::of(&parts.iter().map(|p| &**p).collect::<Vec<_>>());
    let spp = slots_per_particle.unwrap_or_else(|| model.slots_per_particle());
    assert!(
        spp.is_finite() && spp >= 0.0,
        "slots per particle must be finite and non-negative, got {spp}"
    );
    let slots_for = |particles: usize| ((particles as f64 * spp).ceil() as usize).max(model.slots);
    let usable = price(
        || {
            format!(
                "memory reservation for {} particles and {} neighbour slots",
                model.particles,
                slots_for(model.particles),
            )
        },
        model.bytes(model.particles, slots_for(model.particles)),
        limit,
        tolerance,
    )?;

    let particles = if model.per_particle == 0 && model.per_slot == 0 {
        model.particles
    } else {
        // Largest count whose bytes fit: start from the real-valued solution, then correct for
        // the rounding of the slot count.
        let per = model.per_particle as f64 + spp * model.per_slot as f64;
        let mut n = (((usable - model.fixed) as f64) / per).floor() as usize;
        n = n.max(model.particles);
        while n > model.particles && model.bytes(n, slots_for(n)) > usable {
            n -= 1;
        }
        n
    };
    let slots = slots_for(particles);

    let mut buffers: Vec<&mut dyn BudgetedBuffer> =
        parts.iter_mut().flat_map(|p| p.buffers_mut()).collect();
    for k in 0..buffers.len() {
        let b = &mut buffers[k];
        let capacity = match b.scaling() {
            Scaling::PerParticle(e) => particles * e,
            Scaling::PerSlot(e) => slots * e,
            Scaling::Fixed => b.len(),
        };
        if let Err(e) = b.reserve_and_freeze(capacity) {
            for b in &mut buffers[..k] {
                b.unfreeze();
            }
            return Err(e);
        }
    }
    Ok(Reservation {
        particles,
        slots,
        bytes: model.bytes(particles, slots),
        limit,
    })
}

/// Prices a run: fails, before anything is allocated, unless `needed` bytes fit `limit` less
/// `tolerance` (a fraction in `[0, 1)`). `what` names what was priced in the error, which adds
/// the limit and the tolerance. Returns the usable bytes. [`reserve`] makes this check first.
pub fn price(
    what: impl FnOnce() -> String,
    needed: u64,
    limit: u64,
    tolerance: f64,
) -> Result<u64, CapacityError> {
    let usable = (limit as f64 * (1.0 - tolerance)).floor() as u64;
    if needed > usable {
        return Err(CapacityError {
            what: format!(
                "{} (limit {limit} bytes less {:.1} % tolerance)",
                what(),
                tolerance * 100.0
            ),
            requested: needed,
            available: usable,
            unit: CapacityUnit::Bytes,
        });
    }
    Ok(usable)
}

/// The default memory budget of a run without a limit: the memory available now
/// ([`available_memory_bytes`](crate::platform::available_memory_bytes)) less 10 % and
/// 256 MiB for everything that is not a particle buffer. Runs are priced against it before they
/// allocate; it reserves nothing (reserving against it would size every buffer to fill the
/// machine). `None` where the system does not say.
pub fn default_budget() -> Option<u64> {
    let available = crate::platform::available_memory_bytes()?;
    Some(
        ((available as f64 * 0.9) as u64)
            .saturating_sub(256 << 20)
            .max(1),
    )
}

/// Process-wide memory limit in bytes; 0 means none.
static MEMORY_LIMIT: AtomicU64 = AtomicU64::new(0);

/// Sets the memory limit that applies to every run of this process (`None`: no limit, buffers
/// grow freely). The command line sets it from `--memory-limit`.
pub fn set_memory_limit(limit: Option<u64>) {
    MEMORY_LIMIT.store(limit.unwrap_or(0), Ordering::Relaxed);
}

/// The process-wide memory limit, if one is set.
pub fn memory_limit() -> Option<u64> {
    match MEMORY_LIMIT.load(Ordering::Relaxed) {
        0 => None,
        n => Some(n),
    }
}

/// Reserves `parts` against the process-wide limit, if one is set: what every run does before
/// its first step. Returns `None`, and leaves the buffers growable, without a limit.
pub fn reserve_under_process_limit(
    parts: &mut [&mut dyn Budgeted],
    options: ReserveOptions,
) -> Result<Option<Reservation>, CapacityError> {
    memory_limit()
        .map(|limit| reserve(parts, limit, options))
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::{BudgetedBuffer, Buffer};
    use crate::particles::ParticleData;

    /// A stand-in for a neighbour list: per-slot indices and weights, a per-particle range
    /// table and a fixed cell list.
    struct Neighbours {
        index: Buffer<u32>,
        weight: Buffer<f64>,
        ranges: Buffer<u32>,
        cells: Buffer<u32>,
    }

    impl Neighbours {
        fn new(particles: usize, per_particle: usize) -> Self {
            let mut n = Neighbours {
                index: Buffer::new("neighbour_index", Scaling::PerSlot(1)),
                weight: Buffer::new("neighbour_weight", Scaling::PerSlot(1)),
                ranges: Buffer::new("neighbour_range", Scaling::PerParticle(2)),
                cells: Buffer::new("cells", Scaling::Fixed),
            };
            n.index.resize(particles * per_particle, 0).unwrap();
            n.weight.resize(particles * per_particle, 0.0).unwrap();
            n.ranges.resize(particles * 2, 0).unwrap();
            n.cells.resize(1000, 0).unwrap();
            n
        }
    }

    impl Budgeted for Neighbours {
        fn buffers(&self) -> Vec<&dyn BudgetedBuffer> {
            vec![&self.index, &self.weight, &self.ranges, &self.cells]
        }
        fn buffers_mut(&mut self) -> Vec<&mut dyn BudgetedBuffer> {
            vec![
                &mut self.index,
                &mut self.weight,
                &mut self.ranges,
                &mut self.cells,
            ]
        }
    }

    fn reserved_bytes(parts: &[&dyn Budgeted]) -> u64 {
        parts
            .iter()
            .flat_map(|p| p.buffers())
            .map(|b| (b.capacity() * b.element_bytes()) as u64)
            .sum()
    }

    #[test]
    fn model_is_priced_from_element_types() {
        let p = ParticleData::<f32>::zeroed(100);
        let nb = Neighbours::new(100, 20);
        let m = MemoryModel::of(&[&p, &nb]);
        // 10 f32 components + u64 id; 2 u32 range entries.
        assert_eq!(m.per_particle, 10 * 4 + 8 + 2 * 4);
        assert_eq!(m.per_slot, 4 + 8);
        assert_eq!(m.fixed, 4000);
        assert_eq!((m.particles, m.slots), (100, 2000));
        assert_eq!(m.slots_per_particle(), 20.0);
        assert_eq!(
            memory_estimate(&[&p, &nb], 1000, 30_000),
            1000 * 56 + 30_000 * 12 + 4000
        );
        assert_eq!(m.current_bytes(), 100 * 56 + 2000 * 12 + 4000);
    }

    #[test]
    fn reservation_fills_the_limit_less_tolerance_and_freezes() {
        let mut p = ParticleData::<f64>::zeroed(100);
        let mut nb = Neighbours::new(100, 20);
        let limit = 10_000_000;
        let r = reserve(&mut [&mut p, &mut nb], limit, ReserveOptions::default()).unwrap();
        let per = 88 + 8 + 20 * 12;
        assert_eq!(r.particles, (9_500_000 - 4000) / per);
        assert_eq!(r.slots, r.particles * 20);
        assert!(r.bytes <= 9_500_000);
        // One more particle would not have fitted.
        let m = MemoryModel::of(&[&p, &nb]);
        assert!(m.bytes(r.particles + 1, (r.particles + 1) * 20) > 9_500_000);
        // The buffers hold exactly what the reservation reports.
        assert_eq!(reserved_bytes(&[&p, &nb]), r.bytes);
        assert!(p.buffers().iter().all(|b| b.is_frozen()));
        // Growth within the reservation works; beyond it is a CapacityError naming the buffer.
        p.resize(r.particles).unwrap();
        let err = p.resize(r.particles + 1).unwrap_err();
        assert_eq!(err.unit, CapacityUnit::Elements);
        assert_eq!(err.requested, r.particles as u64 + 1);
        assert_eq!(err.available, r.particles as u64);
        assert_eq!(p.len(), r.particles);
        let err = nb.index.resize(r.slots + 1, 0).unwrap_err();
        assert!(err.what.contains("neighbour_index"), "{err}");
    }

    #[test]
    fn raised_slots_per_particle_reserves_more_slots() {
        let mut p = ParticleData::<f32>::zeroed(10);
        let mut nb = Neighbours::new(10, 8);
        let opts = ReserveOptions {
            slots_per_particle: Some(12.5),
            ..Default::default()
        };
        let r = reserve(&mut [&mut p, &mut nb], 1 << 20, opts).unwrap();
        assert_eq!(r.slots, (r.particles as f64 * 12.5).ceil() as usize);
        assert_eq!(nb.weight.capacity(), r.slots);
    }

    #[test]
    fn over_budget_reservation_is_a_capacity_error_and_changes_nothing() {
        let mut p = ParticleData::<f64>::zeroed(1000);
        // 1000 particles need 88 000 bytes; 90 000 less 5 % is 85 500.
        let err = reserve(&mut [&mut p], 90_000, ReserveOptions::default()).unwrap_err();
        assert_eq!(err.unit, CapacityUnit::Bytes);
        assert_eq!((err.requested, err.available), (88_000, 85_500));
        assert!(err.to_string().contains("1000 particles"), "{err}");
        assert!(p.buffers().iter().all(|b| !b.is_frozen()));
        // Without tolerance it fits, exactly.
        let opts = ReserveOptions {
            tolerance: 0.0,
            ..Default::default()
        };
        let r = reserve(&mut [&mut p], 88_000, opts).unwrap();
        assert_eq!((r.particles, r.bytes), (1000, 88_000));
    }

    #[test]
    fn process_limit_applies_when_set() {
        // The only test that touches the process-wide setting.
        let mut p = ParticleData::<f32>::zeroed(10);
        set_memory_limit(None);
        assert_eq!(
            reserve_under_process_limit(&mut [&mut p], ReserveOptions::default()),
            Ok(None)
        );
        // 48 bytes a particle; 50 527 bytes less 5 % is 48 000.
        set_memory_limit(Some(50_527));
        let r = reserve_under_process_limit(&mut [&mut p], ReserveOptions::default())
            .unwrap()
            .unwrap();
        assert_eq!(r.particles, 1000);
        set_memory_limit(None);
        assert_eq!(memory_limit(), None);
    }

    #[test]
    #[should_panic(expected = "tolerance")]
    fn invalid_tolerance_panics() {
        let mut p = ParticleData::<f32>::zeroed(1);
        let _ = reserve(
            &mut [&mut p],
            1 << 20,
            ReserveOptions {
                tolerance: 1.0,
                ..Default::default()
            },
        );
    }
}
