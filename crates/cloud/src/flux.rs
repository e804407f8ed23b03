//! Numerical fluxes: the flux through a face with (non-unit) normal `n` from the states on its
//! two sides.

use mote_core::Real;

use crate::cloud::MAX_VARIABLES;
use crate::equations::{Equation, Euler};
use crate::error::CloudError;
use crate::formula::riemann;

/// The numerical (Riemann) flux a scheme uses between two reconstructed states.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FluxKind {
    /// Rusanov (local Lax-Friedrichs): every equation.
    #[default]
    Rusanov,
    /// Scalar upwind with the Rankine-Hugoniot speed: scalar equations only.
    Upwind,
    /// HLLC: the Euler equations only.
    Hllc,
    /// Central, `(F(u_L) + F(u_R)) . n / 2`, no dissipation: with first-order reconstruction
    /// the scheme is the central MLS divergence `-sum_j b_ij . (F(u_j) - F(u_i))`. Every
    /// equation; stable only with a time stepper whose region covers the imaginary axis (RK4,
    /// SSP-RK3) and for smooth solutions.
    Central,
}

impl FluxKind {
    /// By name: `rusanov`, `upwind`, `hllc`.
    pub fn by_name(name: &str) -> Result<Self, CloudError> {
        match name {
            "rusanov" => Ok(Self::Rusanov),
            "upwind" => Ok(Self::Upwind),
            "hllc" => Ok(Self::Hllc),
            "central" => Ok(Self::Central),
            _ => Err(CloudError::invalid(
                "flux",
                name,
                "rusanov, upwind, hllc or central",
            )),
        }
    }

    /// The name [`FluxKind::by_name`] accepts.
    pub fn name(self) -> &'static str {
        match self {
            Self::Rusanov => "rusanov",
            Self::Upwind => "upwind",
            Self::Hllc => "hllc",
            Self::Central => "central",
        }
    }
}

impl std::fmt::Display for FluxKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Rusanov (local Lax-Friedrichs): `1/2 (F(uL) + F(uR)) . n - 1/2 s (uR - uL)`, with `s` the
/// larger of the two sides' largest wave speeds along `n`. Antisymmetric: swapping the sides and
/// negating `n` negates it, which the conservative formulation relies on.
#[inline(always)]
pub fn rusanov<R: Real, const D: usize, E: Equation<R, D>>(
    eq: &E,
    ul: &[R],
    ur: &[R],
    n: [R; D],
    out: &mut [R],
) {
    rusanov_n::<R, D, E, MAX_VARIABLES>(eq, ul, ur, n, out)
}

/// [`rusanov`] with scratch arrays of `M` entries (at least the variable count): hot loops with
/// a known variable count use it so that the per-pair vectors stay in registers.
#[inline(always)]
pub fn rusanov_n<R: Real, const D: usize, E: Equation<R, D>, const M: usize>(
    eq: &E,
    ul: &[R],
    ur: &[R],
    n: [R; D],
    out: &mut [R],
) {
    let m = ul.len();
    let mut fl = [R::zero(); M];
    let mut fr = [R::zero(); M];
    eq.flux(ul, n, &mut fl[..m]);
    eq.flux(ur, n, &mut fr[..m]);
    let s = eq.max_wave_speed(ul, n).max(eq.max_wave_speed(ur, n));
    for v in 0..m {
        out[v] = riemann::rusanov_flux(ul[v], ur[v], fl[v], fr[v], s);
    }
}

/// The fluxes every equation has, for `W` pairs in lane layout: Rusanov, central, and upwind
/// for one variable; any other `kind` gives Rusanov. [`Equation::numerical_flux_lanes`] calls
/// this, and an equation with its own Riemann solver (Euler: HLLC) handles that kind first.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn standard_flux_lanes<
    R: Real,
    const D: usize,
    E: Equation<R, D>,
    const M: usize,
    const W: usize,
>(
    eq: &E,
    kind: FluxKind,
    m: usize,
    ul: &[[R; W]; M],
    ur: &[[R; W]; M],
    n: &[[R; W]; D],
    out: &mut [[R; W]; M],
) {
    match kind {
        FluxKind::Upwind if m == 1 => upwind_lanes::<R, D, E, M, W>(eq, m, ul, ur, n, out),
        FluxKind::Central => central_lanes::<R, D, E, M, W>(eq, m, ul, ur, n, out),
        _ => rusanov_lanes::<R, D, E, M, W>(eq, m, ul, ur, n, out),
    }
}

/// The physical fluxes `F(u_L) . n` and `F(u_R) . n` of `W` pairs in lane layout.
#[inline(always)]
fn side_fluxes<R: Real, const D: usize, E: Equation<R, D>, const M: usize, const W: usize>(
    eq: &E,
    m: usize,
    ul: &[[R; W]; M],
    ur: &[[R; W]; M],
    n: &[[R; W]; D],
) -> ([[R; W]; M], [[R; W]; M]) {
    let mut fl = [[R::zero(); W]; M];
    let mut fr = [[R::zero(); W]; M];
    eq.flux_lanes(m, ul, n, &mut fl);
    eq.flux_lanes(m, ur, n, &mut fr);
    (fl, fr)
}

/// [`rusanov_n`] for `W` pairs at once, in the lane layout of
/// [`Equation::flux_lanes`]: `out[v][lane]` for the first `m` variables. Per lane, the same
/// operations in the same order as [`rusanov_n`].
#[inline(always)]
pub fn rusanov_lanes<R: Real, const D: usize, E: Equation<R, D>, const M: usize, const W: usize>(
    eq: &E,
    m: usize,
    ul: &[[R; W]; M],
    ur: &[[R; W]; M],
    n: &[[R; W]; D],
    out: &mut [[R; W]; M],
) {
    let (fl, fr) = side_fluxes::<R, D, E, M, W>(eq, m, ul, ur, n);
    let sl = eq.max_wave_speed_lanes(m, ul, n);
    let sr = eq.max_wave_speed_lanes(m, ur, n);
    // The scalar formula in one loop over the lanes: LLVM vectorises the loop (the formula on
    // `Lanes` would be separate lane loops, measured 15 % slower here).
    for v in 0..m {
        for l in 0..W {
            let s = sl[l].max(sr[l]);
            out[v][l] = riemann::rusanov_flux(ul[v][l], ur[v][l], fl[v][l], fr[v][l], s);
        }
    }
}

/// The central flux `(F(u_L) + F(u_R)) . n / 2` for `W` pairs in lane layout.
#[inline(always)]
pub fn central_lanes<R: Real, const D: usize, E: Equation<R, D>, const M: usize, const W: usize>(
    eq: &E,
    m: usize,
    ul: &[[R; W]; M],
    ur: &[[R; W]; M],
    n: &[[R; W]; D],
    out: &mut [[R; W]; M],
) {
    let (fl, fr) = side_fluxes::<R, D, E, M, W>(eq, m, ul, ur, n);
    for v in 0..m {
        for l in 0..W {
            out[v][l] = riemann::central_flux(fl[v][l], fr[v][l]);
        }
    }
}

/// Scalar upwind through a face with normal `n`: `F(u_L) . n` where the Rankine-Hugoniot speed
/// `(F(u_R) - F(u_L)) . n / (u_R - u_L)` is >= 0, else `F(u_R) . n` (equal states: either, they
/// agree). For one variable; for linear advection it is the exact upwind flux. Like every
/// Roe-type flux it admits expansion shocks at sonic points of a nonlinear flux (Burgers with a
/// sign change), where [`rusanov`] does not.
#[inline(always)]
pub fn upwind_lanes<R: Real, const D: usize, E: Equation<R, D>, const M: usize, const W: usize>(
    eq: &E,
    m: usize,
    ul: &[[R; W]; M],
    ur: &[[R; W]; M],
    n: &[[R; W]; D],
    out: &mut [[R; W]; M],
) {
    let (fl, fr) = side_fluxes::<R, D, E, M, W>(eq, m, ul, ur, n);
    for v in 0..m {
        for l in 0..W {
            out[v][l] = riemann::upwind_flux(ul[v][l], ur[v][l], fl[v][l], fr[v][l]);
        }
    }
}

/// HLLC (Toro, Spence and Speares) for the Euler equations through a face with (non-unit)
/// normal `n`: the flux of the Riemann problem in the normal direction, with the contact
/// restored, times `|n|`. Wave-speed estimates `S_L = min(u_L - c_L, u_R - c_R)`,
/// `S_R = max(u_L + c_L, u_R + c_R)` (Davis). Consistent (`hllc(u, u, n) = F(u) . n`) and
/// antisymmetric like [`rusanov`]; a zero normal gives a zero flux. The formula is
/// [`crate::formula::euler::hllc`], the device's too; the floors it applies are counted.
pub fn hllc<R: Real, const D: usize>(eq: &Euler<D>, ul: &[R], ur: &[R], n: [R; D], out: &mut [R]) {
    let (mut e, mut vl, mut vr) = ([R::zero(); D], [R::zero(); D], [R::zero(); D]);
    let floors = crate::formula::euler::hllc(
        ul,
        ur,
        &n,
        &eq.params(),
        &mut e,
        &mut vl,
        &mut vr,
        &mut out[..D + 2],
        D,
    );
    eq.count_floors(floors);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::equations::LinearAdvection;

    #[test]
    fn rusanov_is_upwind_for_advection_and_antisymmetric() {
        let eq = LinearAdvection::<1>::scalar([2.0], 1);
        let mut f = [0.0f64];
        rusanov(&eq, &[3.0], &[5.0], [1.0], &mut f);
        assert_eq!(f[0], 6.0, "upwind: a uL");
        let mut g = [0.0f64];
        rusanov(&eq, &[5.0], &[3.0], [-1.0], &mut g);
        assert_eq!(g[0], -f[0]);
    }

    #[test]
    fn euler_lane_flux_is_the_scalar_flux_bit_for_bit() {
        let eq = Euler::<2>::new(1.4).unwrap();
        let states = [
            eq.conservative(1.0, [0.3, -0.2], 1.0),
            eq.conservative(0.4, [-0.1, 0.5], 0.3),
            eq.conservative(2.0, [1.5, 0.0], 0.1),
            vec![1.0, 0.0, 0.0, -1.0], // floored
        ];
        let lanes = |k: usize| -> [[f64; 4]; 4] {
            std::array::from_fn(|v| std::array::from_fn(|l| states[(l + k) % 4][v]))
        };
        let (ul, ur) = (lanes(0), lanes(1));
        let n: [[f64; 4]; 2] = [[1.0, -0.3, 0.0, 2.5], [0.5, 0.7, -1.0, 0.1]];
        let mut out = [[0.0; 4]; 4];
        rusanov_lanes::<f64, 2, _, 4, 4>(&eq, 4, &ul, &ur, &n, &mut out);
        for l in 0..4 {
            let mut f = [0.0; 4];
            let side = |u: &[[f64; 4]; 4]| -> Vec<f64> { (0..4).map(|v| u[v][l]).collect() };
            rusanov(&eq, &side(&ul), &side(&ur), [n[0][l], n[1][l]], &mut f);
            for v in 0..4 {
                assert_eq!(f[v].to_bits(), out[v][l].to_bits(), "lane {l} variable {v}");
            }
        }
        assert!(eq.floor_events() > 0);
    }

    /// HLLC in lanes equals the scalar HLLC bit for bit on every branch (supersonic either
    /// way, the star states on both sides), a zero normal and floored states, and counts the
    /// same floor events.
    #[test]
    fn hllc_lanes_are_the_scalar_flux_bit_for_bit() {
        let eq = Euler::<2>::new(1.4).unwrap();
        let probe = Euler::<2>::new(1.4).unwrap();
        let states = [
            eq.conservative(1.0, [0.3, -0.2], 1.0),
            eq.conservative(0.4, [-0.1, 0.5], 0.3),
            eq.conservative(2.0, [4.5, 0.0], 0.1),
            eq.conservative(1.0, [-5.0, 0.2], 0.2),
            vec![1.0, 0.0, 0.0, -1.0], // floored pressure
            vec![-0.5, 0.1, 0.0, 1.0], // floored density
            eq.conservative(0.125, [0.0, 0.0], 0.1),
            eq.conservative(1.0, [0.75, 0.0], 1.0),
        ];
        let normals = [
            [1.0, 0.5],
            [-0.3, 0.7],
            [0.0, 0.0],
            [2.5, 0.1],
            [1.0, 0.0],
            [-1.0, 0.0],
        ];
        // Supersonic to the right, subsonic (the star states), supersonic to the left.
        let mut branches = [false; 3];
        for shift in 0..8 {
            let lanes = |k: usize| -> [[f64; 8]; 4] {
                std::array::from_fn(|v| std::array::from_fn(|l| states[(l + k) % 8][v]))
            };
            let (ul, ur) = (lanes(shift), lanes(shift * 3 + 1));
            let n: [[f64; 8]; 2] =
                std::array::from_fn(|d| std::array::from_fn(|l| normals[(l + shift) % 6][d]));
            let before = eq.floor_events();
            let mut out = [[0.0; 8]; 4];
            eq.numerical_flux_lanes::<4, 8>(FluxKind::Hllc, 4, &ul, &ur, &n, &mut out);
            let lane_events = eq.floor_events() - before;
            let before = eq.floor_events();
            for l in 0..8 {
                let side = |u: &[[f64; 8]; 4]| -> Vec<f64> { (0..4).map(|v| u[v][l]).collect() };
                let (a, b) = (side(&ul), side(&ur));
                let mut f = [0.0; 4];
                hllc(&eq, &a, &b, [n[0][l], n[1][l]], &mut f);
                for v in 0..4 {
                    assert_eq!(
                        f[v].to_bits(),
                        out[v][l].to_bits(),
                        "shift {shift} lane {l} variable {v}"
                    );
                }
                // Which kind of interface the lane was.
                let len = (n[0][l] * n[0][l] + n[1][l] * n[1][l]).sqrt();
                if len > 0.0 {
                    let e = [n[0][l] / len, n[1][l] / len];
                    // (Another equation object: its floor events are not the flux's.)
                    let speed = |u: &[f64]| {
                        let (rho, v, p) = probe.primitive(u);
                        (v[0] * e[0] + v[1] * e[1], probe.sound_speed(rho, p))
                    };
                    let ((ua, ca), (ub, cb)) = (speed(&a), speed(&b));
                    let (sl, sr) = ((ua - ca).min(ub - cb), (ua + ca).max(ub + cb));
                    let k = if sl >= 0.0 {
                        0
                    } else if sr <= 0.0 {
                        2
                    } else {
                        1
                    };
                    branches[k] = true;
                }
            }
            assert_eq!(lane_events, eq.floor_events() - before, "shift {shift}");
        }
        assert_eq!(branches, [true; 3]);
    }

    #[test]
    fn lane_flux_is_the_scalar_flux_bit_for_bit() {
        let eq =
            LinearAdvection::<2>::system(vec![vec![0.5, 1.0, 1.0, -0.5], vec![0.2, 0.0, 0.0, 0.7]])
                .unwrap();
        let ul: [[f64; 4]; 2] = [[1.0, -2.0, 0.5, 3.0], [0.1, 0.2, -0.3, 4.0]];
        let ur: [[f64; 4]; 2] = [[0.3, 1.0, -0.5, 2.0], [1.1, -0.2, 0.3, 0.0]];
        let n: [[f64; 4]; 2] = [[1.0, -0.3, 0.0, 2.5], [0.5, 0.7, -1.0, 0.1]];
        let mut out = [[0.0; 4]; 2];
        rusanov_lanes::<f64, 2, _, 2, 4>(&eq, 2, &ul, &ur, &n, &mut out);
        for l in 0..4 {
            let mut f = [0.0; 2];
            rusanov(
                &eq,
                &[ul[0][l], ul[1][l]],
                &[ur[0][l], ur[1][l]],
                [n[0][l], n[1][l]],
                &mut f,
            );
            assert_eq!(
                f.map(f64::to_bits),
                [out[0][l].to_bits(), out[1][l].to_bits()]
            );
        }
    }
}
