//! Device building blocks shared by the passes: word copies, fills, fingerprints, an exclusive
//! prefix sum, and reductions (maximum of counts, bounding box of positions).
//!
//! Every kernel here indexes one element per unit over a one- or two-dimensional grid of cubes
//! (see [`grid`]), checks its index against the element count, and writes only its own entries;
//! the reductions combine per-cube partial results in shared memory (every unit reaches every
//! barrier) and finish with one atomic per cube or with a further launch. Integer reductions are
//! exact and associative, so every result is independent of the launch order.

use cubecl::prelude::*;
use cubecl::server::Handle;

use crate::array::DeviceArray;
use crate::device::Gpu;
use crate::error::GpuError;
use crate::gravity::GpuFloat;
use crate::launch::launch;

/// Workgroup of the building blocks that run without a [`Gpu`] at hand (buffer copies).
const COPY_WORKGROUP: u32 = 256;

/// Cubes of `workgroup` units covering `n` elements: along x up to 65535 cubes (the smallest
/// per-dimension limit of the APIs), then rows of those along y. Kernels use the linear
/// `ABSOLUTE_POS` and check it against `n`.
pub(crate) fn grid(n: usize, workgroup: u32) -> (CubeCount, CubeDim) {
    let cubes = n.div_ceil(workgroup as usize).max(1);
    let x = cubes.min(65_535);
    let y = cubes.div_ceil(x);
    (
        CubeCount::Static(x as u32, y as u32, 1),
        CubeDim::new_1d(workgroup),
    )
}

/// Number of cubes [`grid`] launches for `n` elements (the length of per-cube partials).
pub(crate) fn cubes(n: usize, workgroup: u32) -> usize {
    let c = n.div_ceil(workgroup as usize).max(1);
    let x = c.min(65_535);
    x * c.div_ceil(x)
}

#[cube(launch_unchecked)]
fn copy_words_kernel(src: &Array<u32>, dst: &mut Array<u32>, words: u32) {
    let i = ABSOLUTE_POS;
    if i < words as usize {
        dst[i] = src[i];
    }
}

#[cube(launch_unchecked)]
fn fill_u32_kernel(dst: &mut Array<u32>, n: u32, value: u32) {
    let i = ABSOLUTE_POS;
    if i < n as usize {
        dst[i] = value;
    }
}

#[cube(launch_unchecked)]
fn set_word_kernel(dst: &mut Array<u32>, index: u32, value: u32) {
    if ABSOLUTE_POS == 0 {
        dst[index as usize] = value;
    }
}

/// Per cube: the sum of the words and the sum of `word * (2 k + 1)` (k the word's index), both
/// modulo 2^32, into `partial[2 c]` and `partial[2 c + 1]`.
#[cube(launch_unchecked)]
fn fingerprint_kernel(
    words: &Array<u32>,
    n: u32,
    partial: &mut Array<u32>,
    #[comptime] block: usize,
) {
    let unit = UNIT_POS as usize;
    let i = ABSOLUTE_POS;
    let mut a = 0u32;
    let mut b = 0u32;
    if i < n as usize {
        let w = words[i];
        a = w;
        b = w * (2u32 * (i as u32) + 1u32);
    }
    let mut sa = SharedMemory::<u32>::new(block);
    let mut sb = SharedMemory::<u32>::new(block);
    sa[unit] = a;
    sb[unit] = b;
    sync_cube();
    let mut s = (block / 2).runtime();
    while s > 0 {
        if unit < s {
            sa[unit] = sa[unit] + sa[unit + s];
            sb[unit] = sb[unit] + sb[unit + s];
        }
        sync_cube();
        s /= 2;
    }
    if unit == 0 {
        partial[2 * CUBE_POS] = sa[0];
        partial[2 * CUBE_POS + 1] = sb[0];
    }
}

/// Exclusive prefix sum of one cube's `block` elements of `input` (elements at or past `n` count
/// as 0) into `out` (`m` entries), and the cube's total into `sums[cube]`.
#[cube(launch_unchecked)]
fn scan_block_kernel(
    input: &Array<u32>,
    n: u32,
    out: &mut Array<u32>,
    m: u32,
    sums: &mut Array<u32>,
    #[comptime] block: usize,
) {
    let unit = UNIT_POS as usize;
    let i = CUBE_POS * block + unit;
    let mut v = 0u32;
    if i < n as usize {
        v = input[i];
    }
    let mut sh = SharedMemory::<u32>::new(block);
    sh[unit] = v;
    sync_cube();
    // Hillis-Steele: read, wait, add, wait.
    let mut offset = 1usize.runtime();
    while offset < block {
        let mut t = 0u32;
        if unit >= offset {
            t = sh[unit - offset];
        }
        sync_cube();
        sh[unit] = sh[unit] + t;
        sync_cube();
        offset *= 2;
    }
    if i < m as usize {
        out[i] = sh[unit] - v;
    }
    if unit == block - 1 {
        sums[CUBE_POS] = sh[unit];
    }
}

#[cube(launch_unchecked)]
fn add_offsets_kernel(
    out: &mut Array<u32>,
    m: u32,
    offsets: &Array<u32>,
    #[comptime] block: usize,
) {
    let i = ABSOLUTE_POS;
    if i < m as usize {
        out[i] = out[i] + offsets[i / block];
    }
}

/// The largest of `values[..n]`, combined into `out[0]` (which must start at 0).
#[cube(launch_unchecked)]
fn max_u32_kernel(
    values: &Array<u32>,
    n: u32,
    out: &mut Array<Atomic<u32>>,
    #[comptime] block: usize,
) {
    let unit = UNIT_POS as usize;
    let i = ABSOLUTE_POS;
    let mut v = 0u32;
    if i < n as usize {
        v = values[i];
    }
    let mut sh = SharedMemory::<u32>::new(block);
    sh[unit] = v;
    sync_cube();
    let mut s = (block / 2).runtime();
    while s > 0 {
        if unit < s {
            sh[unit] = u32::max(sh[unit], sh[unit + s]);
        }
        sync_cube();
        s /= 2;
    }
    if unit == 0 {
        out[0].fetch_max(sh[0]);
    }
}

/// Per cube: the smallest of `lo[..n]` and the largest of `hi[..n]` (pass the same array twice
/// for the first level).
#[cube(launch_unchecked)]
fn min_max_kernel<F: Float>(
    lo: &Array<F>,
    hi: &Array<F>,
    n: u32,
    lo_out: &mut Array<F>,
    hi_out: &mut Array<F>,
    #[comptime] block: usize,
) {
    let unit = UNIT_POS as usize;
    let i = ABSOLUTE_POS;
    let last = n as usize - 1;
    let ii = select(i < n as usize, i, last);
    let mut sl = SharedMemory::<F>::new(block);
    let mut sh = SharedMemory::<F>::new(block);
    sl[unit] = lo[ii];
    sh[unit] = hi[ii];
    sync_cube();
    let mut s = (block / 2).runtime();
    while s > 0 {
        if unit < s {
            sl[unit] = F::min(sl[unit], sl[unit + s]);
            sh[unit] = F::max(sh[unit], sh[unit + s]);
        }
        sync_cube();
        s /= 2;
    }
    if unit == 0 {
        lo_out[CUBE_POS] = sl[0];
        hi_out[CUBE_POS] = sh[0];
    }
}

/// Copies the first `words` words of `src` into `dst` on the device.
pub(crate) fn copy_words<Rt: Runtime>(
    client: &ComputeClient<Rt>,
    src: &Handle,
    dst: &Handle,
    words: usize,
) {
    let (count, dim) = grid(words, COPY_WORKGROUP);
    // SAFETY: both handles hold at least `words` words (the caller's allocation sizes), and
    // each unit writes only its own word.
    unsafe {
        copy_words_kernel::launch_unchecked::<Rt>(
            client,
            count,
            dim,
            ArrayArg::from_raw_parts(src.clone(), words),
            ArrayArg::from_raw_parts(dst.clone(), words),
            words as u32,
        )
    }
}

/// The fingerprint of `bytes` as [`Gpu::fingerprint`] computes it on the device: the sum of the
/// little-endian 32-bit words and the sum of `word * (2 k + 1)`, both modulo 2^32, as the high
/// and low halves. Any change of a single word changes it (the weights are odd, hence
/// invertible modulo 2^32).
pub fn host_fingerprint(bytes: &[u8]) -> u64 {
    let (mut a, mut b) = (0u32, 0u32);
    for (k, w) in bytes.chunks_exact(4).enumerate() {
        let w = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        a = a.wrapping_add(w);
        b = b.wrapping_add(w.wrapping_mul((2 * k as u32).wrapping_add(1)));
    }
    ((a as u64) << 32) | b as u64
}

impl Gpu {
    /// Checks `array` and makes sure 32-bit word counts fit the kernels' indices.
    fn words_of<T: CubeElement>(&self, array: &DeviceArray<T>) -> Result<usize, GpuError> {
        self.check(array, array.len())?;
        let words = array.words();
        if words > u32::MAX as usize {
            return Err(GpuError::Length {
                array: array.name().to_string(),
                len: array.len(),
                expected: u32::MAX as usize * 4 / std::mem::size_of::<T>(),
            });
        }
        Ok(words)
    }

    /// The fingerprint of `array`'s contents, computed on the device (only per-workgroup
    /// partial sums come back); equal to [`host_fingerprint`] of the same bytes.
    pub fn fingerprint<T: CubeElement>(&self, array: &DeviceArray<T>) -> Result<u64, GpuError> {
        let words = self.words_of(array)?;
        let wg = self.workgroup();
        let parts = cubes(words, wg);
        let partial = self.output::<u32>("fingerprint_partials", 2 * parts);
        // `words` words are read, one partial pair per cube written by unit 0.
        launch!(
            self,
            words,
            fingerprint_kernel(array.words_arg(), words as u32, partial.arg(), wg as usize)
        );
        self.sync()?;
        let p = self.download(&partial)?;
        let (mut a, mut b) = (0u32, 0u32);
        for pair in p.chunks_exact(2) {
            a = a.wrapping_add(pair[0]);
            b = b.wrapping_add(pair[1]);
        }
        Ok(((a as u64) << 32) | b as u64)
    }

    /// Refuses (with [`GpuError::Fingerprint`]) unless `array` holds exactly `host`: the check
    /// after a reservation moved device data, before a run is allowed to start on it.
    pub fn verify<T: CubeElement>(
        &self,
        array: &DeviceArray<T>,
        host: &[T],
    ) -> Result<(), GpuError> {
        self.check(array, host.len())?;
        let device = self.fingerprint(array)?;
        let expected = host_fingerprint(T::as_bytes(host));
        if device != expected {
            return Err(GpuError::Fingerprint {
                array: array.name().to_string(),
                device,
                host: expected,
            });
        }
        Ok(())
    }

    /// Overwrites element `index` of `array` with `value` on the device (diagnostics, and the
    /// tests that corrupt a buffer on purpose to see the fingerprint check refuse).
    pub fn write_element<T: CubeElement>(
        &self,
        array: &DeviceArray<T>,
        index: usize,
        value: T,
    ) -> Result<(), GpuError> {
        let words = self.words_of(array)?;
        if index >= array.len() {
            return Err(GpuError::Length {
                array: array.name().to_string(),
                len: array.len(),
                expected: index + 1,
            });
        }
        let per = std::mem::size_of::<T>() / 4;
        let bytes = T::as_bytes(std::slice::from_ref(&value));
        for (k, w) in bytes.chunks_exact(4).enumerate() {
            let w = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
            let at = (index * per + k) as u32;
            // `at` is below the array's word count (checked above); unit 0 writes it.
            launch!(self, 1, set_word_kernel(array.words_arg(), at, w));
        }
        debug_assert!(words >= per);
        self.sync()
    }

    /// Copies `src` into `dst` (of the same length) on the device.
    pub(crate) fn copy<T: CubeElement>(
        &self,
        src: &DeviceArray<T>,
        dst: &DeviceArray<T>,
    ) -> Result<(), GpuError> {
        self.check(src, src.len())?;
        self.check(dst, src.len())?;
        let words = self.words_of(src)?;
        if words > 0 {
            self.client.copy_words(src.handle(), dst.handle(), words);
        }
        Ok(())
    }

    /// Sets the first `n` elements of `array` to `value`.
    pub(crate) fn fill_u32(&self, array: &DeviceArray<u32>, value: u32) {
        let n = array.len();
        // Each unit writes its own element below the length.
        launch!(self, n, fill_u32_kernel(array.arg(), n as u32, value));
    }

    /// Exclusive prefix sum of `input` into `out` (one entry longer: `out[n]` is the total),
    /// entirely on the device: each workgroup scans its block, the block totals are scanned the
    /// same way (recursively), and added back.
    pub(crate) fn exclusive_scan(
        &self,
        input: &DeviceArray<u32>,
        out: &DeviceArray<u32>,
    ) -> Result<(), GpuError> {
        let n = input.len();
        self.check(out, n + 1)?;
        let wg = self.workgroup();
        let m = n + 1;
        let blocks = cubes(m, wg);
        let sums = self.output::<u32>("scan_block_sums", blocks);
        // Reads below `n`, writes below `n + 1` and one sum per cube.
        launch!(
            self,
            m,
            scan_block_kernel(
                input.arg(),
                n as u32,
                out.arg(),
                m as u32,
                sums.arg(),
                wg as usize
            )
        );
        if blocks > 1 {
            let offsets = self.output::<u32>("scan_block_offsets", blocks + 1);
            self.exclusive_scan(&sums, &offsets)?;
            // Each unit updates its own entry below the length.
            launch!(
                self,
                m,
                add_offsets_kernel(out.arg(), m as u32, offsets.arg(), wg as usize)
            );
        }
        Ok(())
    }

    /// The largest element of `values` into `out[0]` (the rest of `out` is zeroed), on the
    /// device.
    pub(crate) fn max_u32(
        &self,
        values: &DeviceArray<u32>,
        out: &DeviceArray<u32>,
    ) -> Result<(), GpuError> {
        self.check(values, values.len())?;
        self.check(out, out.len().max(1))?;
        self.fill_u32(out, 0);
        let wg = self.workgroup();
        // Reads below the length; one atomic per cube on `out[0]`.
        launch!(
            self,
            values.len(),
            max_u32_kernel(values.arg(), values.len() as u32, out.arg(), wg as usize)
        );
        Ok(())
    }

    /// The smallest and largest element of `x` (not empty), reduced on the device level by level
    /// until one cube's result is left; only those two numbers come back.
    pub(crate) fn min_max<F: GpuFloat>(&self, x: &DeviceArray<F>) -> Result<(F, F), GpuError> {
        self.check(x, x.len())?;
        assert!(!x.is_empty(), "min_max of an empty array");
        let wg = self.workgroup();
        let level = |lo: &DeviceArray<F>, hi: &DeviceArray<F>| {
            let parts = cubes(lo.len(), wg);
            let out = (
                self.output::<F>("min_partials", parts),
                self.output::<F>("max_partials", parts),
            );
            // Reads below the input length (indices clamped), one result per cube.
            launch!(
                self,
                lo.len(),
                min_max_kernel::<F>(
                    lo.arg(),
                    hi.arg(),
                    lo.len() as u32,
                    out.0.arg(),
                    out.1.arg(),
                    wg as usize
                )
            );
            out
        };
        let (mut lo, mut hi) = level(x, x);
        while lo.len() > 1 {
            let next = level(&lo, &hi);
            (lo, hi) = next;
        }
        self.sync()?;
        Ok((self.download(&lo)?[0], self.download(&hi)?[0]))
    }
}
