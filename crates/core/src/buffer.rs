//! Budgeted, cache-line-aligned growable buffers: the only way mote stores per-particle or
//! per-neighbour-slot data.
//!
//! A [`Buffer`] grows like a `Vec` until a reservation freezes it
//! ([`crate::memory::reserve`]); from then on a length beyond its capacity is a
//! [`CapacityError`], never a reallocation. That makes the memory a run uses a number that is
//! known before the run starts.

use aligned_vec::{AVec, ConstAlign};
use bytemuck::Pod;
use std::fmt;

/// Alignment of every buffer's first element, in bytes: one cache line on current CPUs, and a
/// multiple of every SIMD register width mote uses (AVX-512 loads are 64 bytes).
pub const BUFFER_ALIGN: usize = 64;

/// How a buffer's length scales with the size of a run; this is what lets a run be priced
/// ([`crate::memory::MemoryModel`]) from element types alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scaling {
    /// `k` elements for every particle (position components: `k = 1`; a 5-variable state in
    /// one interleaved buffer would be `k = 5`).
    PerParticle(usize),
    /// `k` elements for every neighbour slot (neighbour indices, weights, distances).
    PerSlot(usize),
    /// Independent of the particle and slot counts (for example the cell list of the bins).
    Fixed,
}

/// A request for more elements than a frozen reservation holds, or a reservation that does not
/// fit its byte limit.
///
/// It names what ran out (a buffer, or the run as a whole), and the requested and available
/// sizes in [`CapacityUnit`]s.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "capacity exceeded in {what}: {requested} {unit} requested, {available} {unit} available{hint}",
    hint = hint_for(*unit)
)]
pub struct CapacityError {
    /// What ran out: a buffer's name, or a description of a whole reservation.
    pub what: String,
    /// The size that was asked for.
    pub requested: u64,
    /// The size that is available.
    pub available: u64,
    /// The unit of `requested` and `available`.
    pub unit: CapacityUnit,
}

fn hint_for(unit: CapacityUnit) -> &'static str {
    match unit {
        CapacityUnit::Elements => {
            " (the buffer was sized by a memory reservation; reserve again with a larger limit or \
             more slots per particle)"
        }
        CapacityUnit::Bytes => " (raise the memory limit or run fewer particles)",
        CapacityUnit::Particles => " (raise the memory limit or run fewer particles)",
    }
}

/// The unit a [`CapacityError`] counts in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapacityUnit {
    /// Elements of one buffer.
    Elements,
    /// Particles of a run.
    Particles,
    /// Bytes of memory.
    Bytes,
}

impl fmt::Display for CapacityUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CapacityUnit::Elements => "elements",
            CapacityUnit::Particles => "particles",
            CapacityUnit::Bytes => "bytes",
        })
    }
}

/// A growable, 64-byte-aligned, contiguous buffer of plain-old-data elements that belongs to a
/// run's memory budget.
///
/// Growth is free until [`Buffer::freeze`]; afterwards any length beyond the capacity fails with
/// a [`CapacityError`] naming this buffer.
pub struct Buffer<T: Pod> {
    data: AVec<T, ConstAlign<BUFFER_ALIGN>>,
    name: &'static str,
    scaling: Scaling,
    frozen: bool,
}

impl<T: Pod> Buffer<T> {
    /// An empty, unfrozen buffer. `name` appears in capacity errors and memory reports.
    pub fn new(name: &'static str, scaling: Scaling) -> Self {
        Self {
            data: AVec::new(BUFFER_ALIGN),
            name,
            scaling,
            frozen: false,
        }
    }

    /// The buffer's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// How the buffer's length scales with the run.
    pub fn scaling(&self) -> Scaling {
        self.scaling
    }

    /// Number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the buffer holds no element.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Number of elements the buffer holds without reallocating.
    pub fn capacity(&self) -> usize {
        self.data.capacity()
    }

    /// Whether a reservation has frozen the capacity.
    pub fn is_frozen(&self) -> bool {
        self.frozen
    }

    /// The elements as a slice.
    #[inline]
    pub fn as_slice(&self) -> &[T] {
        self.data.as_slice()
    }

    /// The elements as a mutable slice.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        self.data.as_mut_slice()
    }

    /// The elements as bytes, for transfers to a device.
    pub fn as_bytes(&self) -> &[u8] {
        bytemuck::cast_slice(self.as_slice())
    }

    /// Fails if `len` elements would not fit a frozen buffer; an unfrozen buffer always fits.
    pub fn check_len(&self, len: usize) -> Result<(), CapacityError> {
        if self.frozen && len > self.capacity() {
            Err(CapacityError {
                what: format!("buffer `{}`", self.name),
                requested: len as u64,
                available: self.capacity() as u64,
                unit: CapacityUnit::Elements,
            })
        } else {
            Ok(())
        }
    }

    /// Sets the length to `len`, filling new elements with `value`.
    pub fn resize(&mut self, len: usize, value: T) -> Result<(), CapacityError> {
        self.check_len(len)?;
        self.data.resize(len, value);
        Ok(())
    }

    /// Appends one element.
    pub fn push(&mut self, value: T) -> Result<(), CapacityError> {
        self.check_len(self.len() + 1)?;
        self.data.push(value);
        Ok(())
    }

    /// Replaces the contents with `values`.
    pub fn assign(&mut self, values: &[T]) -> Result<(), CapacityError> {
        self.check_len(values.len())?;
        self.data.clear();
        self.data.extend_from_slice(values);
        Ok(())
    }

    /// Shortens the buffer to `len` elements (no effect if it is already shorter). The capacity
    /// stays.
    pub fn truncate(&mut self, len: usize) {
        self.data.truncate(len);
    }

    /// Makes the capacity exactly `capacity` elements and freezes it.
    ///
    /// Fails without freezing when `capacity` is below the current length, or when the
    /// allocation itself fails.
    pub fn reserve_and_freeze(&mut self, capacity: usize) -> Result<(), CapacityError> {
        let too_small = || CapacityError {
            what: format!("reservation of buffer `{}`", self.name),
            requested: self.len() as u64,
            available: capacity as u64,
            unit: CapacityUnit::Elements,
        };
        if capacity < self.len() {
            return Err(too_small());
        }
        if self.capacity() > capacity {
            // Exact capacities keep the reservation's byte count honest.
            if capacity == 0 {
                self.data = AVec::new(BUFFER_ALIGN);
            } else {
                self.data.shrink_to(capacity);
            }
        } else if self.data.try_reserve_exact(capacity - self.len()).is_err() {
            return Err(CapacityError {
                what: format!("allocation of buffer `{}`", self.name),
                requested: (capacity * std::mem::size_of::<T>()) as u64,
                available: (self.capacity() * std::mem::size_of::<T>()) as u64,
                unit: CapacityUnit::Bytes,
            });
        }
        self.frozen = true;
        Ok(())
    }

    /// Lifts a freeze: the buffer grows freely again. Used when a run ends and its containers are
    /// reused for set-up.
    pub fn unfreeze(&mut self) {
        self.frozen = false;
    }
}

impl<T: Pod + fmt::Debug> fmt::Debug for Buffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buffer")
            .field("name", &self.name)
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .field("frozen", &self.frozen)
            .finish()
    }
}

impl<T: Pod> Clone for Buffer<T> {
    fn clone(&self) -> Self {
        Self {
            data: self.data.clone(),
            name: self.name,
            scaling: self.scaling,
            frozen: self.frozen,
        }
    }
}

/// What the memory budget needs to know of a buffer, host or device: its size and how that
/// scales, and the means to size it once and freeze it.
///
/// Containers list their buffers through [`crate::memory::Budgeted`]; the dynamic dispatch is
/// per buffer and per whole-buffer operation, never per element.
pub trait BudgetedBuffer {
    /// The buffer's name.
    fn name(&self) -> &'static str;
    /// How its length scales with the run.
    fn scaling(&self) -> Scaling;
    /// Size of one element in bytes.
    fn element_bytes(&self) -> usize;
    /// Number of elements.
    fn len(&self) -> usize;
    /// Whether the buffer holds no element.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Capacity in elements.
    fn capacity(&self) -> usize;
    /// Whether a reservation froze it.
    fn is_frozen(&self) -> bool;
    /// See [`Buffer::reserve_and_freeze`].
    fn reserve_and_freeze(&mut self, capacity: usize) -> Result<(), CapacityError>;
    /// See [`Buffer::unfreeze`].
    fn unfreeze(&mut self);
}

/// The type-erased whole-array operations a container applies to each of its host buffers.
///
/// Containers list their arrays once, as `&mut dyn AnyBuffer`, and route every length change
/// through the helpers in [`crate::columns`], which work on that list.
pub trait AnyBuffer: BudgetedBuffer {
    /// Fails if `len` would not fit.
    fn check_len(&self, len: usize) -> Result<(), CapacityError>;
    /// Sets the length, zero-filling new elements.
    fn resize_zeroed(&mut self, len: usize) -> Result<(), CapacityError>;
    /// Shortens to `len`.
    fn truncate(&mut self, len: usize);
    /// Removes element `i`, shifting the later ones down by one.
    fn remove(&mut self, i: usize);
    /// Removes element `i` by moving the last element into its place.
    fn swap_remove(&mut self, i: usize);
    /// Moves element `perm[i]` to position `i` for every `i`, using `visited` (one bit per element,
    /// all clear on entry and on exit) to follow the permutation's cycles in place.
    fn permute(&mut self, perm: &[usize], visited: &mut [u64]);
    /// The contents as bytes.
    fn bytes(&self) -> &[u8];
    /// The contents as writable bytes (where particles arrive from another rank).
    fn bytes_mut(&mut self) -> &mut [u8];
}

impl<T: Pod> BudgetedBuffer for Buffer<T> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn scaling(&self) -> Scaling {
        self.scaling
    }
    fn element_bytes(&self) -> usize {
        std::mem::size_of::<T>()
    }
    fn len(&self) -> usize {
        self.data.len()
    }
    fn capacity(&self) -> usize {
        self.data.capacity()
    }
    fn is_frozen(&self) -> bool {
        self.frozen
    }
    fn reserve_and_freeze(&mut self, capacity: usize) -> Result<(), CapacityError> {
        Buffer::reserve_and_freeze(self, capacity)
    }
    fn unfreeze(&mut self) {
        self.frozen = false;
    }
}

impl<T: Pod> AnyBuffer for Buffer<T> {
    fn check_len(&self, len: usize) -> Result<(), CapacityError> {
        Buffer::check_len(self, len)
    }
    fn resize_zeroed(&mut self, len: usize) -> Result<(), CapacityError> {
        self.resize(len, T::zeroed())
    }
    fn truncate(&mut self, len: usize) {
        self.data.truncate(len);
    }
    fn remove(&mut self, i: usize) {
        self.data.remove(i);
    }
    fn swap_remove(&mut self, i: usize) {
        let s = self.data.as_mut_slice();
        let last = s.len() - 1;
        s.swap(i, last);
        self.data.truncate(last);
    }
    fn permute(&mut self, perm: &[usize], visited: &mut [u64]) {
        permute_in_place(self.data.as_mut_slice(), perm, visited);
    }
    fn bytes(&self) -> &[u8] {
        self.as_bytes()
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        bytemuck::cast_slice_mut(self.data.as_mut_slice())
    }
}

/// `data[i] <- data[perm[i]]` for all `i`, following cycles so that no second array is needed.
///
/// `perm` must be a permutation of `0..data.len()` (checked by [`crate::columns::Permutation`]);
/// `visited` holds at least `data.len()` bits, all clear on entry, and is cleared again on exit.
fn permute_in_place<T: Copy>(data: &mut [T], perm: &[usize], visited: &mut [u64]) {
    debug_assert_eq!(data.len(), perm.len());
    let is_set = |v: &[u64], i: usize| v[i / 64] & (1u64 << (i % 64)) != 0;
    for start in 0..data.len() {
        if is_set(visited, start) || perm[start] == start {
            continue;
        }
        // Walk the cycle start -> perm[start] -> ..., pulling each element one step back.
        let first = data[start];
        let mut j = start;
        loop {
            visited[j / 64] |= 1u64 << (j % 64);
            let k = perm[j];
            if k == start {
                data[j] = first;
                break;
            }
            data[j] = data[k];
            j = k;
        }
    }
    visited.iter_mut().for_each(|w| *w = 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_is_cache_line_aligned_through_growth() {
        let mut b = Buffer::<f64>::new("x", Scaling::PerParticle(1));
        for n in [1usize, 3, 17, 1000, 4097] {
            b.resize(n, 1.0).unwrap();
            assert_eq!(b.as_slice().as_ptr() as usize % BUFFER_ALIGN, 0, "n = {n}");
        }
        let mut c = Buffer::<u8>::new("tag", Scaling::PerParticle(1));
        c.push(1).unwrap();
        assert_eq!(c.as_slice().as_ptr() as usize % BUFFER_ALIGN, 0);
    }

    #[test]
    fn frozen_buffer_refuses_growth_past_capacity_and_keeps_its_data() {
        let mut b = Buffer::<f32>::new("mass", Scaling::PerParticle(1));
        b.assign(&[1.0, 2.0, 3.0]).unwrap();
        b.reserve_and_freeze(5).unwrap();
        assert_eq!(b.capacity(), 5);
        let ptr = b.as_slice().as_ptr();
        b.resize(5, 9.0).unwrap();
        let err = b.push(4.0).unwrap_err();
        assert_eq!(err.requested, 6);
        assert_eq!(err.available, 5);
        assert_eq!(err.unit, CapacityUnit::Elements);
        assert!(err.to_string().contains("`mass`"), "{err}");
        assert_eq!(b.as_slice(), &[1.0, 2.0, 3.0, 9.0, 9.0]);
        // Shrinking and growing again within capacity never moves the allocation.
        b.truncate(1);
        b.resize(5, 0.0).unwrap();
        assert_eq!(b.as_slice().as_ptr(), ptr);
        b.unfreeze();
        b.push(4.0).unwrap();
        assert_eq!(b.len(), 6);
    }

    #[test]
    fn reservation_below_length_is_refused() {
        let mut b = Buffer::<u32>::new("idx", Scaling::PerSlot(1));
        b.resize(10, 0).unwrap();
        let err = b.reserve_and_freeze(4).unwrap_err();
        assert_eq!((err.requested, err.available), (10, 4));
        assert!(!b.is_frozen());
    }

    #[test]
    fn permute_in_place_follows_cycles() {
        let mut data: Vec<u32> = (0..10).map(|i| 100 + i).collect();
        let perm = [3usize, 0, 1, 2, 4, 9, 8, 7, 6, 5];
        let mut visited = vec![0u64; 1];
        permute_in_place(&mut data, &perm, &mut visited);
        let expected: Vec<u32> = perm.iter().map(|&p| 100 + p as u32).collect();
        assert_eq!(data, expected);
        assert_eq!(visited, vec![0]);
    }
}
