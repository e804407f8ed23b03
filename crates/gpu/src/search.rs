//! The meshless neighbour search on the device: the same counting sort and the same lists as the
//! CPU search ([`mote_cloud::NeighbourSearch`]), in both slot layouts.
//!
//! 1. Bounding box of the non-periodic axes (a min/max reduction; two numbers per axis come
//!    back), then the bins of [`SearchGrid`], computed on the host exactly as the CPU search does.
//! 2. Bin of every particle and its rank in the bin from an atomic histogram; an exclusive
//!    prefix sum of the bin counts gives the segment starts; the scatter puts every particle at
//!    `start + rank`. Atomics make the order inside a segment depend on timing, so each segment
//!    is then sorted by particle index (one unit per bin, insertion sort: segments hold a few
//!    particles), which is the CPU's stable order.
//! 3. A counting pass walks the bins around each particle in the CPU's fixed order and counts the
//!    neighbours within the radius; a prefix sum gives the row-major starts and the total, a
//!    reduction the maximum; those two numbers come back to size the slot buffers.
//! 4. A filling pass walks the same bins and writes the indices: row-major at `start + k`,
//!    slot-major at `k * n + i` with the padding up to the maximum holding `i` itself.
//!
//! Positions are compared in the cloud's precision with the same operations as on the CPU
//! (minimum-image differences, `d^2` summed axis by axis, `d^2 <= r^2`), so the lists are
//! identical. One caveat: a device compiler that contracts `d2 + d * d` into a fused
//! multiply-add (CUDA does by default) can decide a pair at distance `r` to within one rounding
//! differently; the tests use clouds without such ties.

use cubecl::prelude::*;
use mote_cloud::{Cloud, CloudError, Domain, SearchGrid};
use mote_core::{Budgeted, BudgetedBuffer, CapacityError, CapacityUnit, Scaling};

use crate::array::DeviceArray;
use crate::device::Gpu;
use crate::error::GpuError;
use crate::gravity::GpuFloat;
use crate::launch::launch;

/// Grid numbers of the kernels, as one small float array: `lo[3]`, `inv_cell[3]`, `length[3]`,
/// `half_length[3]`.
const GRID_FLOATS: usize = 12;
/// Grid integers: `cells[3]`, `periodic[3]`.
const GRID_INTS: usize = 6;

/// Bin of a coordinate on one axis: `floor((x - lo) * inv)` clamped to `0..cells`.
#[cube]
fn bin_axis<F: Float>(x: F, lo: F, inv: F, cells: u32) -> u32 {
    let t = F::max(F::floor((x - lo) * inv), F::new(0.0));
    let c = u32::cast_from(t);
    u32::min(c, cells - 1)
}

/// The points a search bins: positions, their count and dimension, and the grid (`gf`: lower
/// corner, inverse bin widths, lengths, half lengths; `gu`: bins per axis, periodic axes).
#[derive(CubeLaunch, CubeType)]
struct Points<F: Float> {
    x: Array<F>,
    y: Array<F>,
    z: Array<F>,
    n: u32,
    dim: u32,
    gf: Array<F>,
    gu: Array<u32>,
}

/// The particles sorted by bin: each particle's bin, the bins' starts, the sorted indices.
#[derive(CubeLaunch, CubeType)]
struct Bins {
    bin_of: Array<u32>,
    bin_start: Array<u32>,
    sorted: Array<u32>,
}

#[cube(launch_unchecked)]
fn bin_kernel<F: Float>(
    p: &Points<F>,
    bin_of: &mut Array<u32>,
    rank: &mut Array<u32>,
    bin_count: &mut Array<Atomic<u32>>,
) {
    let i = ABSOLUTE_POS;
    if i < p.n as usize {
        let mut b = bin_axis::<F>(p.x[i], p.gf[0], p.gf[3], p.gu[0]);
        if p.dim > 1 {
            b += p.gu[0] * bin_axis::<F>(p.y[i], p.gf[1], p.gf[4], p.gu[1]);
        }
        if p.dim > 2 {
            b += p.gu[0] * p.gu[1] * bin_axis::<F>(p.z[i], p.gf[2], p.gf[5], p.gu[2]);
        }
        bin_of[i] = b;
        rank[i] = bin_count[b as usize].fetch_add(1u32);
    }
}

#[cube(launch_unchecked)]
fn scatter_kernel(
    bin_of: &Array<u32>,
    rank: &Array<u32>,
    bin_start: &Array<u32>,
    n: u32,
    sorted: &mut Array<u32>,
) {
    let i = ABSOLUTE_POS;
    if i < n as usize {
        let at = bin_start[bin_of[i] as usize] + rank[i];
        sorted[at as usize] = i as u32;
    }
}

/// Sorts each bin's segment of `sorted` by particle index (one unit per bin).
#[cube(launch_unchecked)]
fn sort_bins_kernel(bin_start: &Array<u32>, bins: u32, sorted: &mut Array<u32>) {
    let b = ABSOLUTE_POS;
    if b < bins as usize {
        let s = bin_start[b];
        let e = bin_start[b + 1];
        for k in s + 1..e {
            let v = sorted[k as usize];
            let mut m = k;
            loop {
                if m <= s {
                    break;
                }
                let p = sorted[(m - 1) as usize];
                if p <= v {
                    break;
                }
                sorted[m as usize] = p;
                m -= 1;
            }
            sorted[m as usize] = v;
        }
    }
}

/// First of the up to three bins around `b` on one axis, and how many there are (see
/// [`SearchGrid::axis_bins`]); bin `k` of them is `(first + k) % cells`.
#[cube]
fn axis_first(b: u32, cells: u32, periodic: u32) -> u32 {
    let mut first = 0u32;
    if periodic == 1 {
        first = (b + cells - 1) % cells;
    } else if b > 0 {
        first = b - 1;
    }
    first
}

#[cube]
fn axis_len(b: u32, cells: u32, periodic: u32) -> u32 {
    let mut len = u32::min(cells, 3u32);
    if periodic == 0 {
        let first = select(b > 0, b - 1, 0u32);
        len = u32::min(b + 1, cells - 1) - first + 1;
    }
    len
}

/// Minimum-image difference on one axis (as the CPU search computes it).
#[cube]
fn image<F: Float>(d: F, periodic: u32, length: F, half: F) -> F {
    let mut r = d;
    if periodic == 1 {
        if d > half {
            r = d - length;
        } else if d < -half {
            r = d + length;
        }
    }
    r
}

/// Walks the bins around each particle and, by `mode`, counts its neighbours into `counts`
/// (0), writes them row-major from `starts[i]` (1) or slot-major at `k * n + i` with the padding
/// up to `max` (2).
#[cube(launch_unchecked)]
fn neighbours_kernel<F: Float + ScalarArgSettings>(
    p: &Points<F>,
    r2: F,
    bins: &Bins,
    mode: u32,
    starts: &Array<u32>,
    max: u32,
    counts: &mut Array<u32>,
    indices: &mut Array<u32>,
) {
    let i = ABSOLUTE_POS;
    if i < p.n as usize {
        let me = i as u32;
        let (cx, cy, cz) = (p.gu[0], p.gu[1], p.gu[2]);
        let b = bins.bin_of[i];
        let bx = b % cx;
        let by = (b / cx) % cy;
        let bz = b / (cx * cy);
        let fx = axis_first(bx, cx, p.gu[3]);
        let fy = axis_first(by, cy, p.gu[4]);
        let fz = axis_first(bz, cz, p.gu[5]);
        let lx = axis_len(bx, cx, p.gu[3]);
        let ly = axis_len(by, cy, p.gu[4]);
        let lz = axis_len(bz, cz, p.gu[5]);
        let xi = p.x[i];
        let yi = p.y[i];
        let zi = p.z[i];
        let mut row = 0u32;
        if mode == 1 {
            row = starts[i];
        }
        let mut k = 0u32;
        for kz in 0..lz {
            let ez = (fz + kz) % cz;
            for ky in 0..ly {
                let ey = (fy + ky) % cy;
                for kx in 0..lx {
                    let ex = (fx + kx) % cx;
                    let c = (ex + cx * (ey + cy * ez)) as usize;
                    for s in bins.bin_start[c]..bins.bin_start[c + 1] {
                        let j = bins.sorted[s as usize];
                        if j != me {
                            let ju = j as usize;
                            let dx = image::<F>(p.x[ju] - xi, p.gu[3], p.gf[6], p.gf[9]);
                            let mut d2 = dx * dx;
                            if p.dim > 1 {
                                let dy = image::<F>(p.y[ju] - yi, p.gu[4], p.gf[7], p.gf[10]);
                                d2 += dy * dy;
                            }
                            if p.dim > 2 {
                                let dz = image::<F>(p.z[ju] - zi, p.gu[5], p.gf[8], p.gf[11]);
                                d2 += dz * dz;
                            }
                            if d2 <= r2 {
                                if mode == 1 {
                                    indices[(row + k) as usize] = j;
                                } else if mode == 2 {
                                    indices[(k * p.n) as usize + i] = j;
                                }
                                k += 1;
                            }
                        }
                    }
                }
            }
        }
        if mode == 0 {
            counts[i] = k;
        } else if mode == 2 {
            for q in k..max {
                indices[(q * p.n) as usize + i] = me;
            }
        }
    }
}

/// The single entry `values[at]` into `out[1]`.
#[cube(launch_unchecked)]
fn pick_kernel(values: &Array<u32>, at: u32, out: &mut Array<u32>) {
    if ABSOLUTE_POS == 0 {
        out[1] = values[at as usize];
    }
}

/// The geometry of a cloud on a device: positions (one array per axis), tags and volumes,
/// mirroring the host component arrays, with the domain they live in.
pub struct DeviceCloud<R, const D: usize> {
    positions: Vec<DeviceArray<R>>,
    tags: DeviceArray<u32>,
    volumes: DeviceArray<R>,
    domain: Domain<D>,
    spacing: [f64; D],
}

impl<R: GpuFloat, const D: usize> DeviceCloud<R, D> {
    /// Uploads the positions, tags and volumes of `cloud` to `gpu` (an error where the device
    /// cannot compute in the cloud's precision).
    pub fn upload(gpu: &Gpu, cloud: &Cloud<R, D>) -> Result<Self, GpuError> {
        gpu.check_precision(R::PRECISION)?;
        const NAMES: [&str; 3] = ["x", "y", "z"];
        let positions = cloud
            .positions()
            .iter()
            .zip(NAMES)
            .map(|(p, name)| gpu.upload(name, p))
            .collect();
        Ok(Self {
            positions,
            tags: gpu.upload("tag", cloud.tags()),
            volumes: gpu.upload("volume", cloud.volumes()),
            domain: *cloud.domain(),
            spacing: cloud.spacing(),
        })
    }

    /// Number of particles.
    pub fn len(&self) -> usize {
        self.positions[0].len()
    }

    /// Whether it holds no particle.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The position arrays.
    pub fn positions(&self) -> &[DeviceArray<R>] {
        &self.positions
    }

    /// The boundary tag of every particle (0 interior).
    pub fn tags(&self) -> &DeviceArray<u32> {
        &self.tags
    }

    /// The particle volumes.
    pub fn volumes(&self) -> &DeviceArray<R> {
        &self.volumes
    }

    /// The domain.
    pub fn domain(&self) -> &Domain<D> {
        &self.domain
    }

    /// The nominal spacing per axis.
    pub fn spacing(&self) -> [f64; D] {
        self.spacing
    }

    /// Refuses unless the device positions, tags and volumes equal `cloud`'s, by fingerprint
    /// (the check after a reservation moved them).
    pub fn verify(&self, gpu: &Gpu, cloud: &Cloud<R, D>) -> Result<(), GpuError> {
        for (d, h) in self.positions.iter().zip(cloud.positions()) {
            gpu.verify(d, h)?;
        }
        gpu.verify(&self.tags, cloud.tags())?;
        gpu.verify(&self.volumes, cloud.volumes())
    }
}

impl<R: GpuFloat, const D: usize> Budgeted for DeviceCloud<R, D> {
    fn buffers(&self) -> Vec<&dyn BudgetedBuffer> {
        let mut v: Vec<&dyn BudgetedBuffer> = self
            .positions
            .iter()
            .map(|p| p as &dyn BudgetedBuffer)
            .collect();
        v.push(&self.tags);
        v.push(&self.volumes);
        v
    }
    fn buffers_mut(&mut self) -> Vec<&mut dyn BudgetedBuffer> {
        let mut v: Vec<&mut dyn BudgetedBuffer> = self
            .positions
            .iter_mut()
            .map(|p| p as &mut dyn BudgetedBuffer)
            .collect();
        v.push(&mut self.tags);
        v.push(&mut self.volumes);
        v
    }
}

/// The slot layout of device neighbour lists (see [`mote_cloud::SlotLayout`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceLayout {
    /// A particle's slots contiguous, from `starts[i]`.
    RowMajor,
    /// Slot `k` of particle `i` at `k * n + i`, every particle padded to the maximum count.
    SlotMajor,
}

/// Neighbour lists on a device: counts, row-major starts (`n + 1` entries, the last the total;
/// kept in both layouts) and the neighbour indices, budgeted like the host lists.
pub struct DeviceNeighbours {
    layout: DeviceLayout,
    counts: DeviceArray<u32>,
    starts: DeviceArray<u32>,
    indices: DeviceArray<u32>,
    total: usize,
    max: usize,
    radius: f64,
    /// The split between ranks the lists' cloud belongs to (a rank's part: the passes refresh
    /// the halo's records after writing them); `None` on one process.
    halo: Option<std::sync::Arc<crate::halo::DeviceHalo>>,
}

impl DeviceNeighbours {
    /// Empty lists in `layout` on `gpu`.
    pub fn new(gpu: &Gpu, layout: DeviceLayout) -> Self {
        Self {
            layout,
            counts: gpu.output("neighbour_count", 0),
            starts: gpu.output("neighbour_start", 0),
            indices: gpu
                .output("neighbour_index", 0)
                .with_scaling(Scaling::PerSlot(1)),
            total: 0,
            max: 0,
            radius: 0.0,
            halo: None,
        }
    }

    /// Marks the lists as those of a rank's part of a split cloud with `halo`.
    pub fn set_halo(&mut self, halo: std::sync::Arc<crate::halo::DeviceHalo>) {
        self.halo = Some(halo);
    }

    /// The split between ranks these lists' cloud belongs to, if it is a rank's part.
    pub fn halo(&self) -> Option<&crate::halo::DeviceHalo> {
        self.halo.as_deref()
    }

    /// The layout.
    pub fn layout(&self) -> DeviceLayout {
        self.layout
    }

    /// Total neighbour count.
    pub fn total(&self) -> usize {
        self.total
    }

    /// The largest neighbour count.
    pub fn max(&self) -> usize {
        self.max
    }

    /// The radius of the search that built them.
    pub fn radius(&self) -> f64 {
        self.radius
    }

    /// Neighbour counts per particle.
    pub fn counts(&self) -> &DeviceArray<u32> {
        &self.counts
    }

    /// Row-major starts (`n + 1` entries).
    pub fn starts(&self) -> &DeviceArray<u32> {
        &self.starts
    }

    /// The neighbour index of each slot, in the layout's order (slot-major padding holds the
    /// particle itself, as on the host).
    pub fn indices(&self) -> &DeviceArray<u32> {
        &self.indices
    }
}

impl Budgeted for DeviceNeighbours {
    fn buffers(&self) -> Vec<&dyn BudgetedBuffer> {
        vec![&self.counts, &self.starts, &self.indices]
    }
    fn buffers_mut(&mut self) -> Vec<&mut dyn BudgetedBuffer> {
        vec![&mut self.counts, &mut self.starts, &mut self.indices]
    }
}

/// The cell list of a device search, reused between searches; its buffers are budgeted (bin,
/// rank, sorted order and counting scratch per particle; bin counts and starts fixed).
pub struct GpuNeighbourSearch {
    radius: f64,
    /// Bins over these bounds (`min`, `max` per axis) instead of the particles' extent: a
    /// rank's part of a split cloud searched on the whole cloud's bins, as on the CPU
    /// ([`mote_cloud::NeighbourSearch::with_bounds`]).
    bounds: Option<(Vec<f64>, Vec<f64>)>,
    bin_of: DeviceArray<u32>,
    rank: DeviceArray<u32>,
    sorted: DeviceArray<u32>,
    counts: DeviceArray<u32>,
    starts: DeviceArray<u32>,
    bin_count: DeviceArray<u32>,
    bin_start: DeviceArray<u32>,
    scalars: DeviceArray<u32>,
}

/// The per-launch arguments of the search kernels.
struct Geometry<'a, R> {
    x: &'a DeviceArray<R>,
    y: &'a DeviceArray<R>,
    z: &'a DeviceArray<R>,
    n: usize,
    dim: u32,
    gf: DeviceArray<R>,
    gu: DeviceArray<u32>,
    r2: R,
}

impl<R: GpuFloat> Geometry<'_, R> {
    /// The points as the kernels' launch argument.
    fn points<Rt: Runtime>(&self) -> PointsLaunch<R, Rt> {
        PointsLaunch::new(
            self.x.arg(),
            self.y.arg(),
            self.z.arg(),
            self.n as u32,
            self.dim,
            self.gf.arg(),
            self.gu.arg(),
        )
    }
}

impl GpuNeighbourSearch {
    /// A search for neighbours within `radius` on `gpu`.
    pub fn new(gpu: &Gpu, radius: f64) -> Result<Self, GpuError> {
        if !(radius.is_finite() && radius > 0.0) {
            return Err(CloudError::invalid("search radius", radius, "finite and > 0").into());
        }
        let fixed = |name| gpu.output::<u32>(name, 0).with_scaling(Scaling::Fixed);
        Ok(Self {
            radius,
            bounds: None,
            bin_of: gpu.output("bin_of", 0),
            rank: gpu.output("bin_rank", 0),
            sorted: gpu.output("bin_sorted", 0),
            counts: gpu.output("neighbour_count_scratch", 0),
            starts: gpu.output("neighbour_start_scratch", 0),
            bin_count: fixed("bin_count"),
            bin_start: fixed("bin_start"),
            scalars: gpu
                .upload::<u32>("search_scalars", &[0, 0])
                .with_scaling(Scaling::Fixed),
        })
    }

    /// The radius.
    pub fn radius(&self) -> f64 {
        self.radius
    }

    /// Bins every later search over `min..max` per axis instead of the particles' extent (a
    /// rank's part of a split cloud on the whole cloud's bins: the one-process lists).
    pub fn set_bounds(&mut self, min: &[f64], max: &[f64]) {
        self.bounds = Some((min.to_vec(), max.to_vec()));
    }

    /// Builds `list` for the particles of `cloud`, all on `gpu`. A reserved list that cannot
    /// hold the new neighbours fails with a [`CapacityError`] and is left unchanged.
    pub fn build<R: GpuFloat, const D: usize>(
        &mut self,
        gpu: &Gpu,
        cloud: &DeviceCloud<R, D>,
        list: &mut DeviceNeighbours,
    ) -> Result<(), GpuError> {
        let n = cloud.len();
        if n >= u32::MAX as usize {
            return Err(CloudError::invalid(
                "particle count",
                n,
                "below 2^32 - 1 (32-bit neighbour indices)",
            )
            .into());
        }
        for p in cloud.positions() {
            gpu.check(p, n)?;
        }
        gpu.check_precision(R::PRECISION)?;
        for a in [&list.counts, &list.starts, &list.indices] {
            gpu.check(a, a.len())?;
        }

        // 1. The bins, from the bounding box of the non-periodic axes (or the bounds set).
        let periodic = cloud.domain.periodic();
        let mut min = [0.0; D];
        let mut max = [0.0; D];
        for a in 0..D {
            if let Some((lo, hi)) = &self.bounds {
                (min[a], max[a]) = (lo[a], hi[a]);
            } else if !periodic[a] && n > 0 {
                let (lo, hi) = gpu.min_max(&cloud.positions()[a])?;
                (min[a], max[a]) = (lo.as_f64(), hi.as_f64());
            }
        }
        let search_grid = SearchGrid::new(self.radius, &cloud.domain, min, max)?;
        let nbins = search_grid.bins();
        let mut gf = [R::cast(0.0); GRID_FLOATS];
        let mut gu = [1u32, 1, 1, 0, 0, 0];
        for a in 0..D {
            gf[a] = R::cast(search_grid.lo[a]);
            gf[3 + a] = R::cast(search_grid.inv_cell[a]);
            gf[6 + a] = R::cast(search_grid.length[a]);
            gf[9 + a] = R::cast(0.5 * search_grid.length[a]);
            gu[a] = search_grid.cells[a] as u32;
            gu[3 + a] = periodic[a] as u32;
        }
        debug_assert_eq!(gu.len(), GRID_INTS);
        let pos = cloud.positions();
        let geometry = Geometry {
            x: &pos[0],
            y: &pos[1.min(D - 1)],
            z: &pos[2.min(D - 1)],
            n,
            dim: D as u32,
            gf: gpu.upload("search_grid", &gf).with_scaling(Scaling::Fixed),
            gu: gpu.upload("search_cells", &gu).with_scaling(Scaling::Fixed),
            r2: R::cast(self.radius * self.radius),
        };

        // Every scratch buffer first: a full one fails before anything is written.
        self.bin_count.resize(nbins)?;
        self.bin_start.resize(nbins + 1)?;
        for b in [
            &mut self.bin_of,
            &mut self.rank,
            &mut self.sorted,
            &mut self.counts,
        ] {
            b.resize(n)?;
        }
        self.starts.resize(n + 1)?;
        if n == 0 {
            list.counts.resize(0)?;
            list.starts.resize(1)?;
            list.indices.resize(0)?;
            gpu.fill_u32(&list.starts, 0);
            (list.total, list.max, list.radius) = (0, 0, self.radius);
            return gpu.sync();
        }

        // 2. Counting sort into bins, then each segment in particle order.
        gpu.fill_u32(&self.bin_count, 0);
        self.launch_bins(gpu, &geometry);
        gpu.exclusive_scan(&self.bin_count, &self.bin_start)?;
        self.launch_scatter_and_sort(gpu, n, nbins);

        // 3. Counts, starts, total and maximum.
        // Mode 0 writes only the counts; the index argument is a stand-in never written.
        self.launch_neighbours(
            gpu,
            &geometry,
            0,
            &self.starts,
            0,
            &self.counts,
            &self.scalars,
        );
        gpu.exclusive_scan(&self.counts, &self.starts)?;
        gpu.max_u32(&self.counts, &self.scalars)?;
        self.launch_pick(gpu, n);
        gpu.sync()?;
        let scalars = gpu.download(&self.scalars)?;
        let (max, total) = (scalars[0] as usize, scalars[1] as usize);

        // 4. The list: check every capacity before writing any of it.
        let slots = match list.layout {
            DeviceLayout::RowMajor => total,
            DeviceLayout::SlotMajor => n.checked_mul(max).ok_or_else(|| CapacityError {
                what: "slot-major neighbour slots".into(),
                requested: u64::MAX,
                available: u32::MAX as u64,
                unit: CapacityUnit::Elements,
            })?,
        };
        if slots > u32::MAX as usize {
            return Err(CapacityError {
                what: "device neighbour slots (32-bit slot indices)".into(),
                requested: slots as u64,
                available: u32::MAX as u64,
                unit: CapacityUnit::Elements,
            }
            .into());
        }
        for (b, len) in [
            (&list.counts, n),
            (&list.starts, n + 1),
            (&list.indices, slots),
        ] {
            if len > b.capacity() && b.is_frozen() {
                return Err(CapacityError {
                    what: format!("device buffer `{}`", b.name()),
                    requested: len as u64,
                    available: b.capacity() as u64,
                    unit: CapacityUnit::Elements,
                }
                .into());
            }
        }
        list.counts.resize(n)?;
        list.starts.resize(n + 1)?;
        list.indices.resize(slots)?;
        gpu.copy(&self.counts, &list.counts)?;
        gpu.copy(&self.starts, &list.starts)?;
        let mode = match list.layout {
            DeviceLayout::RowMajor => 1,
            DeviceLayout::SlotMajor => 2,
        };
        self.launch_neighbours(
            gpu,
            &geometry,
            mode,
            &list.starts,
            max as u32,
            &self.counts,
            &list.indices,
        );
        gpu.sync()?;
        (list.total, list.max, list.radius) = (total, max, self.radius);
        Ok(())
    }

    fn launch_bins<R: GpuFloat>(&self, gpu: &Gpu, g: &Geometry<'_, R>) {
        // Reads below n (and the grid arrays' fixed lengths), writes each particle's own bin and
        // rank; bin indices are clamped below the bin count.
        launch!(
            gpu,
            g.n,
            bin_kernel::<R>(
                g.points(),
                self.bin_of.arg(),
                self.rank.arg(),
                self.bin_count.arg()
            )
        );
    }

    fn launch_scatter_and_sort(&self, gpu: &Gpu, n: usize, nbins: usize) {
        // start + rank is a permutation of 0..n (ranks from the histogram); the sort touches
        // only its own bin's segment.
        launch!(
            gpu,
            n,
            scatter_kernel(
                self.bin_of.arg(),
                self.rank.arg(),
                self.bin_start.arg(),
                n as u32,
                self.sorted.arg()
            )
        );
        launch!(
            gpu,
            nbins,
            sort_bins_kernel(self.bin_start.arg(), nbins as u32, self.sorted.arg())
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn launch_neighbours<R: GpuFloat>(
        &self,
        gpu: &Gpu,
        g: &Geometry<'_, R>,
        mode: u32,
        starts: &DeviceArray<u32>,
        max: u32,
        counts: &DeviceArray<u32>,
        indices: &DeviceArray<u32>,
    ) {
        // Every index read is a particle or bin index below its array's length; mode 0 writes
        // counts[i], mode 1 the row starts[i]..starts[i] + count_i (sized to the total), mode 2
        // the entries k * n + i for k < max (sized n * max).
        launch!(
            gpu,
            g.n,
            neighbours_kernel::<R>(
                g.points(),
                g.r2,
                BinsLaunch::new(self.bin_of.arg(), self.bin_start.arg(), self.sorted.arg()),
                mode,
                starts.arg(),
                max,
                counts.arg(),
                indices.arg()
            )
        );
    }

    fn launch_pick(&self, gpu: &Gpu, n: usize) {
        // starts holds n + 1 entries; out[1] exists; unit 0 writes it.
        launch!(
            gpu,
            1,
            pick_kernel(self.starts.arg(), n as u32, self.scalars.arg())
        );
    }
}

impl Budgeted for GpuNeighbourSearch {
    fn buffers(&self) -> Vec<&dyn BudgetedBuffer> {
        vec![
            &self.bin_of,
            &self.rank,
            &self.sorted,
            &self.counts,
            &self.starts,
            &self.bin_count,
            &self.bin_start,
            &self.scalars,
        ]
    }
    fn buffers_mut(&mut self) -> Vec<&mut dyn BudgetedBuffer> {
        vec![
            &mut self.bin_of,
            &mut self.rank,
            &mut self.sorted,
            &mut self.counts,
            &mut self.starts,
            &mut self.bin_count,
            &mut self.bin_start,
            &mut self.scalars,
        ]
    }
}
