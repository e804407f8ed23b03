//! The neighbour search: a cell list built as a counting sort, and neighbour lists in two slot
//! layouts.
//!
//! 1. Every particle's bin (cells of edge >= the radius over the particles' bounding box, or the
//!    periodic box) is computed; counts per bin, an exclusive prefix sum to segment starts, and a
//!    scatter in index order fill the bins, each segment ascending by particle index (on a GPU,
//!    where the scatter uses atomics, each segment is sorted afterwards to the same order).
//! 2. A counting pass walks the bins around each particle (each distinct bin once, in a fixed
//!    order; periodic axes wrap) and counts the particles within the radius, itself excluded,
//!    by minimum-image distance. A prefix sum of the counts gives the slot ranges, with the total
//!    and the maximum.
//! 3. A filling pass walks the same bins in the same order and writes the indices.
//!
//! Nothing depends on thread count or timing: the lists are identical in every run, on every
//! backend, in either layout. The relation is symmetric (j is i's neighbour exactly when i is
//! j's), which the pull-form passes rely on.
//!
//! Layouts: [`RowMajor`] keeps a particle's slots contiguous (CPU caches); [`SlotMajor`] keeps
//! slot `k` of all particles contiguous, every particle padded to the maximum count (GPU
//! coalescing). Kernels iterate [`SlotLayout::slots`], which serves both.

use mote_core::{
    Budgeted, BudgetedBuffer, Buffer, CapacityError, CpuBackend, Real, Rows, Scaling, SlotWriter,
    SplitOutputs, StridedRows,
};

use crate::cloud::Cloud;
use crate::domain::Domain;
use crate::error::CloudError;
use crate::halo::Halo;

/// The per-slot positions of one particle's neighbours: `start, start + stride, ...`, `len`
/// of them. Index every per-slot array (neighbour index, weight, ...) with these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slots {
    start: usize,
    stride: usize,
    len: usize,
}

impl Iterator for Slots {
    type Item = usize;
    #[inline]
    fn next(&mut self) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let s = self.start;
        self.start += self.stride;
        self.len -= 1;
        Some(s)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.len, Some(self.len))
    }
}

impl ExactSizeIterator for Slots {}

impl Slots {
    /// Takes the next `max` slots at most (fewer at the end): their first slot, the stride
    /// between them and how many there are. Batched passes compute a batch's slots from these
    /// instead of stepping the iterator once per slot.
    #[inline(always)]
    pub fn take_batch(&mut self, max: usize) -> (usize, usize, usize) {
        let count = self.len.min(max);
        let start = self.start;
        self.start += count * self.stride;
        self.len -= count;
        (start, self.stride, count)
    }

    /// One past the largest slot still to come (the start when none is left): kernels check
    /// it once against their per-slot arrays instead of checking every slot.
    #[inline]
    pub fn end(&self) -> usize {
        if self.len == 0 {
            self.start
        } else {
            self.start + (self.len - 1) * self.stride + 1
        }
    }
}

/// A slot layout: where particle `i`'s neighbour slots are.
pub trait SlotLayout: Budgeted + Send + Sync + Sized {
    /// `row` or `slot`.
    const NAME: &'static str;
    /// Whether each particle's slots are consecutive (stride 1): batched passes then load
    /// per-slot arrays as contiguous vectors instead of gathering them.
    const CONTIGUOUS: bool;
    /// An empty list.
    fn empty() -> Self;
    /// The slots of particle `i`.
    fn slots(&self, i: usize) -> Slots;
    /// The neighbour index stored in each slot (32-bit).
    fn indices(&self) -> &[u32];
    /// Number of neighbours of each particle.
    fn counts(&self) -> &[u32];

    /// Each particle's first slot when rows are contiguous (row-major), else `None`.
    fn starts(&self) -> Option<&[usize]>;
    /// Length of every per-slot array in this layout (the total neighbour count row-major,
    /// particles x maximum count slot-major).
    fn slot_count(&self) -> usize {
        self.indices().len()
    }
    /// The per-slot writer over `data` (of [`SlotLayout::slot_count`] elements) for a pass
    /// that writes each particle's slots.
    type Writer<'a, T: Send + 'a>: SlotWriter<T>
    where
        Self: 'a;
    /// See [`SlotLayout::Writer`].
    fn writer<'a, T: Send + 'a>(&'a self, data: &'a mut [T]) -> Self::Writer<'a, T>;
    /// Builds the layout from the per-particle counts, writing each particle's neighbours with
    /// `fill(i, &mut write)`, where `write(k, j)` stores neighbour `k` of `i`.
    fn build<F>(
        &mut self,
        counts: &[u32],
        max: usize,
        backend: CpuBackend,
        fill: F,
    ) -> Result<(), CapacityError>
    where
        F: Fn(usize, &mut dyn FnMut(usize, u32)) + Sync;
}

/// Row-major slots: particle `i`'s neighbours are contiguous, from `starts[i]`.
#[derive(Clone, Debug)]
pub struct RowMajor {
    starts: Buffer<usize>,
    counts: Buffer<u32>,
    indices: Buffer<u32>,
}

/// Slot-major slots: slot `k` of particle `i` is at `k * n + i`; every particle has `max` slots,
/// of which the first `counts[i]` are used (the rest hold `i` itself, safe to read).
#[derive(Clone, Debug)]
pub struct SlotMajor {
    counts: Buffer<u32>,
    indices: Buffer<u32>,
    max: usize,
}

impl Budgeted for RowMajor {
    fn buffers(&self) -> Vec<&dyn BudgetedBuffer> {
        vec![&self.starts, &self.counts, &self.indices]
    }
    fn buffers_mut(&mut self) -> Vec<&mut dyn BudgetedBuffer> {
        vec![&mut self.starts, &mut self.counts, &mut self.indices]
    }
}

impl Budgeted for SlotMajor {
    fn buffers(&self) -> Vec<&dyn BudgetedBuffer> {
        vec![&self.counts, &self.indices]
    }
    fn buffers_mut(&mut self) -> Vec<&mut dyn BudgetedBuffer> {
        vec![&mut self.counts, &mut self.indices]
    }
}

impl SlotLayout for RowMajor {
    const NAME: &'static str = "row";
    const CONTIGUOUS: bool = true;
    type Writer<'a, T: Send + 'a> = Rows<'a, T>;

    fn writer<'a, T: Send + 'a>(&'a self, data: &'a mut [T]) -> Rows<'a, T> {
        Rows::new(data, self.starts.as_slice())
    }

    fn empty() -> Self {
        Self {
            starts: Buffer::new("neighbour_start", Scaling::PerParticle(1)),
            counts: Buffer::new("neighbour_count", Scaling::PerParticle(1)),
            indices: Buffer::new("neighbour_index", Scaling::PerSlot(1)),
        }
    }

    #[inline]
    fn slots(&self, i: usize) -> Slots {
        Slots {
            start: self.starts.as_slice()[i],
            stride: 1,
            len: self.counts.as_slice()[i] as usize,
        }
    }

    fn indices(&self) -> &[u32] {
        self.indices.as_slice()
    }

    fn counts(&self) -> &[u32] {
        self.counts.as_slice()
    }

    fn starts(&self) -> Option<&[usize]> {
        Some(self.starts.as_slice())
    }

    fn build<F>(
        &mut self,
        counts: &[u32],
        _max: usize,
        backend: CpuBackend,
        fill: F,
    ) -> Result<(), CapacityError>
    where
        F: Fn(usize, &mut dyn FnMut(usize, u32)) + Sync,
    {
        let n = counts.len();
        let total: usize = counts.iter().map(|&c| c as usize).sum();
        // Check every buffer before changing any: a failed build leaves the lists as they were.
        self.indices.check_len(total)?;
        self.starts.check_len(n)?;
        self.counts.check_len(n)?;
        self.starts.resize(n, 0)?;
        self.counts.assign(counts)?;
        let mut acc = 0usize;
        for (s, &c) in self.starts.as_mut_slice().iter_mut().zip(counts) {
            *s = acc;
            acc += c as usize;
        }
        self.indices.resize(total, 0)?;
        let starts = self.starts.as_slice();
        backend.for_each_block(
            Rows::new(self.indices.as_mut_slice(), starts),
            256,
            |first, mut rows| {
                for k in 0..rows.len() {
                    let row = rows.row_mut(k);
                    fill(first + k, &mut |slot, j| row[slot] = j);
                }
            },
        );
        Ok(())
    }
}

impl SlotLayout for SlotMajor {
    const NAME: &'static str = "slot";
    const CONTIGUOUS: bool = false;
    type Writer<'a, T: Send + 'a> = StridedRows<'a, T>;

    fn writer<'a, T: Send + 'a>(&'a self, data: &'a mut [T]) -> StridedRows<'a, T> {
        StridedRows::new(data, self.counts.len(), self.max)
    }

    fn empty() -> Self {
        Self {
            counts: Buffer::new("neighbour_count", Scaling::PerParticle(1)),
            indices: Buffer::new("neighbour_index", Scaling::PerSlot(1)),
            max: 0,
        }
    }

    #[inline]
    fn slots(&self, i: usize) -> Slots {
        Slots {
            start: i,
            stride: self.counts.len(),
            len: self.counts.as_slice()[i] as usize,
        }
    }

    fn indices(&self) -> &[u32] {
        self.indices.as_slice()
    }

    fn counts(&self) -> &[u32] {
        self.counts.as_slice()
    }

    fn starts(&self) -> Option<&[usize]> {
        None
    }

    fn build<F>(
        &mut self,
        counts: &[u32],
        max: usize,
        backend: CpuBackend,
        fill: F,
    ) -> Result<(), CapacityError>
    where
        F: Fn(usize, &mut dyn FnMut(usize, u32)) + Sync,
    {
        let n = counts.len();
        self.indices.check_len(n * max)?;
        self.counts.check_len(n)?;
        self.counts.assign(counts)?;
        self.indices.resize(n * max, 0)?;
        self.max = max;
        backend.for_each_block(
            StridedRows::new(self.indices.as_mut_slice(), n, max),
            256,
            |first, mut rows| {
                for k in 0..rows.len() {
                    let i = first + k;
                    // Padding: the particle itself, a valid index that kernels never visit.
                    for slot in counts[i] as usize..max {
                        rows.set(k, slot, i as u32);
                    }
                    fill(i, &mut |slot, j| rows.set(k, slot, j));
                }
            },
        );
        Ok(())
    }
}

/// Neighbour lists in layout `L`, with the radius they were built for.
#[derive(Clone, Debug)]
pub struct NeighbourList<L: SlotLayout> {
    layout: L,
    radius: f64,
    total: usize,
    max: usize,
    /// The split between ranks the lists belong to ([`crate::halo`]); `None` on one process
    /// and for replicated clouds.
    halo: Option<std::sync::Arc<Halo>>,
}

impl<L: SlotLayout> Default for NeighbourList<L> {
    fn default() -> Self {
        Self {
            layout: L::empty(),
            radius: 0.0,
            total: 0,
            max: 0,
            halo: None,
        }
    }
}

impl<L: SlotLayout> NeighbourList<L> {
    /// The slots of particle `i`.
    #[inline]
    pub fn slots(&self, i: usize) -> Slots {
        self.layout.slots(i)
    }

    /// The neighbour index of each slot.
    #[inline]
    pub fn indices(&self) -> &[u32] {
        self.layout.indices()
    }

    /// The layout itself (per-slot writers, slot counts).
    pub fn layout(&self) -> &L {
        &self.layout
    }

    /// Particle `i`'s neighbours, in list order (tests and diagnostics; kernels use
    /// [`NeighbourList::slots`] and index per-slot arrays with them).
    pub fn neighbours(&self, i: usize) -> impl Iterator<Item = u32> + '_ {
        self.slots(i).map(|s| self.layout.indices()[s])
    }

    /// Number of neighbours of each particle.
    pub fn counts(&self) -> &[u32] {
        self.layout.counts()
    }

    /// Number of particles.
    pub fn len(&self) -> usize {
        self.layout.counts().len()
    }

    /// Whether the list covers no particle.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Total neighbour count (row-major slots).
    pub fn total(&self) -> usize {
        self.total
    }

    /// The largest neighbour count.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Mean neighbours per particle.
    pub fn mean(&self) -> f64 {
        if self.is_empty() {
            0.0
        } else {
            self.total as f64 / self.len() as f64
        }
    }

    /// The search radius.
    pub fn radius(&self) -> f64 {
        self.radius
    }

    /// The split between ranks these lists' cloud belongs to, if it is one rank's part of a
    /// split cloud: the passes then compute the own particles and refresh the halo.
    pub fn halo(&self) -> Option<&Halo> {
        self.halo.as_deref()
    }

    /// Marks the lists as those of one rank's part of a split cloud (see [`crate::halo`]).
    pub fn set_halo(&mut self, halo: std::sync::Arc<Halo>) {
        self.halo = Some(halo);
    }

    /// The same lists in another layout.
    pub fn to_layout<M: SlotLayout>(
        &self,
        backend: CpuBackend,
    ) -> Result<NeighbourList<M>, CapacityError> {
        let mut out = NeighbourList::<M>::default();
        out.layout
            .build(self.counts(), self.max, backend, |i, write| {
                for (k, j) in self.neighbours(i).enumerate() {
                    write(k, j);
                }
            })?;
        out.radius = self.radius;
        out.total = self.total;
        out.max = self.max;
        out.halo = self.halo.clone();
        Ok(out)
    }
}

impl<L: SlotLayout> Budgeted for NeighbourList<L> {
    fn buffers(&self) -> Vec<&dyn BudgetedBuffer> {
        self.layout.buffers()
    }
    fn buffers_mut(&mut self) -> Vec<&mut dyn BudgetedBuffer> {
        self.layout.buffers_mut()
    }
}

/// The cell list of a search, reused between searches. Its buffers are budgeted: the bin of
/// every particle and the particles sorted by bin (per particle), and the bin starts (fixed).
#[derive(Clone, Debug)]
pub struct NeighbourSearch {
    radius: f64,
    /// Fixed extremes of the particles on each axis (the bins of another cloud's search),
    /// instead of this cloud's bounding box.
    bounds: Option<(Vec<f64>, Vec<f64>)>,
    bin_of: Buffer<u32>,
    sorted: Buffer<u32>,
    bin_start: Buffer<u32>,
    counts: Buffer<u32>,
}

/// The bins of a search: cells of edge at least the radius over the particles' bounding box
/// (non-periodic axes) or the periodic box. Public so that the device search builds exactly the
/// same bins: a particle's bin is `floor((x - lo) * inv_cell)`, clamped to the grid, evaluated in
/// the cloud's precision (a subtraction, a multiplication and a floor: correctly rounded on every
/// device, so the CPU and the GPU agree on every particle's bin).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SearchGrid<const D: usize> {
    /// Lower corner of the bins.
    pub lo: [f64; D],
    /// Reciprocal cell edge per axis.
    pub inv_cell: [f64; D],
    /// Number of cells per axis.
    pub cells: [usize; D],
    /// Periodic axes.
    pub periodic: [bool; D],
    /// Extent per axis (the period on periodic axes).
    pub length: [f64; D],
}

impl<const D: usize> SearchGrid<D> {
    /// The bins for a search of `radius` in `domain`, whose particles span `min..=max` on each
    /// axis (used on the non-periodic axes). Fails when the radius exceeds half a periodic length
    /// or the bins would not be countable in 32 bits.
    pub fn new(
        radius: f64,
        domain: &Domain<D>,
        min: [f64; D],
        max: [f64; D],
    ) -> Result<Self, CloudError> {
        let grid = Self::covering(radius, domain, min, max);
        for a in 0..D {
            if grid.periodic[a] && radius > 0.5 * grid.length[a] {
                return Err(CloudError::invalid(
                    "search radius",
                    radius,
                    format!(
                        "at most half the periodic length {} on axis {a}",
                        grid.length[a]
                    ),
                ));
            }
        }
        if grid.bins() >= u32::MAX as usize {
            return Err(CloudError::invalid(
                "search radius",
                radius,
                "large enough for fewer than 2^32 bins",
            ));
        }
        Ok(grid)
    }

    /// Cells of edge at least `edge` (a little more, see below) over `domain` on periodic axes
    /// and `min..=max` on the others, unchecked: the search's bins ([`new`](Self::new) checks
    /// them) and a split cloud's coarse cells (`crate::halo::around`).
    pub fn covering(edge: f64, domain: &Domain<D>, min: [f64; D], max: [f64; D]) -> Self {
        let periodic = domain.periodic();
        let (dlo, dhi) = domain.bounds();
        let lo: [f64; D] = std::array::from_fn(|a| if periodic[a] { dlo[a] } else { min[a] });
        let length: [f64; D] = std::array::from_fn(|a| {
            if periodic[a] {
                dhi[a] - dlo[a]
            } else {
                (max[a] - min[a]).max(0.0)
            }
        });
        // Cells a little wider than the radius: a bin computed in f32 may be off by one ulp of
        // the position, which must not move a neighbour at distance `radius` two cells away.
        let cells: [usize; D] =
            std::array::from_fn(|a| ((length[a] / (edge * (1.0 + 1e-6))).floor() as usize).max(1));
        let inv_cell: [f64; D] = std::array::from_fn(|a| {
            if length[a] > 0.0 {
                cells[a] as f64 / length[a]
            } else {
                1.0
            }
        });
        Self {
            lo,
            inv_cell,
            cells,
            periodic,
            length,
        }
    }

    /// The bin coordinates of linear bin `c` (inverse of [`linear`](Self::linear)).
    pub fn unlinear(&self, mut c: usize) -> [usize; D] {
        std::array::from_fn(|a| {
            let b = c % self.cells[a];
            c /= self.cells[a];
            b
        })
    }

    /// Calls `f` with the linear index of every distinct bin in the neighbourhood of bin `b`
    /// (up to 3 per axis, [`axis_bins`](Self::axis_bins)), first axis fastest: the order the
    /// search visits them in.
    #[inline]
    pub fn adjacent(&self, b: [usize; D], mut f: impl FnMut(usize)) {
        let axes: [([usize; 3], usize); D] = std::array::from_fn(|a| self.axis_bins(a, b[a]));
        let mut idx = [0usize; D];
        loop {
            f(self.linear(std::array::from_fn(|a| axes[a].0[idx[a]])));
            // Next bin combination, first axis fastest.
            let mut a = 0;
            loop {
                if a == D {
                    return;
                }
                idx[a] += 1;
                if idx[a] < axes[a].1 {
                    break;
                }
                idx[a] = 0;
                a += 1;
            }
        }
    }

    /// Number of bins.
    pub fn bins(&self) -> usize {
        self.cells.iter().product()
    }

    /// The bin coordinates of a position, in the cloud's precision `R`.
    #[inline]
    pub fn bin_coord<R: Real>(&self, x: [R; D]) -> [usize; D] {
        std::array::from_fn(|a| {
            let b = ((x[a] - R::cast(self.lo[a])) * R::cast(self.inv_cell[a]))
                .floor()
                .as_f64();
            (b.max(0.0) as usize).min(self.cells[a] - 1)
        })
    }

    /// The linear bin index of bin coordinates (first axis fastest).
    #[inline]
    pub fn linear(&self, b: [usize; D]) -> usize {
        let mut idx = 0;
        for a in (0..D).rev() {
            idx = idx * self.cells[a] + b[a];
        }
        idx
    }

    /// The distinct bins along axis `a` around bin `b`, in a fixed order, up to 3: on periodic
    /// axes `(b - 1 + k) mod cells` for `k < min(cells, 3)`, otherwise the existing ones of
    /// `b - 1, b, b + 1` in ascending order.
    #[inline]
    pub fn axis_bins(&self, a: usize, b: usize) -> ([usize; 3], usize) {
        let n = self.cells[a];
        let mut out = [0; 3];
        if self.periodic[a] {
            let len = n.min(3);
            for (k, o) in out.iter_mut().enumerate().take(len) {
                *o = (b + n - 1 + k) % n;
            }
            (out, len)
        } else {
            let start = b.saturating_sub(1);
            let len = (b + 1).min(n - 1) - start + 1;
            for (k, o) in out.iter_mut().enumerate().take(len) {
                *o = start + k;
            }
            (out, len)
        }
    }
}

impl NeighbourSearch {
    /// A search for neighbours within `radius`.
    pub fn new(radius: f64) -> Result<Self, CloudError> {
        if !(radius.is_finite() && radius > 0.0) {
            return Err(CloudError::invalid(
                "search radius",
                radius,
                "finite and > 0",
            ));
        }
        Ok(Self {
            radius,
            bounds: None,
            bin_of: Buffer::new("bin_of", Scaling::PerParticle(1)),
            sorted: Buffer::new("bin_sorted", Scaling::PerParticle(1)),
            bin_start: Buffer::new("bin_start", Scaling::Fixed),
            counts: Buffer::new("neighbour_count_scratch", Scaling::PerParticle(1)),
        })
    }

    /// The radius.
    pub fn radius(&self) -> f64 {
        self.radius
    }

    /// The same search on the bins of a cloud whose particles span `min..=max` on each axis
    /// (used on the non-periodic axes): a rank's part of a split cloud searched on the whole
    /// cloud's bins, so that its lists are the whole cloud's ([`crate::halo`]).
    pub fn with_bounds(mut self, min: &[f64], max: &[f64]) -> Self {
        self.set_bounds(min, max);
        self
    }

    /// Replaces the bounds of [`with_bounds`](Self::with_bounds) (a moving split cloud's whole
    /// extent changes at every stage).
    pub fn set_bounds(&mut self, min: &[f64], max: &[f64]) {
        self.bounds = Some((min.to_vec(), max.to_vec()));
    }

    /// The bounds of [`with_bounds`](Self::with_bounds), if set: `(min, max)` per axis.
    pub fn bounds(&self) -> Option<(&[f64], &[f64])> {
        self.bounds
            .as_ref()
            .map(|(lo, hi)| (lo.as_slice(), hi.as_slice()))
    }

    /// The extremes of `cloud`'s particles on each axis.
    pub fn extent<R: Real, const D: usize>(cloud: &Cloud<R, D>) -> ([f64; D], [f64; D]) {
        let pos = cloud.positions();
        let mut min = [0.0; D];
        let mut max = [0.0; D];
        for a in 0..D {
            (min[a], max[a]) = pos[a]
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(mn, mx), &x| {
                    (mn.min(x.as_f64()), mx.max(x.as_f64()))
                });
        }
        (min, max)
    }

    /// The bins of a search of `cloud` (the bounding box of its particles on non-periodic
    /// axes, or the bounds given by [`with_bounds`](Self::with_bounds)).
    pub fn grid<R: Real, const D: usize>(
        &self,
        cloud: &Cloud<R, D>,
    ) -> Result<SearchGrid<D>, CloudError> {
        if let Some((lo, hi)) = &self.bounds {
            let min: [f64; D] = std::array::from_fn(|a| lo[a]);
            let max: [f64; D] = std::array::from_fn(|a| hi[a]);
            return SearchGrid::new(self.radius, cloud.domain(), min, max);
        }
        let (min, max) = Self::extent(cloud);
        SearchGrid::new(self.radius, cloud.domain(), min, max)
    }

    /// Builds `list` for `cloud` (reusing its buffers; a reserved list that cannot hold the new
    /// neighbours fails with a `CapacityError` and is left unchanged).
    pub fn build<R: Real, const D: usize, L: SlotLayout>(
        &mut self,
        cloud: &Cloud<R, D>,
        backend: CpuBackend,
        list: &mut NeighbourList<L>,
    ) -> Result<(), CloudError> {
        let n = cloud.len();
        if n > u32::MAX as usize {
            return Err(CloudError::invalid(
                "particle count",
                n,
                "at most 2^32 - 1 (32-bit neighbour indices)",
            ));
        }
        let grid = self.grid(cloud)?;
        let nbins = grid.bins();
        let pos = cloud.positions();
        let point = |i: usize| -> [R; D] { std::array::from_fn(|a| pos[a][i]) };

        // 1. Bins by counting sort: stable, so every segment is ascending in particle index.
        self.bin_of.resize(n, 0)?;
        backend.for_each_particle(self.bin_of.as_mut_slice(), |i| {
            grid.linear(grid.bin_coord(point(i))) as u32
        });
        self.bin_start.resize(nbins + 1, 0)?;
        let starts = self.bin_start.as_mut_slice();
        starts.fill(0);
        for &b in self.bin_of.as_slice() {
            starts[b as usize + 1] += 1;
        }
        for b in 0..nbins {
            starts[b + 1] += starts[b];
        }
        self.sorted.resize(n, 0)?;
        {
            let mut cursor: Vec<u32> = starts[..nbins].to_vec();
            let sorted = self.sorted.as_mut_slice();
            for (i, &b) in self.bin_of.as_slice().iter().enumerate() {
                sorted[cursor[b as usize] as usize] = i as u32;
                cursor[b as usize] += 1;
            }
        }

        // 2-3. Count, then fill, walking the same bins in the same order.
        let r2 = R::cast(self.radius * self.radius);
        let length: [R; D] = grid.length.map(R::cast);
        let half: [R; D] = grid.length.map(|l| R::cast(0.5 * l));
        let bins = self.bin_start.as_slice();
        let sorted = self.sorted.as_slice();
        let bin_of = self.bin_of.as_slice();
        let visit = |i: usize, f: &mut dyn FnMut(u32)| {
            let xi: [R; D] = std::array::from_fn(|a| pos[a][i]);
            grid.adjacent(grid.unlinear(bin_of[i] as usize), |c| {
                for &j in &sorted[bins[c] as usize..bins[c + 1] as usize] {
                    if j as usize == i {
                        continue;
                    }
                    let mut d2 = R::zero();
                    for a in 0..D {
                        let mut d = pos[a][j as usize] - xi[a];
                        if grid.periodic[a] {
                            if d > half[a] {
                                d -= length[a];
                            } else if d < -half[a] {
                                d += length[a];
                            }
                        }
                        d2 += d * d;
                    }
                    if d2 <= r2 {
                        f(j);
                    }
                }
            });
        };
        self.counts.resize(n, 0)?;
        backend.for_each_particle(self.counts.as_mut_slice(), |i| {
            let mut c = 0u32;
            visit(i, &mut |_| c += 1);
            c
        });
        let counts = self.counts.as_slice();
        let total: usize = counts.iter().map(|&c| c as usize).sum();
        let max = counts.iter().copied().max().unwrap_or(0) as usize;
        list.layout.build(counts, max, backend, |i, write| {
            let mut k = 0;
            visit(i, &mut |j| {
                write(k, j);
                k += 1;
            });
        })?;
        list.radius = self.radius;
        list.total = total;
        list.max = max;
        Ok(())
    }
}

impl Budgeted for NeighbourSearch {
    fn buffers(&self) -> Vec<&dyn BudgetedBuffer> {
        vec![&self.bin_of, &self.sorted, &self.bin_start, &self.counts]
    }
    fn buffers_mut(&mut self) -> Vec<&mut dyn BudgetedBuffer> {
        vec![
            &mut self.bin_of,
            &mut self.sorted,
            &mut self.bin_start,
            &mut self.counts,
        ]
    }
}
