//! Particle state as ten contiguous component arrays: [`ParticleData`].
//!
//! Position, velocity and acceleration are stored one array per Cartesian component, plus the
//! mass: a kernel that reads positions and masses streams 4 of the 10 arrays and nothing else,
//! and consecutive particles' `x` components are adjacent, so a SIMD register or a GPU warp
//! fills with one contiguous load. See `docs/decisions/0001-component-arrays.md`.

use crate::buffer::{AnyBuffer, BudgetedBuffer, Buffer, CapacityError, Scaling};
use crate::columns::{self, Permutation};
use crate::comm::Comm;
use crate::memory::Budgeted;
use crate::real::Real;

/// The scalar component arrays of [`ParticleData`], in storage order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(usize)]
pub enum Component {
    /// x coordinate of the position.
    PositionX,
    /// y coordinate of the position.
    PositionY,
    /// z coordinate of the position.
    PositionZ,
    /// x component of the velocity.
    VelocityX,
    /// y component of the velocity.
    VelocityY,
    /// z component of the velocity.
    VelocityZ,
    /// x component of the acceleration.
    AccelerationX,
    /// y component of the acceleration.
    AccelerationY,
    /// z component of the acceleration.
    AccelerationZ,
    /// Mass.
    Mass,
}

/// Number of scalar component arrays.
pub const COMPONENTS: usize = 10;

impl Component {
    /// All components, in storage order.
    pub const ALL: [Component; COMPONENTS] = [
        Component::PositionX,
        Component::PositionY,
        Component::PositionZ,
        Component::VelocityX,
        Component::VelocityY,
        Component::VelocityZ,
        Component::AccelerationX,
        Component::AccelerationY,
        Component::AccelerationZ,
        Component::Mass,
    ];

    /// The array's name, as it appears in capacity errors, snapshots and memory reports.
    pub const fn name(self) -> &'static str {
        match self {
            Component::PositionX => "position_x",
            Component::PositionY => "position_y",
            Component::PositionZ => "position_z",
            Component::VelocityX => "velocity_x",
            Component::VelocityY => "velocity_y",
            Component::VelocityZ => "velocity_z",
            Component::AccelerationX => "acceleration_x",
            Component::AccelerationY => "acceleration_y",
            Component::AccelerationZ => "acceleration_z",
            Component::Mass => "mass",
        }
    }
}

/// The three component arrays of a vector quantity, read-only.
///
/// Kernels take the slices ([`Vec3Span::x`] and friends, or [`Vec3Span::components`]) and
/// index them directly. [`Vec3Span::get`] gathers one particle's vector from three arrays: it
/// exists for set-up code, tests and diagnostics. **Calling it inside a loop over particles
/// gives back exactly what the component layout was chosen for** (contiguous, vectorisable
/// loads), and no hot loop in mote may use it.
#[derive(Clone, Copy, Debug)]
pub struct Vec3Span<'a, R> {
    x: &'a [R],
    y: &'a [R],
    z: &'a [R],
}

impl<'a, R: Copy> Vec3Span<'a, R> {
    /// Combines three equally long slices.
    ///
    /// # Panics
    /// If the lengths differ.
    pub fn new(x: &'a [R], y: &'a [R], z: &'a [R]) -> Self {
        assert!(
            x.len() == y.len() && y.len() == z.len(),
            "Vec3Span components of unequal lengths {}, {}, {}",
            x.len(),
            y.len(),
            z.len()
        );
        Self { x, y, z }
    }

    /// Number of vectors.
    #[inline]
    pub fn len(&self) -> usize {
        self.x.len()
    }

    /// Whether it holds no vector.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.x.is_empty()
    }

    /// The x components.
    #[inline]
    pub fn x(&self) -> &'a [R] {
        self.x
    }

    /// The y components.
    #[inline]
    pub fn y(&self) -> &'a [R] {
        self.y
    }

    /// The z components.
    #[inline]
    pub fn z(&self) -> &'a [R] {
        self.z
    }

    /// The three component slices, for kernels.
    #[inline]
    pub fn components(&self) -> (&'a [R], &'a [R], &'a [R]) {
        (self.x, self.y, self.z)
    }

    /// Vector `i`, gathered from three arrays. **Set-up, tests and diagnostics only**: never in
    /// a loop over particles (see the type's documentation).
    pub fn get(&self, i: usize) -> [R; 3] {
        [self.x[i], self.y[i], self.z[i]]
    }
}

/// The three component arrays of a vector quantity, writable.
///
/// [`Vec3SpanMut::get`] and [`Vec3SpanMut::set`] gather and scatter one particle's vector:
/// **set-up, tests and diagnostics only**, never inside a loop over particles; kernels take the
/// slices with [`Vec3SpanMut::components_mut`].
#[derive(Debug)]
pub struct Vec3SpanMut<'a, R> {
    x: &'a mut [R],
    y: &'a mut [R],
    z: &'a mut [R],
}

impl<'a, R: Copy> Vec3SpanMut<'a, R> {
    /// Combines three equally long slices.
    ///
    /// # Panics
    /// If the lengths differ.
    pub fn new(x: &'a mut [R], y: &'a mut [R], z: &'a mut [R]) -> Self {
        assert!(
            x.len() == y.len() && y.len() == z.len(),
            "Vec3SpanMut components of unequal lengths {}, {}, {}",
            x.len(),
            y.len(),
            z.len()
        );
        Self { x, y, z }
    }

    /// Number of vectors.
    #[inline]
    pub fn len(&self) -> usize {
        self.x.len()
    }

    /// Whether it holds no vector.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.x.is_empty()
    }

    /// A read-only view of the same arrays.
    #[inline]
    pub fn as_span(&self) -> Vec3Span<'_, R> {
        Vec3Span {
            x: self.x,
            y: self.y,
            z: self.z,
        }
    }

    /// A shorter-lived mutable view of the same arrays.
    #[inline]
    pub fn reborrow(&mut self) -> Vec3SpanMut<'_, R> {
        Vec3SpanMut {
            x: self.x,
            y: self.y,
            z: self.z,
        }
    }

    /// The three component slices, for kernels.
    #[inline]
    pub fn components_mut(self) -> (&'a mut [R], &'a mut [R], &'a mut [R]) {
        (self.x, self.y, self.z)
    }

    /// Splits into the vectors before `mid` and from `mid` on.
    #[inline]
    pub fn split_at(self, mid: usize) -> (Self, Self) {
        let (x0, x1) = self.x.split_at_mut(mid);
        let (y0, y1) = self.y.split_at_mut(mid);
        let (z0, z1) = self.z.split_at_mut(mid);
        (
            Self {
                x: x0,
                y: y0,
                z: z0,
            },
            Self {
                x: x1,
                y: y1,
                z: z1,
            },
        )
    }

    /// Vector `i`, gathered from three arrays. **Set-up, tests and diagnostics only.**
    pub fn get(&self, i: usize) -> [R; 3] {
        [self.x[i], self.y[i], self.z[i]]
    }

    /// Scatters `v` into vector `i`. **Set-up, tests and diagnostics only.**
    pub fn set(&mut self, i: usize, v: [R; 3]) {
        self.x[i] = v[0];
        self.y[i] = v[1];
        self.z[i] = v[2];
    }

    /// Sets every vector to `v`.
    pub fn fill(&mut self, v: [R; 3]) {
        self.x.fill(v[0]);
        self.y.fill(v[1]);
        self.z.fill(v[2]);
    }
}

/// One particle gathered from all arrays: for set-up, tests, diagnostics and output only.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Particle<R> {
    /// Stable identifier, unchanged by permutations and removals of other particles.
    pub id: u64,
    /// Position.
    pub position: [R; 3],
    /// Velocity.
    pub velocity: [R; 3],
    /// Acceleration.
    pub acceleration: [R; 3],
    /// Mass.
    pub mass: R,
}

/// Disjoint mutable views of every array of a [`ParticleData`], so that a pass can read some
/// arrays while it writes others (for example positions and masses in, accelerations out).
#[derive(Debug)]
pub struct ParticlesMut<'a, R> {
    /// Positions.
    pub position: Vec3SpanMut<'a, R>,
    /// Velocities.
    pub velocity: Vec3SpanMut<'a, R>,
    /// Accelerations.
    pub acceleration: Vec3SpanMut<'a, R>,
    /// Masses.
    pub mass: &'a mut [R],
    /// Stable identifiers (read-only: they are assigned by the container).
    pub id: &'a [u64],
}

/// Number of arrays a [`ParticleData`] keeps at equal length: the ten components and the ids.
const ARRAYS: usize = COMPONENTS + 1;

/// The particle state of a simulation: ten component arrays of `R` and an array of stable ids,
/// always of equal length.
///
/// Every array is a separate, 64-byte-aligned allocation ([`Buffer`]), part of the run's memory
/// budget. Every operation that changes the length goes through one private helper
/// (`arrays_mut`), which lists all arrays: the equal-length invariant holds by construction and
/// a new quantity is added at that one place.
///
/// ```
/// use mote_core::ParticleData;
///
/// let mut p = ParticleData::<f64>::new();
/// let a = p.push([0.0, 0.0, 0.0], [0.0, 1.0, 0.0], 1.0).unwrap();
/// let b = p.push([1.0, 0.0, 0.0], [0.0, -1.0, 0.0], 1.0).unwrap();
/// assert_eq!(p.len(), 2);
/// assert_eq!(p.positions().x(), &[0.0, 1.0]);
/// p.swap_remove(0);
/// assert_eq!(p.ids(), &[b]);
/// assert_ne!(a, b);
/// ```
#[derive(Clone, Debug)]
pub struct ParticleData<R: Real> {
    components: [Buffer<R>; COMPONENTS],
    id: Buffer<u64>,
    next_id: u64,
}

impl<R: Real> Default for ParticleData<R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R: Real> ParticleData<R> {
    /// An empty container.
    pub fn new() -> Self {
        Self {
            components: Component::ALL.map(|c| Buffer::new(c.name(), Scaling::PerParticle(1))),
            id: Buffer::new("id", Scaling::PerParticle(1)),
            next_id: 0,
        }
    }

    /// Particles restored from saved arrays (a checkpoint): the ten components in
    /// [`Component::ALL`] order and the ids. New particles added later get ids above the
    /// largest restored one.
    ///
    /// # Panics
    /// If the arrays differ in length.
    pub fn restore(components: [&[R]; COMPONENTS], ids: &[u64]) -> Self {
        let n = ids.len();
        assert!(
            components.iter().all(|c| c.len() == n),
            "restored arrays of unequal length"
        );
        let mut p = Self::zeroed(n);
        for (c, src) in Component::ALL.into_iter().zip(components) {
            p.component_mut(c).copy_from_slice(src);
        }
        p.id.as_mut_slice().copy_from_slice(ids);
        p.next_id = ids.iter().max().map_or(0, |&m| m + 1);
        p
    }

    /// `n` particles at rest at the origin with zero mass, ids `0..n`.
    pub fn zeroed(n: usize) -> Self {
        let mut p = Self::new();
        p.resize(n).expect("an unfrozen container always grows");
        p
    }

    /// The one place that lists every array. All length changes go through it.
    fn arrays_mut(&mut self) -> [&mut dyn AnyBuffer; ARRAYS] {
        let mut all = self
            .components
            .iter_mut()
            .map(|b| b as &mut dyn AnyBuffer)
            .chain(std::iter::once(&mut self.id as &mut dyn AnyBuffer));
        std::array::from_fn(|_| all.next().expect("ARRAYS counts every array"))
    }

    /// Number of particles.
    #[inline]
    pub fn len(&self) -> usize {
        self.id.len()
    }

    /// Whether there is no particle.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.id.is_empty()
    }

    /// Number of particles the arrays hold without reallocating.
    pub fn capacity(&self) -> usize {
        self.components
            .iter()
            .map(Buffer::capacity)
            .chain(std::iter::once(self.id.capacity()))
            .min()
            .unwrap_or(0)
    }

    /// Sets the number of particles. New particles are zeroed and receive fresh ids. All arrays
    /// change together or, on a [`CapacityError`], none does.
    pub fn resize(&mut self, n: usize) -> Result<(), CapacityError> {
        let old = self.len();
        columns::resize_all(&mut self.arrays_mut(), n)?;
        // Only growth adds particles; shrinking leaves nothing to number.
        columns::assign_fresh_ids(&mut self.id.as_mut_slice()[old.min(n)..], &mut self.next_id);
        Ok(())
    }

    /// Appends a particle with zero acceleration and returns its id.
    pub fn push(
        &mut self,
        position: [R; 3],
        velocity: [R; 3],
        mass: R,
    ) -> Result<u64, CapacityError> {
        let i = self.len();
        self.resize(i + 1)?;
        let mut v = self.view_mut();
        v.position.set(i, position);
        v.velocity.set(i, velocity);
        v.mass[i] = mass;
        Ok(v.id[i])
    }

    /// Keeps the first `n` particles.
    pub fn truncate(&mut self, n: usize) {
        columns::truncate_all(&mut self.arrays_mut(), n);
    }

    /// Removes particle `i`, keeping the order of the others.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn remove(&mut self, i: usize) {
        columns::remove_all(&mut self.arrays_mut(), i);
    }

    /// Removes particle `i` by moving the last particle into its place.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn swap_remove(&mut self, i: usize) {
        columns::swap_remove_all(&mut self.arrays_mut(), i);
    }

    /// Keeps the particles for which `keep(index)` is true, in their order, and removes the
    /// others with all their arrays; returns how many were removed. One pass (a permutation and
    /// a truncation), whatever the number removed.
    pub fn retain(&mut self, mut keep: impl FnMut(usize) -> bool) -> usize {
        let n = self.len();
        let (mut order, dropped): (Vec<usize>, Vec<usize>) = (0..n).partition(|&i| keep(i));
        let kept = order.len();
        if kept < n {
            order.extend(dropped);
            self.apply_permutation(&Permutation::new(order).expect("a permutation of 0..n"));
            self.truncate(kept);
        }
        n - kept
    }

    /// Reorders the particles: particle `perm[i]` moves to position `i`, with all its arrays and
    /// its id.
    ///
    /// # Panics
    /// If the permutation's length is not [`ParticleData::len`].
    pub fn apply_permutation(&mut self, perm: &Permutation) {
        columns::permute_all(&mut self.arrays_mut(), perm);
    }

    /// Moves each particle whose `destinations` entry names another rank to that rank, its id
    /// and every array together ([`columns::migrate_all`]: staying particles first, then the
    /// arrivals in the order of their sending ranks). Collective. On a
    /// [`CapacityError`] on any rank, no rank's particles change.
    pub fn migrate(
        &mut self,
        comm: &dyn Comm,
        destinations: &[u32],
    ) -> Result<columns::Migrated, CapacityError> {
        let moved = columns::migrate_all(comm, &mut self.arrays_mut(), destinations)?;
        // Ids stay unique over the ranks: a particle added here later numbers above every
        // arrival.
        if let Some(&top) = self.id.as_slice().iter().max() {
            self.next_id = self.next_id.max(top + 1);
        }
        Ok(moved)
    }

    /// Orders the particles by id, with all their arrays.
    pub fn sort_by_id(&mut self) {
        let perm = Permutation::sorting_by_key(self.ids());
        self.apply_permutation(&perm);
    }

    /// The array of one scalar component.
    #[inline]
    pub fn component(&self, c: Component) -> &[R] {
        self.components[c as usize].as_slice()
    }

    /// The array of one scalar component, writable.
    #[inline]
    pub fn component_mut(&mut self, c: Component) -> &mut [R] {
        self.components[c as usize].as_mut_slice()
    }

    fn span(&self, first: Component) -> Vec3Span<'_, R> {
        let i = first as usize;
        Vec3Span::new(
            self.components[i].as_slice(),
            self.components[i + 1].as_slice(),
            self.components[i + 2].as_slice(),
        )
    }

    /// Positions.
    pub fn positions(&self) -> Vec3Span<'_, R> {
        self.span(Component::PositionX)
    }

    /// Velocities.
    pub fn velocities(&self) -> Vec3Span<'_, R> {
        self.span(Component::VelocityX)
    }

    /// Accelerations.
    pub fn accelerations(&self) -> Vec3Span<'_, R> {
        self.span(Component::AccelerationX)
    }

    /// Masses.
    pub fn masses(&self) -> &[R] {
        self.component(Component::Mass)
    }

    /// Stable particle ids.
    pub fn ids(&self) -> &[u64] {
        self.id.as_slice()
    }

    /// Disjoint writable views of every array.
    pub fn view_mut(&mut self) -> ParticlesMut<'_, R> {
        let [px, py, pz, vx, vy, vz, ax, ay, az, m] = &mut self.components;
        ParticlesMut {
            position: Vec3SpanMut::new(px.as_mut_slice(), py.as_mut_slice(), pz.as_mut_slice()),
            velocity: Vec3SpanMut::new(vx.as_mut_slice(), vy.as_mut_slice(), vz.as_mut_slice()),
            acceleration: Vec3SpanMut::new(ax.as_mut_slice(), ay.as_mut_slice(), az.as_mut_slice()),
            mass: m.as_mut_slice(),
            id: self.id.as_slice(),
        }
    }

    /// Particle `i` gathered from all arrays. **Set-up, tests, diagnostics and output only**:
    /// never in a loop over particles inside a kernel.
    pub fn particle(&self, i: usize) -> Particle<R> {
        Particle {
            id: self.id.as_slice()[i],
            position: self.positions().get(i),
            velocity: self.velocities().get(i),
            acceleration: self.accelerations().get(i),
            mass: self.masses()[i],
        }
    }

    /// The index of the particle with id `id`, by a linear search (set-up and tests only).
    pub fn index_of(&self, id: u64) -> Option<usize> {
        self.ids().iter().position(|&x| x == id)
    }
}

impl<R: Real> Budgeted for ParticleData<R> {
    fn buffers(&self) -> Vec<&dyn BudgetedBuffer> {
        self.components
            .iter()
            .map(|b| b as &dyn BudgetedBuffer)
            .chain(std::iter::once(&self.id as &dyn BudgetedBuffer))
            .collect()
    }

    fn buffers_mut(&mut self) -> Vec<&mut dyn BudgetedBuffer> {
        self.arrays_mut()
            .into_iter()
            .map(|b| b as &mut dyn BudgetedBuffer)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::BUFFER_ALIGN;

    #[test]
    fn retain_keeps_the_order_and_every_array_of_the_kept() {
        let mut p = ParticleData::<f64>::new();
        for k in 0..6 {
            p.push([k as f64, 0.0, 0.0], [0.0, k as f64, 0.0], 1.0 + k as f64)
                .unwrap();
        }
        let removed = p.retain(|i| i % 3 != 1);
        assert_eq!(removed, 2);
        assert_eq!(p.ids(), &[0, 2, 3, 5]);
        assert_eq!(p.positions().x(), &[0.0, 2.0, 3.0, 5.0]);
        assert_eq!(p.velocities().y(), &[0.0, 2.0, 3.0, 5.0]);
        assert_eq!(p.masses(), &[1.0, 3.0, 4.0, 6.0]);
        assert_eq!(p.retain(|_| true), 0);
        assert_eq!(p.len(), 4);
    }

    fn sample<R: Real>(n: usize) -> ParticleData<R> {
        let mut p = ParticleData::<R>::new();
        for i in 0..n {
            let f = |k: usize| R::cast((10 * i + k) as f64);
            p.push([f(0), f(1), f(2)], [f(3), f(4), f(5)], f(9))
                .unwrap();
            p.view_mut().acceleration.set(i, [f(6), f(7), f(8)]);
        }
        p
    }

    /// Every array of particle `i` still carries the values it was created with.
    fn assert_coherent<R: Real>(p: &ParticleData<R>) {
        for c in Component::ALL {
            assert_eq!(p.component(c).len(), p.len(), "{}", c.name());
        }
        for i in 0..p.len() {
            let q = p.particle(i);
            let base = 10.0 * q.id as f64;
            let got = [
                q.position[0],
                q.position[1],
                q.position[2],
                q.velocity[0],
                q.velocity[1],
                q.velocity[2],
                q.acceleration[0],
                q.acceleration[1],
                q.acceleration[2],
                q.mass,
            ];
            for (k, v) in got.iter().enumerate() {
                assert_eq!(v.as_f64(), base + k as f64, "particle {i}, component {k}");
            }
        }
    }

    #[test]
    fn every_length_change_keeps_all_arrays_equal_and_coherent() {
        let mut p = sample::<f64>(50);
        assert_coherent(&p);
        p.remove(3);
        p.swap_remove(10);
        p.truncate(40);
        assert_eq!(p.len(), 40);
        assert_coherent(&p);
        assert!(!p.ids().contains(&3));
        // After removing id 3, index 10 held id 11.
        assert!(!p.ids().contains(&11));
        // Growth zeroes the new particles and gives them fresh ids.
        p.resize(45).unwrap();
        for c in Component::ALL {
            assert_eq!(p.component(c).len(), 45);
            assert!(p.component(c)[40..].iter().all(|&v| v == 0.0));
        }
        assert_eq!(&p.ids()[40..], &[50, 51, 52, 53, 54]);
        // Resizing down drops the last particles; growing again never reuses their ids.
        p.resize(42).unwrap();
        p.resize(44).unwrap();
        assert_eq!(&p.ids()[40..], &[50, 51, 55, 56]);
    }

    #[test]
    fn every_array_is_cache_line_aligned() {
        let p = sample::<f32>(33);
        for c in Component::ALL {
            assert_eq!(p.component(c).as_ptr() as usize % BUFFER_ALIGN, 0, "{c:?}");
        }
        assert_eq!(p.ids().as_ptr() as usize % BUFFER_ALIGN, 0);
        // The arrays are separate allocations, not views into one block.
        let starts: std::collections::HashSet<usize> = Component::ALL
            .iter()
            .map(|&c| p.component(c).as_ptr() as usize)
            .collect();
        assert_eq!(starts.len(), COMPONENTS);
    }

    #[test]
    fn a_permutation_moves_every_array_and_the_id_together() {
        let mut p = sample::<f32>(100);
        // Reverse, then a shuffle made of several cycles.
        let perm = Permutation::new((0..100).rev().collect()).unwrap();
        p.apply_permutation(&perm);
        assert_eq!(p.ids()[0], 99);
        assert_coherent(&p);
        let keys: Vec<u64> = p.ids().iter().map(|&id| (id * 37) % 101).collect();
        p.apply_permutation(&Permutation::sorting_by_key(&keys));
        assert_coherent(&p);
        let sorted: Vec<u64> = p.ids().iter().map(|&id| (id * 37) % 101).collect();
        assert!(sorted.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn growth_past_a_frozen_reservation_fails_and_changes_nothing() {
        let mut p = sample::<f64>(8);
        for b in p.buffers_mut() {
            b.reserve_and_freeze(10).unwrap();
        }
        p.push([0.0; 3], [0.0; 3], 1.0).unwrap();
        p.push([0.0; 3], [0.0; 3], 1.0).unwrap();
        let err = p.push([0.0; 3], [0.0; 3], 1.0).unwrap_err();
        assert_eq!((err.requested, err.available), (11, 10));
        assert_eq!(p.len(), 10);
        for c in Component::ALL {
            assert_eq!(p.component(c).len(), 10);
        }
        assert!(p.resize(11).is_err());
        assert_eq!(p.ids().len(), 10);
    }

    #[test]
    fn views_give_disjoint_access() {
        let mut p = sample::<f64>(4);
        let v = p.view_mut();
        let (x, _, _) = v.position.as_span().components();
        let (ax, _, _) = v.acceleration.components_mut();
        for i in 0..x.len() {
            ax[i] = x[i] * v.mass[i];
        }
        assert_eq!(p.accelerations().x()[2], 20.0 * 29.0);
    }

    #[test]
    #[should_panic(expected = "unequal lengths")]
    fn vec3span_refuses_unequal_components() {
        let a = [1.0f64, 2.0];
        let b = [1.0f64];
        let _ = Vec3Span::new(&a, &a, &b);
    }
}
