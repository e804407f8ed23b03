//! Morton (Z-order) keys: the bits of `D` quantised coordinates interleaved, most significant
//! first, so that sorting by key orders points along a space-filling curve and every key prefix
//! of `D * l` bits names one cell of a `2^l`-per-axis grid.
//!
//! Written once for the meshless clouds' reordering (`Cloud::reorder_morton`) and the gravity
//! tree's construction.

/// The key of the quantised coordinates `q` (each below `2^bits`, `D * bits <= 64`): bit `b`
/// of axis `a` lands at position `D * b + (D - 1 - a)`, so axis 0 is the most significant of
/// each group.
///
/// ```
/// use mote_core::morton::interleave;
///
/// assert_eq!(interleave([0b1, 0b0, 0b0], 1), 0b100);
/// assert_eq!(interleave([0b10, 0b01], 2), 0b1001);
/// ```
#[inline]
pub fn interleave<const D: usize>(q: [u64; D], bits: u32) -> u64 {
    debug_assert!(D as u32 * bits <= 64, "{D} x {bits} bits do not fit a key");
    if D == 3 && bits <= 21 {
        // Spread each coordinate's bits three apart with masks (the same key as the loop).
        return (spread3(q[0]) << 2) | (spread3(q[1]) << 1) | spread3(q[2 % D]);
    }
    let mut key = 0u64;
    for b in (0..bits).rev() {
        for qa in q.iter() {
            key = (key << 1) | ((qa >> b) & 1);
        }
    }
    key
}

/// The low 21 bits of `v` moved to every third bit.
#[inline]
fn spread3(v: u64) -> u64 {
    let mut x = v & 0x1f_ffff;
    x = (x | (x << 32)) & 0x001f_0000_0000_ffff;
    x = (x | (x << 16)) & 0x001f_0000_ff00_00ff;
    x = (x | (x << 8)) & 0x100f_00f0_0f00_f00f;
    x = (x | (x << 4)) & 0x10c3_0c30_c30c_30c3;
    x = (x | (x << 2)) & 0x1249_2492_4924_9249;
    x
}

/// Cell coordinate on a grid of `2^bits` cells over `[lo, lo + side)`: `floor((x - lo) / side *
/// 2^bits)`, clamped into the grid (so the upper face and rounding land in the last cell).
#[inline]
pub fn quantise(x: f64, lo: f64, side: f64, bits: u32) -> u64 {
    let cells = (1u64 << bits) as f64;
    let t = ((x - lo) / side * cells).floor();
    if t >= cells {
        (1u64 << bits) - 1
    } else if t > 0.0 {
        t as u64
    } else {
        0
    }
}

/// The cube the keys of the points in the box `lo..=hi` are quantised over: its lower corner and
/// side. It changes only in steps while the points move: the side is the smallest power of two
/// at least the box's largest extent (1 for a single point), the corner lies on a grid of an
/// eighth of the side (doubled where the box would not fit). The gravity tree and the ranks'
/// Morton ranges (`decomposition`) share it, so a rank's range of keys stays a contiguous run
/// of the tree's order from one step to the next. A box with a non-finite extent comes back as
/// it is.
pub fn stable_cube(lo: [f64; 3], hi: [f64; 3]) -> ([f64; 3], f64) {
    let extent = (0..3).map(|a| hi[a] - lo[a]).fold(0.0, f64::max);
    if !extent.is_finite() {
        return (lo, extent);
    }
    let mut side = if extent > 0.0 {
        2f64.powi(extent.log2().ceil() as i32)
    } else {
        1.0
    };
    // `log2` may round either way: the smallest power of two at least `extent`.
    while side < extent {
        side *= 2.0;
    }
    while extent > 0.0 && side * 0.5 >= extent {
        side *= 0.5;
    }
    loop {
        let grid = side / 8.0;
        let corner = lo.map(|l| (l / grid).floor() * grid);
        if (0..3).all(|a| corner[a] + side >= hi[a]) {
            return (corner, side);
        }
        side *= 2.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn by_loop<const D: usize>(q: [u64; D], bits: u32) -> u64 {
        let mut key = 0u64;
        for b in (0..bits).rev() {
            for qa in q.iter() {
                key = (key << 1) | ((qa >> b) & 1);
            }
        }
        key
    }

    #[test]
    fn spread_bits_equal_the_loop() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..10_000 {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let q = [s >> 43, (s >> 22) & 0x1f_ffff, s & 0x1f_ffff];
            assert_eq!(interleave(q, 21), by_loop(q, 21), "{q:?}");
        }
        assert_eq!(interleave([0x1f_ffff; 3], 21), (1u64 << 63) - 1);
    }

    #[test]
    fn the_stable_cube_holds_the_box_and_moves_in_steps() {
        let (c, s) = stable_cube([0.1, -0.3, 0.0], [0.9, 0.2, 0.5]);
        assert_eq!(s, 1.0);
        assert_eq!(c, [0.0, -0.375, 0.0]);
        // A box that grows or moves a little keeps the cube.
        assert_eq!(stable_cube([0.11, -0.31, 0.01], [0.91, 0.21, 0.51]), (c, s));
        for (lo, hi) in [
            ([-3.7, 2.0, 5.0], [10.2, 2.5, 5.1]),
            ([1e-3, 1e-3, 1e-3], [1e-3, 1e-3, 1e-3]),
            ([-1e6, 0.0, 0.0], [1e6, 1.0, 1.0]),
            ([0.875, 0.0, 0.0], [1.125, 0.0, 0.0]),
        ] {
            let (c, s) = stable_cube(lo, hi);
            assert_eq!(s.log2().fract(), 0.0, "a power of two: {s}");
            for a in 0..3 {
                assert!(
                    c[a] <= lo[a] && hi[a] <= c[a] + s,
                    "{lo:?} {hi:?} in {c:?} + {s}"
                );
            }
        }
    }

    #[test]
    fn quantise_clamps_into_the_grid() {
        assert_eq!(quantise(1.0, 0.0, 1.0, 3), 7);
        assert_eq!(quantise(-1e-300, 0.0, 1.0, 3), 0);
        assert_eq!(quantise(0.5, 0.0, 1.0, 3), 4);
        assert_eq!(quantise(f64::NAN, 0.0, 1.0, 3), 0);
    }
}
