//! Execution backends and the one entry point for CPU per-particle passes.
//!
//! A pass over particles is written in the *pull* form: the body computes particle `i`'s new
//! values from whatever it reads (its own state, its neighbours', all sources) and returns
//! them; only the launcher writes them, into entry `i` of the output arrays. No body can write
//! another particle's entry, so the result cannot depend on launch order or thread count, and
//! [`CpuBackend::Serial`] and [`CpuBackend::Threads`] give bitwise-identical results.
//!
//! A Rust closure cannot run on a GPU: on [`Backend::Device`] each pass is a separate device
//! kernel over device copies of the same component arrays (the `mote-gpu` crate), kept equal to
//! its CPU version by tests. [`Backend::cpu`] is how a pass with no device version refuses to
//! run there. See `docs/decisions/0002-backends.md`.

use std::fmt;
use std::ops::Range;
use std::str::FromStr;
use std::sync::{Arc, Mutex, OnceLock};

use rayon::{ThreadPool, ThreadPoolBuilder};
use serde::{Deserialize, Serialize};

use crate::particles::Vec3SpanMut;

/// Where a simulation executes, chosen once per run: the value a meshless simulation
/// (`mote_gpu::meshless::Simulation::new`) is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Backend {
    /// On the CPU, serially or on threads.
    Cpu(CpuBackend),
    /// On a GPU, through device kernels.
    Device(DeviceSpec),
}

impl Default for Backend {
    fn default() -> Self {
        Backend::Cpu(CpuBackend::default())
    }
}

impl Backend {
    /// The CPU backend to run a CPU pass on, or, on a device backend, an error naming the
    /// `component` that has no device version. Nothing falls back silently to the CPU.
    pub fn cpu(self, component: &str) -> Result<CpuBackend, BackendError> {
        match self {
            Backend::Cpu(cpu) => Ok(cpu),
            Backend::Device(_) => Err(BackendError::NotOnDevice(component.to_string())),
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Backend::Cpu(c) => write!(f, "{c}"),
            Backend::Device(d) => write!(f, "gpu ({d})"),
        }
    }
}

/// A CPU backend: the launcher of [`CpuBackend::for_each_particle`] and its relatives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CpuBackend {
    /// One thread, blocks in ascending order.
    Serial,
    /// A rayon pool of `threads` threads (0: one per available core, or `RAYON_NUM_THREADS`).
    Threads {
        /// Number of worker threads; 0 for the machine's default.
        threads: usize,
    },
}

impl Default for CpuBackend {
    /// All cores.
    fn default() -> Self {
        CpuBackend::Threads { threads: 0 }
    }
}

impl CpuBackend {
    /// A pool of `threads` threads; 0 means all cores.
    pub fn threads(threads: usize) -> Self {
        CpuBackend::Threads { threads }
    }

    /// Number of threads the backend runs on.
    pub fn thread_count(self) -> usize {
        match self {
            CpuBackend::Serial => 1,
            CpuBackend::Threads { threads } if threads > 0 => threads,
            _ => rayon::current_num_threads().max(1),
        }
    }

    /// Runs `body(i)` for every particle `i` of `out` and stores its result in entry `i`.
    ///
    /// `out` is one output array, a [`Vec3SpanMut`], or a tuple of them (all of one length).
    /// The body reads anything it captures and returns particle `i`'s values: the pull form.
    ///
    /// ```
    /// use mote_core::{CpuBackend, Vec3SpanMut};
    ///
    /// let m = [1.0, 2.0, 3.0];
    /// let (mut x, mut y, mut z, mut s) = ([0.0; 3], [0.0; 3], [0.0; 3], [0.0; 3]);
    /// let v = Vec3SpanMut::new(&mut x, &mut y, &mut z);
    /// CpuBackend::threads(2).for_each_particle((v, &mut s[..]), |i| {
    ///     ([m[i], 2.0 * m[i], 0.0], m.iter().sum::<f64>() - m[i])
    /// });
    /// assert_eq!(y, [2.0, 4.0, 6.0]);
    /// assert_eq!(s, [5.0, 4.0, 3.0]);
    /// ```
    pub fn for_each_particle<O, F>(self, out: O, body: F)
    where
        O: ParticleOutputs,
        F: Fn(usize) -> O::Value + Sync,
    {
        self.for_each_block(out, PARTICLE_BLOCK, |start, mut block| {
            for k in 0..block.len() {
                block.set(k, body(start + k));
            }
        });
    }

    /// Replaces every particle's values by `body(i, current)`: an element-wise update in place
    /// (drift, kick, stage update). The body may read other arrays, never the outputs of other
    /// particles.
    ///
    /// ```
    /// use mote_core::CpuBackend;
    ///
    /// let v = [1.0, 2.0];
    /// let mut x = [10.0, 20.0];
    /// CpuBackend::Serial.update_each(&mut x[..], |i, xi| xi + 0.5 * v[i]);
    /// assert_eq!(x, [10.5, 21.0]);
    /// ```
    pub fn update_each<O, F>(self, out: O, body: F)
    where
        O: ParticleState,
        F: Fn(usize, O::Value) -> O::Value + Sync,
    {
        self.for_each_block(out, PARTICLE_BLOCK, |start, mut block| {
            for k in 0..block.len() {
                let v = block.get(k);
                block.set(k, body(start + k, v));
            }
        });
    }

    /// Runs `body(start, block)` on consecutive blocks of `out` of `block_len` particles (the
    /// last may be shorter); `start` is the index of the block's first particle and a multiple
    /// of `block_len`. For kernels that work on several targets at once (SIMD tiles).
    ///
    /// The blocks are the same on every backend and thread count; only their order and
    /// placement on threads differ. A body whose results depend only on `start` and what it
    /// reads gives bitwise-identical results everywhere.
    ///
    /// # Panics
    /// If `block_len` is 0.
    pub fn for_each_block<O, F>(self, out: O, block_len: usize, body: F)
    where
        O: SplitOutputs,
        F: Fn(usize, O) + Sync,
    {
        assert!(block_len > 0, "block length must be positive");
        match self {
            CpuBackend::Serial => {
                let mut rest = out;
                let mut start = 0;
                while rest.len() > 0 {
                    let take = block_len.min(rest.len());
                    let (head, tail) = rest.split_at(take);
                    body(start, head);
                    rest = tail;
                    start += take;
                }
            }
            CpuBackend::Threads { threads: 0 } => split_blocks(out, 0, block_len, &body),
            CpuBackend::Threads { threads } => {
                pool(threads).install(|| split_blocks(out, 0, block_len, &body))
            }
        }
    }

    /// Runs `f` on this backend's threads: rayon's parallel iterators inside `f` use them
    /// ([`CpuBackend::Serial`]: one thread). For passes whose work items are not particle
    /// blocks (the gravity tree's groups); such a pass keeps its results independent of the
    /// thread count itself, by giving every item its own output.
    pub fn install<T: Send>(self, f: impl FnOnce() -> T + Send) -> T {
        match self {
            CpuBackend::Serial => pool(1).install(f),
            CpuBackend::Threads { threads: 0 } => f(),
            CpuBackend::Threads { threads } => pool(threads).install(f),
        }
    }

    /// A deterministic reduction: `map` is applied to the fixed ranges
    /// `0..block_len, block_len..2*block_len, ...` of `0..n` and the partial results are combined
    /// left to right, in range order, whatever the thread count. `None` when `n == 0`.
    ///
    /// Floating-point sums therefore come out bitwise identical on every CPU backend.
    ///
    /// # Panics
    /// If `block_len` is 0.
    pub fn map_reduce<T, M, C>(self, n: usize, block_len: usize, map: M, combine: C) -> Option<T>
    where
        T: Send,
        M: Fn(Range<usize>) -> T + Sync,
        C: Fn(T, T) -> T,
    {
        assert!(block_len > 0, "block length must be positive");
        let mut partials: Vec<Option<T>> = (0..n.div_ceil(block_len)).map(|_| None).collect();
        self.for_each_block(&mut partials[..], 1, |b, mut out| {
            let start = b * block_len;
            out.set(0, Some(map(start..(start + block_len).min(n))));
        });
        partials.into_iter().flatten().reduce(combine)
    }
}

/// Particles per block in [`CpuBackend::for_each_particle`]: large enough that a task's
/// overhead is negligible for cheap bodies, small enough to balance N^2 passes on few threads.
const PARTICLE_BLOCK: usize = 256;

fn split_blocks<O, F>(out: O, start: usize, block_len: usize, body: &F)
where
    O: SplitOutputs,
    F: Fn(usize, O) + Sync,
{
    let n = out.len();
    if n <= block_len {
        if n > 0 {
            body(start, out);
        }
        return;
    }
    // Split at a block boundary so every body sees the same blocks as the serial loop.
    let mid = n.div_ceil(block_len) / 2 * block_len;
    let (a, b) = out.split_at(mid);
    rayon::join(
        || split_blocks(a, start, block_len, body),
        || split_blocks(b, start + mid, block_len, body),
    );
}

/// Rayon pools by thread count, built once per process: building a pool starts threads.
fn pool(threads: usize) -> Arc<ThreadPool> {
    type Pools = Mutex<Vec<(usize, Arc<ThreadPool>)>>;
    static POOLS: OnceLock<Pools> = OnceLock::new();
    let mut pools = POOLS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = pools.iter().find(|(t, _)| *t == threads) {
        return p.clone();
    }
    let p = Arc::new(
        ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(move |i| format!("mote-{threads}-{i}"))
            .build()
            .expect("failed to start a thread pool"),
    );
    pools.push((threads, p.clone()));
    p
}

impl fmt::Display for CpuBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CpuBackend::Serial => f.write_str("serial"),
            _ => write!(f, "threads ({})", self.thread_count()),
        }
    }
}

/// Per-particle outputs that can be cut into disjoint particle ranges: what
/// [`CpuBackend::for_each_block`] hands to its blocks.
pub trait SplitOutputs: Send + Sized {
    /// Number of particles.
    fn len(&self) -> usize;
    /// Whether there is no particle.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The particles before `mid` and from `mid` on.
    fn split_at(self, mid: usize) -> (Self, Self);
}

/// The outputs of a per-particle pass: one entry per particle, written only by the launcher.
///
/// Implemented for `&mut [T]`, [`Vec3SpanMut`] and tuples of up to four of them.
pub trait ParticleOutputs: SplitOutputs {
    /// The values of one particle.
    type Value;
    /// Stores particle `i`'s values.
    fn set(&mut self, i: usize, value: Self::Value);
}

/// Outputs whose current values can be read back: the in-place form of
/// [`CpuBackend::update_each`].
pub trait ParticleState: ParticleOutputs {
    /// Particle `i`'s current values.
    fn get(&self, i: usize) -> Self::Value;
}

impl<T: Send + Copy> ParticleState for &mut [T] {
    #[inline(always)]
    fn get(&self, i: usize) -> T {
        self[i]
    }
}

impl<R: Copy + Send> ParticleState for Vec3SpanMut<'_, R> {
    #[inline(always)]
    fn get(&self, i: usize) -> [R; 3] {
        Vec3SpanMut::get(self, i)
    }
}

impl<T: Send> SplitOutputs for &mut [T] {
    #[inline]
    fn len(&self) -> usize {
        <[T]>::len(self)
    }
    #[inline]
    fn split_at(self, mid: usize) -> (Self, Self) {
        self.split_at_mut(mid)
    }
}

impl<T: Send> ParticleOutputs for &mut [T] {
    type Value = T;
    #[inline(always)]
    fn set(&mut self, i: usize, value: T) {
        self[i] = value;
    }
}

impl<R: Copy + Send> SplitOutputs for Vec3SpanMut<'_, R> {
    #[inline]
    fn len(&self) -> usize {
        Vec3SpanMut::len(self)
    }
    #[inline]
    fn split_at(self, mid: usize) -> (Self, Self) {
        Vec3SpanMut::split_at(self, mid)
    }
}

impl<R: Copy + Send> ParticleOutputs for Vec3SpanMut<'_, R> {
    type Value = [R; 3];
    #[inline(always)]
    fn set(&mut self, i: usize, value: [R; 3]) {
        Vec3SpanMut::set(self, i, value)
    }
}

/// Variable-length rows, one per particle, in one contiguous array: particle `k`'s row starts at
/// `starts[k]` and ends where the next one starts (the last at the end of the data). Splits
/// between particles, so each block of [`CpuBackend::for_each_block`] owns its particles' rows
/// (neighbour lists, per-slot weights).
pub struct Rows<'a, T> {
    data: &'a mut [T],
    starts: &'a [usize],
}

impl<'a, T> Rows<'a, T> {
    /// Rows of `data` starting at `starts` (non-decreasing, the first 0, all at most
    /// `data.len()`).
    ///
    /// # Panics
    /// If the starts do not delimit `data` that way.
    pub fn new(data: &'a mut [T], starts: &'a [usize]) -> Self {
        assert!(
            starts.first().is_none_or(|&s| s == 0),
            "row starts must begin at 0"
        );
        assert!(
            starts.windows(2).all(|w| w[0] <= w[1]),
            "row starts must not decrease"
        );
        assert!(
            starts.last().is_none_or(|&s| s <= data.len()),
            "row start beyond the data"
        );
        Self { data, starts }
    }

    /// Row `k` of this block.
    #[inline]
    pub fn row_mut(&mut self, k: usize) -> &mut [T] {
        let base = self.starts[0];
        let end = self
            .starts
            .get(k + 1)
            .map_or(self.data.len(), |&e| e - base);
        &mut self.data[self.starts[k] - base..end]
    }
}

impl<T: Send> SplitOutputs for Rows<'_, T> {
    #[inline]
    fn len(&self) -> usize {
        self.starts.len()
    }
    #[inline]
    fn split_at(self, mid: usize) -> (Self, Self) {
        let cut = self
            .starts
            .get(mid)
            .map_or(self.data.len(), |&s| s - self.starts[0]);
        let (a, b) = self.data.split_at_mut(cut);
        (
            Rows {
                data: a,
                starts: &self.starts[..mid],
            },
            Rows {
                data: b,
                starts: &self.starts[mid..],
            },
        )
    }
}

/// Fixed-width per-particle records in one array: particle `k` owns
/// `data[k * width..(k + 1) * width]` (for example all derivatives of all variables of a
/// particle, read together by its neighbours).
pub struct Chunks<'a, T> {
    data: &'a mut [T],
    width: usize,
}

impl<'a, T> Chunks<'a, T> {
    /// Records of `width` elements over `data` (`data.len()` a multiple of `width`, `width > 0`).
    ///
    /// # Panics
    /// If `width` is 0 or does not divide the length.
    pub fn new(data: &'a mut [T], width: usize) -> Self {
        assert!(
            width > 0 && data.len().is_multiple_of(width),
            "records of {width} elements over {} elements",
            data.len()
        );
        Self { data, width }
    }

    /// The record of the block's particle `k`.
    #[inline]
    pub fn chunk_mut(&mut self, k: usize) -> &mut [T] {
        &mut self.data[k * self.width..(k + 1) * self.width]
    }
}

impl<T: Send> SplitOutputs for Chunks<'_, T> {
    #[inline]
    fn len(&self) -> usize {
        self.data.len() / self.width
    }
    #[inline]
    fn split_at(self, mid: usize) -> (Self, Self) {
        let (a, b) = self.data.split_at_mut(mid * self.width);
        (
            Chunks {
                data: a,
                width: self.width,
            },
            Chunks {
                data: b,
                width: self.width,
            },
        )
    }
}

/// Per-particle, per-slot outputs: [`Rows`] (row-major) and [`StridedRows`] (slot-major) both
/// store slot `k` of the block's particle `i`, so one kernel body writes either layout.
pub trait SlotWriter<T>: SplitOutputs {
    /// Stores `value` in slot `k` of the block's particle `i`.
    fn set_slot(&mut self, i: usize, k: usize, value: T);
}

impl<T: Send> SlotWriter<T> for Rows<'_, T> {
    #[inline]
    fn set_slot(&mut self, i: usize, k: usize, value: T) {
        self.row_mut(i)[k] = value;
    }
}

impl<T: Send> SlotWriter<T> for StridedRows<'_, T> {
    #[inline]
    fn set_slot(&mut self, i: usize, k: usize, value: T) {
        self.set(i, k, value);
    }
}

/// A run-time number of outputs of the same kind (one per conserved variable or per basis
/// function), split together.
impl<O: SplitOutputs> SplitOutputs for Vec<O> {
    fn len(&self) -> usize {
        let n = self.first().map_or(0, |o| o.len());
        assert!(
            self.iter().all(|o| o.len() == n),
            "pass outputs of unequal lengths"
        );
        n
    }
    fn split_at(self, mid: usize) -> (Self, Self) {
        self.into_iter().map(|o| o.split_at(mid)).unzip()
    }
}

/// Slot-major per-particle storage: particle `i` owns the elements `i, i + n, i + 2n, ...`
/// (`n` the total particle count) of one array, `slots` of them. Consecutive particles' slot `k`
/// are adjacent, the layout GPUs read coalesced. Splits between particles like any output; each
/// block can only reach its own particles' elements.
pub struct StridedRows<'a, T> {
    ptr: *mut T,
    stride: usize,
    first: usize,
    len: usize,
    slots: usize,
    _data: std::marker::PhantomData<&'a mut [T]>,
}

// SAFETY: a `StridedRows` is a unique borrow of the elements of its particles, which no other
// `StridedRows` from the same split can reach; sending it is sending `&mut` to those elements.
unsafe impl<T: Send> Send for StridedRows<'_, T> {}

impl<'a, T> StridedRows<'a, T> {
    /// Slot-major rows over `data`, which holds `slots` slots for each of `n` particles
    /// (`data.len() == slots * n`).
    ///
    /// # Panics
    /// If the length does not match.
    pub fn new(data: &'a mut [T], n: usize, slots: usize) -> Self {
        assert_eq!(
            data.len(),
            n * slots,
            "slot-major data must hold slots x particles elements"
        );
        Self {
            ptr: data.as_mut_ptr(),
            stride: n,
            first: 0,
            len: n,
            slots,
            _data: std::marker::PhantomData,
        }
    }

    /// Sets slot `k` of the block's particle `i` (an index within the block).
    ///
    /// # Panics
    /// If `i` or `k` is out of range.
    #[inline]
    pub fn set(&mut self, i: usize, k: usize, value: T) {
        assert!(
            i < self.len && k < self.slots,
            "slot ({i}, {k}) out of range"
        );
        // SAFETY: `first + i < stride` and `k < slots`, so the element lies in the borrowed
        // array, and it belongs to particle `first + i`, which only this block owns.
        unsafe { *self.ptr.add(k * self.stride + self.first + i) = value };
    }
}

impl<T: Send> SplitOutputs for StridedRows<'_, T> {
    #[inline]
    fn len(&self) -> usize {
        self.len
    }
    #[inline]
    fn split_at(self, mid: usize) -> (Self, Self) {
        assert!(mid <= self.len);
        let left = StridedRows { len: mid, ..self };
        let right = StridedRows {
            first: self.first + mid,
            len: self.len - mid,
            ..self
        };
        (left, right)
    }
}

macro_rules! tuple_outputs {
    ($($name:ident $idx:tt $part:ident),+) => {
        impl<$($name: SplitOutputs),+> SplitOutputs for ($($name,)+) {
            fn len(&self) -> usize {
                let n = self.0.len();
                $(assert_eq!(self.$idx.len(), n, "pass outputs of unequal lengths");)+
                n
            }
            #[inline]
            fn split_at(self, mid: usize) -> (Self, Self) {
                $(let $part = self.$idx.split_at(mid);)+
                (($($part.0,)+), ($($part.1,)+))
            }
        }

        impl<$($name: ParticleOutputs),+> ParticleOutputs for ($($name,)+) {
            type Value = ($($name::Value,)+);
            #[inline(always)]
            fn set(&mut self, i: usize, value: Self::Value) {
                $(self.$idx.set(i, value.$idx);)+
            }
        }

        impl<$($name: ParticleState),+> ParticleState for ($($name,)+) {
            #[inline(always)]
            fn get(&self, i: usize) -> Self::Value {
                ($(self.$idx.get(i),)+)
            }
        }
    };
}
tuple_outputs!(A 0 a, B 1 b);
tuple_outputs!(A 0 a, B 1 b, C 2 c);
tuple_outputs!(A 0 a, B 1 b, C 2 c, D 3 d);

/// A GPU runtime that device kernels can run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceApi {
    /// wgpu: Vulkan, Metal, DX12, and Mesa's software Vulkan driver.
    Wgpu,
    /// NVIDIA CUDA.
    Cuda,
}

/// Which device a [`Backend::Device`] run uses: a runtime and an adapter index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DeviceSpec {
    /// The runtime.
    pub api: DeviceApi,
    /// Index of the adapter among that runtime's devices.
    pub index: usize,
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let api = match self.api {
            DeviceApi::Wgpu => "wgpu",
            DeviceApi::Cuda => "cuda",
        };
        write!(f, "{api}:{}", self.index)
    }
}

impl FromStr for DeviceSpec {
    type Err = BackendError;

    /// Parses `wgpu`, `cuda`, or either with `:INDEX`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BackendError::Parse(format!("device `{s}`: expected wgpu|cuda[:INDEX]"));
        let (api, index) = match s.trim().split_once(':') {
            Some((a, i)) => (a, i.parse::<usize>().map_err(|_| bad())?),
            None => (s.trim(), 0),
        };
        let api = match api.to_ascii_lowercase().as_str() {
            "wgpu" => DeviceApi::Wgpu,
            "cuda" => DeviceApi::Cuda,
            _ => return Err(bad()),
        };
        Ok(DeviceSpec { api, index })
    }
}

impl FromStr for CpuBackend {
    type Err = BackendError;

    /// Parses `serial`, `threads` (all cores) or `threads:N`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BackendError::Parse(format!("CPU backend `{s}`: expected serial|threads[:N]"));
        match s.trim().split_once(':') {
            None if s.trim() == "serial" => Ok(CpuBackend::Serial),
            None if s.trim() == "threads" => Ok(CpuBackend::default()),
            Some(("threads", n)) => n.parse().map(CpuBackend::threads).map_err(|_| bad()),
            _ => Err(bad()),
        }
    }
}

/// Errors of backend selection.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// A pass or component has no device kernel yet.
    #[error("not supported on the GPU backend: {0}")]
    NotOnDevice(String),
    /// A backend or device name could not be parsed.
    #[error("invalid {0}")]
    Parse(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pass whose floating-point result depends on summation order, so that any difference
    /// in how particles are computed across backends would show in the bits.
    fn pass(backend: CpuBackend, n: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<u32>) {
        let src: Vec<f64> = (0..n)
            .map(|i| ((i * 7919) % 1013) as f64 * 0.1 + 1e-3)
            .collect();
        let (mut x, mut y, mut z) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
        let mut tag = vec![0u32; n];
        let span = Vec3SpanMut::new(&mut x, &mut y, &mut z);
        backend.for_each_particle((span, &mut tag[..]), |i| {
            let xi = src[i];
            let mut s = [0.0f64; 3];
            for (j, &xj) in src.iter().enumerate() {
                if j != i {
                    let d = xj - xi;
                    let inv = 1.0 / (d * d + 0.01).sqrt();
                    s[0] += d * inv;
                    s[1] += inv;
                    s[2] += d * d * inv;
                }
            }
            (s, i as u32 ^ 0xa5a5)
        });
        (x, y, z, tag)
    }

    #[test]
    fn serial_and_threads_are_bitwise_identical() {
        let n = 1000;
        let serial = pass(CpuBackend::Serial, n);
        for backend in [
            CpuBackend::threads(1),
            CpuBackend::threads(2),
            CpuBackend::threads(3),
            CpuBackend::default(),
        ] {
            let other = pass(backend, n);
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&serial.0), bits(&other.0), "{backend}");
            assert_eq!(bits(&serial.1), bits(&other.1), "{backend}");
            assert_eq!(bits(&serial.2), bits(&other.2), "{backend}");
            assert_eq!(serial.3, other.3, "{backend}");
        }
        // And it computed something: particle 0's sum of 1/r is positive and finite.
        assert!(serial.1[0] > 0.0 && serial.1[0].is_finite());
        assert_eq!(serial.3[5], 5 ^ 0xa5a5);
    }

    #[test]
    fn blocks_are_the_same_on_every_backend() {
        let n = 1000;
        let record = |backend: CpuBackend| {
            let mut starts = vec![usize::MAX; n];
            backend.for_each_block(&mut starts[..], 64, |start, mut out| {
                assert_eq!(start % 64, 0);
                for k in 0..out.len() {
                    out.set(k, start);
                }
            });
            starts
        };
        let serial = record(CpuBackend::Serial);
        assert_eq!(serial[999], 960);
        assert_eq!(serial[63], 0);
        assert_eq!(record(CpuBackend::threads(2)), serial);
        assert_eq!(record(CpuBackend::threads(3)), serial);
    }

    #[test]
    fn threads_backend_really_uses_its_pool() {
        let mut names = vec![String::new(); 4096];
        CpuBackend::threads(2).for_each_particle(&mut names[..], |_| {
            std::thread::current().name().unwrap_or("").to_string()
        });
        assert!(
            names.iter().all(|n| n.starts_with("mote-2-")),
            "{:?}",
            names[0]
        );
        assert_eq!(CpuBackend::threads(2).thread_count(), 2);
        assert_eq!(CpuBackend::Serial.thread_count(), 1);
    }

    #[test]
    fn rows_split_between_particles() {
        let offsets = [0usize, 2, 2, 5, 6];
        let mut data = vec![0u32; 6];
        CpuBackend::threads(2).for_each_block(
            Rows::new(&mut data, &offsets),
            1,
            |start, mut rows| {
                for k in 0..rows.len() {
                    let row = rows.row_mut(k);
                    for (j, v) in row.iter_mut().enumerate() {
                        *v = (10 * (start + k) + j) as u32;
                    }
                }
            },
        );
        assert_eq!(data, vec![0, 1, 20, 21, 22, 30]);
    }

    #[test]
    fn strided_rows_give_each_particle_its_slots() {
        let (n, slots) = (1000, 3);
        let mut data = vec![0usize; n * slots];
        CpuBackend::threads(2).for_each_block(
            StridedRows::new(&mut data, n, slots),
            7,
            |start, mut rows| {
                for i in 0..rows.len() {
                    for k in 0..slots {
                        rows.set(i, k, 10 * (start + i) + k);
                    }
                }
            },
        );
        for k in 0..slots {
            for i in 0..n {
                assert_eq!(data[k * n + i], 10 * i + k);
            }
        }
    }

    #[test]
    fn update_each_reads_current_values() {
        let n = 1000;
        let v: Vec<f64> = (0..n).map(|i| i as f64).collect();
        let (mut x, mut y, mut z) = (vec![1.0; n], vec![2.0; n], vec![3.0; n]);
        let mut m = vec![0.5f32; n];
        let span = Vec3SpanMut::new(&mut x, &mut y, &mut z);
        CpuBackend::threads(2).update_each((span, &mut m[..]), |i, (p, mi)| {
            ([p[0] + v[i], p[1] * v[i], p[2]], mi * 2.0)
        });
        assert_eq!((x[999], y[999], z[999], m[999]), (1000.0, 1998.0, 3.0, 1.0));
    }

    #[test]
    fn reductions_are_deterministic_across_thread_counts() {
        let v: Vec<f64> = (0..100_003).map(|i| 1.0 / (1.0 + i as f64)).collect();
        let sum =
            |b: CpuBackend| b.map_reduce(v.len(), 1000, |r| v[r].iter().sum::<f64>(), |a, b| a + b);
        let s = sum(CpuBackend::Serial).unwrap();
        assert_eq!(sum(CpuBackend::threads(2)).unwrap().to_bits(), s.to_bits());
        assert_eq!(sum(CpuBackend::threads(3)).unwrap().to_bits(), s.to_bits());
        // The harmonic number H_100003 = ln(100003) + gamma + 1/(2n) - ...
        let h = (100_003f64).ln() + 0.577_215_664_901_532_9 + 0.5 / 100_003.0;
        assert!((s - h).abs() < 1e-9, "{s} vs {h}");
        assert_eq!(
            CpuBackend::Serial.map_reduce(0, 8, |_| 1, |a, b| a + b),
            None
        );
    }

    #[test]
    fn device_backend_refuses_cpu_passes_by_name() {
        let dev = Backend::Device("cuda:1".parse().unwrap());
        let err = dev.cpu("MOOD order reduction").unwrap_err();
        assert_eq!(
            err.to_string(),
            "not supported on the GPU backend: MOOD order reduction"
        );
        assert_eq!(
            Backend::Cpu(CpuBackend::Serial).cpu("x"),
            Ok(CpuBackend::Serial)
        );
    }

    #[test]
    fn parsing() {
        assert_eq!(
            "cuda:1".parse::<DeviceSpec>(),
            Ok(DeviceSpec {
                api: DeviceApi::Cuda,
                index: 1
            })
        );
        assert_eq!("wgpu".parse::<DeviceSpec>().unwrap().to_string(), "wgpu:0");
        assert!("metal".parse::<DeviceSpec>().is_err());
        assert!("cuda:x".parse::<DeviceSpec>().is_err());
        assert_eq!("serial".parse(), Ok(CpuBackend::Serial));
        assert_eq!("threads:3".parse(), Ok(CpuBackend::Threads { threads: 3 }));
        assert_eq!("threads".parse(), Ok(CpuBackend::default()));
        assert!("threads:".parse::<CpuBackend>().is_err());
    }

    #[test]
    #[should_panic(expected = "unequal lengths")]
    fn unequal_outputs_are_refused() {
        let (mut a, mut b) = (vec![0.0; 3], vec![0.0; 4]);
        CpuBackend::Serial.for_each_particle((&mut a[..], &mut b[..]), |_| (1.0, 1.0));
    }
}
