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
    fn quantise_clamps_into_the_grid() {
        assert_eq!(quantise(1.0, 0.0, 1.0, 3), 7);
        assert_eq!(quantise(-1e-300, 0.0, 1.0, 3), 0);
        assert_eq!(quantise(0.5, 0.0, 1.0, 3), 4);
        assert_eq!(quantise(f64::NAN, 0.0, 1.0, 3), 0);
    }
}
