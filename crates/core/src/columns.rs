//! Length changes applied to every component array of a container at once.
//!
//! A container of component arrays (the particle state, the meshless cloud state, ...) lists its
//! arrays in one private helper and routes every length-changing operation through the functions
//! here. Each function checks every array before it changes any, so a [`CapacityError`] leaves
//! all arrays exactly as they were: the equal-length invariant cannot be broken halfway.

use crate::buffer::{AnyBuffer, CapacityError};
use crate::comm::{self, Comm};

/// Sets every array to `len` elements (new elements zeroed). All or nothing.
pub fn resize_all(arrays: &mut [&mut dyn AnyBuffer], len: usize) -> Result<(), CapacityError> {
    for a in arrays.iter() {
        a.check_len(len)?;
    }
    for a in arrays.iter_mut() {
        a.resize_zeroed(len)
            .expect("capacity was checked for every array before resizing");
    }
    Ok(())
}

/// Gives the particles whose ids are `ids` (just appended) consecutive fresh ids from
/// `*next_id`, and advances it: ids are never reused within a container.
pub fn assign_fresh_ids(ids: &mut [u64], next_id: &mut u64) {
    for id in ids.iter_mut() {
        *id = *next_id;
        *next_id += 1;
    }
}

/// Shortens every array to `len` elements.
pub fn truncate_all(arrays: &mut [&mut dyn AnyBuffer], len: usize) {
    for a in arrays.iter_mut() {
        a.truncate(len);
    }
}

/// Removes element `i` of every array, keeping the order of the others.
///
/// # Panics
/// If `i` is out of bounds.
pub fn remove_all(arrays: &mut [&mut dyn AnyBuffer], i: usize) {
    check_index(arrays, i);
    for a in arrays.iter_mut() {
        a.remove(i);
    }
}

/// Removes element `i` of every array by moving the last element into its place.
///
/// # Panics
/// If `i` is out of bounds.
pub fn swap_remove_all(arrays: &mut [&mut dyn AnyBuffer], i: usize) {
    check_index(arrays, i);
    for a in arrays.iter_mut() {
        a.swap_remove(i);
    }
}

/// Reorders every array by `perm`: element `perm[i]` moves to position `i`.
///
/// # Panics
/// If the permutation's length differs from the arrays'.
pub fn permute_all(arrays: &mut [&mut dyn AnyBuffer], perm: &Permutation) {
    let n = common_len(arrays);
    assert_eq!(
        perm.len(),
        n,
        "a permutation of {} elements applied to arrays of {} elements",
        perm.len(),
        n
    );
    // One bit per element marks the visited cycle members; the arrays are reordered in place.
    let mut visited = vec![0u64; n.div_ceil(64)];
    for a in arrays.iter_mut() {
        a.permute(perm.as_slice(), &mut visited);
    }
}

/// What [`migrate_all`] moved on this rank.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Migrated {
    /// Elements sent to other ranks.
    pub sent: usize,
    /// Elements received from other ranks.
    pub received: usize,
}

/// Moves every element whose `destinations` entry names another rank to that rank, with all its
/// arrays: the elements that stay come first (each leaver's place taken by the last staying
/// element, so a step that moves few costs little), then the arrivals in the order of their
/// sending ranks, each rank's in its order. Collective: every rank calls it.
///
/// The new lengths are checked against every rank's arrays before anything moves: if one rank
/// cannot hold its arrivals (a frozen reservation), every rank returns that rank's
/// [`CapacityError`] with its arrays untouched. Every rank must pass the same arrays, in the same
/// order, with the same element types.
///
/// # Panics
/// If `destinations` is not one rank per element.
pub fn migrate_all(
    comm: &dyn Comm,
    arrays: &mut [&mut dyn AnyBuffer],
    destinations: &[u32],
) -> Result<Migrated, CapacityError> {
    let (size, me) = (comm.size(), comm.rank());
    let n = common_len(arrays);
    assert_eq!(destinations.len(), n, "one destination per element");
    assert!(
        destinations.iter().all(|&d| (d as usize) < size),
        "a destination beyond the {size} ranks"
    );
    // The leaving elements grouped by destination, each group in index order.
    let mut leaving: Vec<Vec<usize>> = vec![Vec::new(); size];
    for (i, &d) in destinations.iter().enumerate() {
        if d as usize != me {
            leaving[d as usize].push(i);
        }
    }
    let sent: usize = leaving.iter().map(Vec::len).sum();
    let (recv, recv_elements) = transfer(comm, arrays, &leaving, sent, "migrating to")?;
    // The leavers' places filled from the end (few leave in a step: no pass over every
    // element); then room for the arrivals.
    let mut leavers: Vec<usize> = leaving.iter().flatten().copied().collect();
    leavers.sort_unstable();
    for &i in leavers.iter().rev() {
        for a in arrays.iter_mut() {
            a.swap_remove(i);
        }
    }
    let received = append_received(arrays, &recv, &recv_elements);
    Ok(Migrated { sent, received })
}

/// Copies elements to other ranks, with all their arrays: `groups[r]` lists (in the order they
/// travel) the elements rank `r` receives copies of; nothing leaves. The copies every rank
/// sent this one are appended to its arrays in the order of their sending ranks, each rank's in
/// its order. Returns how many arrived from each rank. Collective, with
/// [`migrate_all`]'s all-or-nothing capacity check agreed over the ranks.
///
/// # Panics
/// If `groups` is not one list per rank or names an element out of bounds.
pub fn copy_all(
    comm: &dyn Comm,
    arrays: &mut [&mut dyn AnyBuffer],
    groups: &[Vec<usize>],
) -> Result<Vec<usize>, CapacityError> {
    assert_eq!(groups.len(), comm.size(), "one group per rank");
    let n = common_len(arrays);
    assert!(
        groups.iter().flatten().all(|&i| i < n),
        "an element beyond the {n} elements"
    );
    let (recv, counts) = transfer(comm, arrays, groups, 0, "copied to")?;
    append_received(arrays, &recv, &counts);
    Ok(counts.iter().map(|&c| c as usize).collect())
}

/// The messages of [`migrate_all`] and [`copy_all`]: element counts first, so that every rank
/// can check its room (its length less `removed`, plus the arrivals) before anything moves,
/// then per destination array after array, each array's elements in `groups` order. Returns the
/// bytes received and the element count from each rank; `verb` says what the particles do in
/// the capacity error (`migrating to`).
fn transfer(
    comm: &dyn Comm,
    arrays: &[&mut dyn AnyBuffer],
    groups: &[Vec<usize>],
    removed: usize,
    verb: &str,
) -> Result<(Vec<u8>, Vec<u64>), CapacityError> {
    let (size, me) = (comm.size(), comm.rank());
    let n = common_len(arrays);
    let record: usize = arrays.iter().map(|a| a.element_bytes()).sum();
    let send_elements: Vec<u64> = groups.iter().map(|l| l.len() as u64).collect();
    let mut recv_elements = vec![0u64; size];
    comm.all_to_all_bytes(
        bytemuck::cast_slice(&send_elements),
        &vec![8; size],
        bytemuck::cast_slice_mut(&mut recv_elements),
        &vec![8; size],
    );
    let sent: usize = send_elements.iter().sum::<u64>() as usize;
    let received: usize = recv_elements.iter().sum::<u64>() as usize;
    let new_len = n - removed + received;
    let room = arrays.iter().try_for_each(|a| a.check_len(new_len));
    // The lowest rank without room, agreed (1 + rank in a max of complements).
    let failing = match room {
        Err(_) => u64::MAX - me as u64,
        Ok(()) => 0,
    };
    let worst = comm::max_of(comm, failing);
    if worst != 0 {
        // Every rank reports the lowest failing rank's error (its sizes, summed from it alone).
        let rank = (u64::MAX - worst) as usize;
        let mut sizes = match &room {
            Err(e) if rank == me => [e.requested, e.available],
            _ => [0, 0],
        };
        comm.sum_u64(&mut sizes);
        return Err(match room {
            Err(e) if rank == me => e,
            _ => CapacityError {
                what: format!("the particles {verb} rank {rank} of {size}"),
                requested: sizes[0],
                available: sizes[1],
                unit: crate::buffer::CapacityUnit::Elements,
            },
        });
    }
    let mut send = Vec::with_capacity(sent * record);
    for group in groups {
        for a in arrays.iter() {
            let (e, bytes) = (a.element_bytes(), a.bytes());
            for &i in group {
                send.extend_from_slice(&bytes[i * e..(i + 1) * e]);
            }
        }
    }
    let send_counts: Vec<usize> = groups.iter().map(|l| l.len() * record).collect();
    let recv_counts: Vec<usize> = recv_elements.iter().map(|&c| c as usize * record).collect();
    let mut recv = vec![0u8; received * record];
    comm.all_to_all_bytes(&send, &send_counts, &mut recv, &recv_counts);
    Ok((recv, recv_elements))
}

/// Appends [`transfer`]'s arrivals (`counts` elements from each rank, array after array) to
/// `arrays`, whose room was checked on every rank. Returns the elements appended.
fn append_received(arrays: &mut [&mut dyn AnyBuffer], recv: &[u8], counts: &[u64]) -> usize {
    let old = common_len(arrays);
    let received = counts.iter().sum::<u64>() as usize;
    resize_all(arrays, old + received).expect("room was checked on every rank");
    let (mut at, mut from) = (old, 0usize);
    for &count in counts {
        let count = count as usize;
        for a in arrays.iter_mut() {
            let e = a.element_bytes();
            let len = count * e;
            a.bytes_mut()[at * e..at * e + len].copy_from_slice(&recv[from..from + len]);
            from += len;
        }
        at += count;
    }
    received
}

fn common_len(arrays: &[&mut dyn AnyBuffer]) -> usize {
    let n = arrays.first().map_or(0, |a| a.len());
    debug_assert!(arrays.iter().all(|a| a.len() == n), "unequal lengths");
    n
}

fn check_index(arrays: &[&mut dyn AnyBuffer], i: usize) {
    let n = common_len(arrays);
    assert!(i < n, "index {i} out of bounds for {n} particles");
}

/// A validated permutation of `0..n`: `perm[i]` is the old index of the element that ends up at
/// position `i` (a gather order, as produced by sorting indices by a key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Permutation(Vec<usize>);

/// The error of building a [`Permutation`] from indices that are not one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PermutationError {
    /// An index is not below the length.
    #[error("index {index} at position {position} is out of range for a permutation of {len}")]
    OutOfRange {
        /// Where the index stands.
        position: usize,
        /// The index.
        index: usize,
        /// The permutation's length.
        len: usize,
    },
    /// An index appears twice.
    #[error("index {index} appears twice (again at position {position})")]
    Repeated {
        /// Where it appears the second time.
        position: usize,
        /// The index.
        index: usize,
    },
}

impl Permutation {
    /// Checks that `indices` holds every number of `0..indices.len()` exactly once.
    pub fn new(indices: Vec<usize>) -> Result<Self, PermutationError> {
        let len = indices.len();
        let mut seen = vec![false; len];
        for (position, &index) in indices.iter().enumerate() {
            if index >= len {
                return Err(PermutationError::OutOfRange {
                    position,
                    index,
                    len,
                });
            }
            if std::mem::replace(&mut seen[index], true) {
                return Err(PermutationError::Repeated { position, index });
            }
        }
        Ok(Self(indices))
    }

    /// The identity of length `n`.
    pub fn identity(n: usize) -> Self {
        Self((0..n).collect())
    }

    /// The order that sorts `keys` ascending; ties keep their original order, so the result is
    /// deterministic.
    pub fn sorting_by_key<K: Ord>(keys: &[K]) -> Self {
        let mut idx: Vec<usize> = (0..keys.len()).collect();
        idx.sort_by(|&a, &b| keys[a].cmp(&keys[b]));
        Self(idx)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it permutes nothing.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The gather indices.
    pub fn as_slice(&self) -> &[usize] {
        &self.0
    }

    /// The inverse permutation: position of each old index.
    pub fn inverse(&self) -> Self {
        let mut inv = vec![0; self.0.len()];
        for (i, &p) in self.0.iter().enumerate() {
            inv[p] = i;
        }
        Self(inv)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::{Buffer, Scaling};

    fn pair() -> (Buffer<f64>, Buffer<u8>) {
        let mut a = Buffer::new("a", Scaling::PerParticle(1));
        let mut b = Buffer::new("b", Scaling::PerParticle(1));
        a.assign(&[0.0, 1.0, 2.0, 3.0]).unwrap();
        b.assign(&[10, 11, 12, 13]).unwrap();
        (a, b)
    }

    #[test]
    fn failed_resize_changes_no_array() {
        let (mut a, mut b) = pair();
        b.reserve_and_freeze(5).unwrap();
        // `a` could grow, `b` cannot: neither may change.
        let err = resize_all(&mut [&mut a, &mut b], 6).unwrap_err();
        assert!(err.what.contains("`b`"));
        assert_eq!(a.len(), 4);
        assert_eq!(b.len(), 4);
        resize_all(&mut [&mut a, &mut b], 5).unwrap();
        assert_eq!((a.as_slice()[4], b.as_slice()[4]), (0.0, 0));
    }

    #[test]
    fn removals_move_arrays_together() {
        let (mut a, mut b) = pair();
        remove_all(&mut [&mut a, &mut b], 1);
        assert_eq!(a.as_slice(), &[0.0, 2.0, 3.0]);
        assert_eq!(b.as_slice(), &[10, 12, 13]);
        swap_remove_all(&mut [&mut a, &mut b], 0);
        assert_eq!(a.as_slice(), &[3.0, 2.0]);
        assert_eq!(b.as_slice(), &[13, 12]);
    }

    #[test]
    fn permutation_validation() {
        assert!(Permutation::new(vec![2, 0, 1]).is_ok());
        assert_eq!(
            Permutation::new(vec![0, 3, 1]),
            Err(PermutationError::OutOfRange {
                position: 1,
                index: 3,
                len: 3
            })
        );
        assert_eq!(
            Permutation::new(vec![0, 1, 1]),
            Err(PermutationError::Repeated {
                position: 2,
                index: 1
            })
        );
        let p = Permutation::sorting_by_key(&[5, 1, 5, 0]);
        assert_eq!(p.as_slice(), &[3, 1, 0, 2]);
        assert_eq!(p.inverse().as_slice(), &[2, 1, 3, 0]);
    }

    #[test]
    fn copies_arrive_after_the_holders_elements_in_rank_order() {
        let ranks = crate::comm::thread_ranks(3);
        let got = crate::comm::on_thread_ranks(&ranks, |c| {
            let r = c.rank();
            let (mut a, mut b) = pair();
            for x in a.as_mut_slice() {
                *x += 100.0 * r as f64;
            }
            // Rank r sends its elements r.. to each other rank, in descending order.
            let groups: Vec<Vec<usize>> = (0..3)
                .map(|q| {
                    if q == r {
                        vec![]
                    } else {
                        (r..4).rev().collect()
                    }
                })
                .collect();
            let counts = copy_all(c.as_ref(), &mut [&mut a, &mut b], &groups).unwrap();
            (counts, a.as_slice().to_vec(), b.as_slice().to_vec())
        });
        let (counts, a, b) = &got[1];
        assert_eq!(counts, &[4, 0, 2]);
        assert_eq!(
            a,
            &[100.0, 101.0, 102.0, 103.0, 3.0, 2.0, 1.0, 0.0, 203.0, 202.0]
        );
        assert_eq!(b, &[10, 11, 12, 13, 13, 12, 11, 10, 13, 12]);
    }

    #[test]
    fn permute_all_then_inverse_restores() {
        let (mut a, mut b) = pair();
        let p = Permutation::new(vec![2, 3, 1, 0]).unwrap();
        permute_all(&mut [&mut a, &mut b], &p);
        assert_eq!(a.as_slice(), &[2.0, 3.0, 1.0, 0.0]);
        assert_eq!(b.as_slice(), &[12, 13, 11, 10]);
        permute_all(&mut [&mut a, &mut b], &p.inverse());
        assert_eq!(a.as_slice(), &[0.0, 1.0, 2.0, 3.0]);
        assert_eq!(b.as_slice(), &[10, 11, 12, 13]);
    }
}
