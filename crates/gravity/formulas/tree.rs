//! The tree's pointwise formulas, written once for the CPU and the device (the formula dialect
//! of `mote-formula`): the opening test of a node for a group of targets, and the terms an
//! accepted node adds to a target's acceleration and potential. The walk around them (stack,
//! lists) and the monopole sums (the direct solver's kernels on the CPU) are the backends' own.

/// The squared gap between `[lo, hi]` and `c` along one axis (0 where `c` lies inside).
pub fn gap2<F: Float>(lo: F, hi: F, c: F) -> F {
    let d = F::max(F::max(lo - c, c - hi), F::new(0.0));
    d * d
}

/// Whether a node with centre of mass `(cx, cy, cz)` and squared opening radius `open2`
/// (`(s / theta + delta)^2`) is accepted for the targets in the box `lo`..`hi`: the box's
/// nearest point lies beyond the opening radius.
pub fn accepted<F: Float>(
    lo_x: F,
    lo_y: F,
    lo_z: F,
    hi_x: F,
    hi_y: F,
    hi_z: F,
    cx: F,
    cy: F,
    cz: F,
    open2: F,
) -> Mask<F> {
    let d2 = gap2::<F>(lo_x, hi_x, cx) + gap2::<F>(lo_y, hi_y, cy) + gap2::<F>(lo_z, hi_z, cz);
    gt::<F>(d2, open2)
}

/// `Q d` for the traceless quadrupole `xx, xy, xz, yy, yz` (`zz = -xx - yy`).
pub fn quadrupole_times<F: Float>(
    xx: F,
    xy: F,
    xz: F,
    yy: F,
    yz: F,
    dx: F,
    dy: F,
    dz: F,
) -> (F, F, F) {
    let zz = -(xx + yy);
    (
        xx * dx + xy * dy + xz * dz,
        xy * dx + yy * dy + yz * dz,
        xz * dx + yz * dy + zz * dz,
    )
}

/// The quadrupole's acceleration beyond the monopole, `-Q d / s^5 + 5/2 (d Q d) d / s^7`, at a
/// target `d` from a node's centre of mass (`d` = centre of mass - target, `s^2 = |d|^2 +
/// eps^2`, never 0 for an accepted node).
///
/// The node's potential about its centre of mass is `-M / r - (r Q r) / (2 r^5)`; this is the
/// second term's gradient, softened as the monopole is (`r^2` -> `r^2 + eps^2`).
pub fn quadrupole_acceleration<F: Float>(
    dx: F,
    dy: F,
    dz: F,
    eps2: F,
    xx: F,
    xy: F,
    xz: F,
    yy: F,
    yz: F,
) -> (F, F, F) {
    let (inv, qx, qy, qz) = quadrupole_parts::<F>(dx, dy, dz, eps2, xx, xy, xz, yy, yz);
    let inv2 = inv * inv;
    let inv5 = inv2 * inv * inv2;
    let f = F::new(2.5) * (dx * qx + dy * qy + dz * qz) * inv5 * inv2;
    (f * dx - inv5 * qx, f * dy - inv5 * qy, f * dz - inv5 * qz)
}

/// The quadrupole's share of `-phi` at a target `d` from a node's centre of mass:
/// `(d Q d) / (2 s^5)`.
pub fn quadrupole_potential<F: Float>(
    dx: F,
    dy: F,
    dz: F,
    eps2: F,
    xx: F,
    xy: F,
    xz: F,
    yy: F,
    yz: F,
) -> F {
    let (inv, qx, qy, qz) = quadrupole_parts::<F>(dx, dy, dz, eps2, xx, xy, xz, yy, yz);
    let inv2 = inv * inv;
    F::new(0.5) * (dx * qx + dy * qy + dz * qz) * inv2 * inv2 * inv
}

/// `1 / s` and `Q d`: what both quadrupole terms start from.
pub fn quadrupole_parts<F: Float>(
    dx: F,
    dy: F,
    dz: F,
    eps2: F,
    xx: F,
    xy: F,
    xz: F,
    yy: F,
    yz: F,
) -> (F, F, F, F) {
    let inv = F::new(1.0) / F::sqrt(dx * dx + dy * dy + dz * dz + eps2);
    let (qx, qy, qz) = quadrupole_times::<F>(xx, xy, xz, yy, yz, dx, dy, dz);
    (inv, qx, qy, qz)
}
