//! The Euler equations' pointwise formulas, written once for the CPU and the device (the
//! formula dialect of `mote-formula`): primitive variables with the positivity floors, the flux
//! along a normal, the wave speeds, admissibility, and the HLLC Riemann solver.
//!
//! `params` is `[gamma, gamma - 1, density floor, pressure floor]` in the working precision
//! (`Euler::params` on the CPU, the device equation's parameter array). States are the `dim + 2`
//! conserved variables `(rho, rho u_1 .. rho u_dim, E)`. Floor counts are values of `F` (0, 1,
//! 2 per state) so that they travel in lanes like everything else.

/// Density, pressure and the density's reciprocal of the state `u`, the velocity (the momentum
/// times the reciprocal) into `vel`, and how many floors acted (0 to 2). A density or pressure
/// below its floor, or NaN, is raised to the floor.
pub fn euler_primitive<F: Float>(
    u: &Array<F>,
    params: &Array<F>,
    vel: &mut Array<F>,
    #[comptime] dim: usize,
) -> (F, F, F, F) {
    let r = u[0];
    let low_rho = or(lt::<F>(r, params[2]), is_nan::<F>(r));
    let rho = select(low_rho, params[2], r);
    let inv = F::new(1.0) / rho;
    let mut kinetic = F::new(0.0);
    #[unroll]
    for d in 0..dim {
        vel[d] = u[1 + d] * inv;
        kinetic += u[1 + d] * vel[d];
    }
    let q = params[1] * (u[dim + 1] - F::new(0.5) * kinetic);
    let low_p = or(lt::<F>(q, params[3]), is_nan::<F>(q));
    let p = select(low_p, params[3], q);
    let floors =
        select(low_rho, F::new(1.0), F::new(0.0)) + select(low_p, F::new(1.0), F::new(0.0));
    (rho, p, inv, floors)
}

/// `F(u) . nrm` into `out` from the state `u`, its density `rho`, pressure `p` and velocity
/// `vel` (from `euler_primitive`).
pub fn euler_flux_of_primitive<F: Float>(
    u: &Array<F>,
    rho: F,
    p: F,
    vel: &Array<F>,
    nrm: &Array<F>,
    out: &mut Array<F>,
    #[comptime] dim: usize,
) {
    let mut vn = F::new(0.0);
    #[unroll]
    for d in 0..dim {
        vn += vel[d] * nrm[d];
    }
    out[0] = rho * vn;
    #[unroll]
    for d in 0..dim {
        out[1 + d] = u[1 + d] * vn + p * nrm[d];
    }
    out[dim + 1] = (u[dim + 1] + p) * vn;
}

/// `F(u) . nrm` into `out` (`vel`: scratch for the velocity); the number of floors that acted.
pub fn euler_flux<F: Float>(
    u: &Array<F>,
    nrm: &Array<F>,
    params: &Array<F>,
    vel: &mut Array<F>,
    out: &mut Array<F>,
    #[comptime] dim: usize,
) -> F {
    let (rho, p, _inv, floors) = euler_primitive::<F>(u, params, vel, dim);
    euler_flux_of_primitive::<F>(u, rho, p, vel, nrm, out, dim);
    floors
}

/// The normal velocity `v . nrm` and the sound speed times `|nrm|`,
/// `sqrt(gamma p inv nn)` (one square root), from the pressure, the density's reciprocal and
/// the velocity.
pub fn euler_speeds_of_primitive<F: Float>(
    p: F,
    inv: F,
    vel: &Array<F>,
    nrm: &Array<F>,
    params: &Array<F>,
    #[comptime] dim: usize,
) -> (F, F) {
    let mut vn = F::new(0.0);
    let mut nn = F::new(0.0);
    #[unroll]
    for d in 0..dim {
        vn += vel[d] * nrm[d];
        nn += nrm[d] * nrm[d];
    }
    (vn, F::sqrt(params[0] * p * inv * nn))
}

/// The normal velocity and the sound speed times `|nrm|` of the state `u` (`vel`: scratch),
/// and the number of floors that acted. The wave speeds along `nrm` are `vn - c`, `vn`,
/// `vn + c`; the largest in magnitude `|vn| + c`.
pub fn euler_speeds<F: Float>(
    u: &Array<F>,
    nrm: &Array<F>,
    params: &Array<F>,
    vel: &mut Array<F>,
    #[comptime] dim: usize,
) -> (F, F, F) {
    let (_rho, p, inv, floors) = euler_primitive::<F>(u, params, vel, dim);
    let (vn, c) = euler_speeds_of_primitive::<F>(p, inv, vel, nrm, params, dim);
    (vn, c, floors)
}

/// Whether the state `u` is physically admissible: finite, positive density and pressure (the
/// floors do not count: a state that needs them is not admissible). The pressure test is
/// multiplied through by the density, `rho E - |m|^2 / 2 > 0`: no division.
pub fn euler_admissible<F: Float>(u: &Array<F>, #[comptime] dim: usize) -> Mask<F> {
    let mut ok = finite::<F>(u[0]);
    #[unroll]
    for v in 1..dim + 2 {
        ok = and(ok, finite::<F>(u[v]));
    }
    let mut kinetic = F::new(0.0);
    #[unroll]
    for d in 0..dim {
        kinetic += u[1 + d] * u[1 + d];
    }
    let zero = F::new(0.0);
    let positive = and(
        gt::<F>(u[0], zero),
        gt::<F>(u[0] * u[dim + 1] - F::new(0.5) * kinetic, zero),
    );
    and(ok, positive)
}

/// HLLC (Toro, Spence and Speares) through a face with (non-unit) normal `nrm`: the flux of
/// the Riemann problem between `ul` and `ur` in the normal direction with the contact
/// restored, times `|nrm|`, into `out`; the number of floors that acted on the two states.
/// Wave-speed estimates `S_L = min(u_L - c_L, u_R - c_R)`, `S_R = max(u_L + c_L, u_R + c_R)`
/// (Davis). Consistent (`hllc(u, u, n) = F(u) . n`) and antisymmetric; a zero normal gives a
/// zero flux (and counts no floors).
///
/// Every branch's flux is formed and selected (no branch on the state), so the CPU's lanes
/// vectorise it. Scratch: `e` the unit normal, `vl`, `vr` the two velocities (`dim` entries
/// each).
pub fn hllc<F: Float>(
    ul: &Array<F>,
    ur: &Array<F>,
    nrm: &Array<F>,
    params: &Array<F>,
    e: &mut Array<F>,
    vl: &mut Array<F>,
    vr: &mut Array<F>,
    out: &mut Array<F>,
    #[comptime] dim: usize,
) -> F {
    let zero = F::new(0.0);
    let mut nn = F::new(0.0);
    #[unroll]
    for d in 0..dim {
        nn += nrm[d] * nrm[d];
    }
    let len = F::sqrt(nn);
    let live = ne::<F>(len, zero);
    #[unroll]
    for d in 0..dim {
        e[d] = nrm[d] / len;
    }
    let (rho_l, p_l, inv_l, floors_l) = euler_primitive::<F>(ul, params, vl, dim);
    let (rho_r, p_r, inv_r, floors_r) = euler_primitive::<F>(ur, params, vr, dim);
    let mut un_l = F::new(0.0);
    let mut un_r = F::new(0.0);
    #[unroll]
    for d in 0..dim {
        un_l += vl[d] * e[d];
        un_r += vr[d] * e[d];
    }
    let c_l = F::sqrt(params[0] * p_l * inv_l);
    let c_r = F::sqrt(params[0] * p_r * inv_r);
    let s_l = F::min(un_l - c_l, un_r - c_r);
    let s_r = F::max(un_l + c_l, un_r + c_r);
    let m_l = rho_l * (s_l - un_l);
    let m_r = rho_r * (s_r - un_r);
    let s_star = (p_r - p_l + m_l * un_l - m_r * un_r) / (m_l - m_r);
    // Which side's physical flux, and whether its star state corrects it. `s_l >= 0` is kept
    // as a value: its negation is also true for a NaN.
    let left = or(ge::<F>(s_l, zero), ge::<F>(s_star, zero));
    let corrected = and(
        !ge::<F>(s_l, zero),
        or(ge::<F>(s_star, zero), gt::<F>(s_r, zero)),
    );
    let rho = select(left, rho_l, rho_r);
    let p = select(left, p_l, p_r);
    let un = select(left, un_l, un_r);
    let s = select(left, s_l, s_r);
    let k = rho * (s - un) / (s - s_star);
    let energy = (s_star - un) * (s_star + p / (rho * (s - un)));
    // Mass.
    let u0 = select(left, ul[0], ur[0]);
    out[0] = hllc_finish::<F>(rho * un, k, u0, s, corrected, live, len);
    // Momentum.
    #[unroll]
    for d in 0..dim {
        let u = select(left, ul[1 + d], ur[1 + d]);
        let v = select(left, vl[d], vr[d]);
        let f = u * un + p * e[d];
        let us = k * (v + (s_star - un) * e[d]);
        out[1 + d] = hllc_finish::<F>(f, us, u, s, corrected, live, len);
    }
    // Energy.
    let u = select(left, ul[dim + 1], ur[dim + 1]);
    let f = (u + p) * un;
    let us = k * (u / rho + energy);
    out[dim + 1] = hllc_finish::<F>(f, us, u, s, corrected, live, len);
    select(live, floors_l + floors_r, zero)
}

/// One HLLC component: the physical flux `f`, with the star correction `s (us - u)` where
/// `corrected`, times the normal's length; zero through a zero normal.
pub fn hllc_finish<F: Float>(
    f: F,
    us: F,
    u: F,
    s: F,
    corrected: Mask<F>,
    live: Mask<F>,
    len: F,
) -> F {
    let g = select(corrected, f + s * (us - u), f);
    select(live, g * len, F::new(0.0))
}

/// Rusanov (local Lax-Friedrichs) for the Euler equations,
/// `1/2 (F(uL) + F(uR)) . n - 1/2 s (uR - uL)` with `s` the larger of the two sides' largest
/// wave speeds along `nrm`, each side's primitive variables computed once for its flux and
/// its wave speed, into `out`; the number of floors that acted. Scratch: `vl`, `vr` (`dim`
/// entries), `fl`, `fr` (`dim + 2`).
pub fn euler_rusanov<F: Float>(
    ul: &Array<F>,
    ur: &Array<F>,
    nrm: &Array<F>,
    params: &Array<F>,
    vl: &mut Array<F>,
    vr: &mut Array<F>,
    fl: &mut Array<F>,
    fr: &mut Array<F>,
    out: &mut Array<F>,
    #[comptime] dim: usize,
) -> F {
    let (rho_l, p_l, inv_l, floors_l) = euler_primitive::<F>(ul, params, vl, dim);
    let (rho_r, p_r, inv_r, floors_r) = euler_primitive::<F>(ur, params, vr, dim);
    euler_flux_of_primitive::<F>(ul, rho_l, p_l, vl, nrm, fl, dim);
    euler_flux_of_primitive::<F>(ur, rho_r, p_r, vr, nrm, fr, dim);
    let (vn_l, c_l) = euler_speeds_of_primitive::<F>(p_l, inv_l, vl, nrm, params, dim);
    let (vn_r, c_r) = euler_speeds_of_primitive::<F>(p_r, inv_r, vr, nrm, params, dim);
    let s = F::max(F::abs(vn_l) + c_l, F::abs(vn_r) + c_r);
    let half = F::new(0.5);
    #[unroll]
    for v in 0..dim + 2 {
        out[v] = half * (fl[v] + fr[v]) - half * s * (ur[v] - ul[v]);
    }
    floors_l + floors_r
}
