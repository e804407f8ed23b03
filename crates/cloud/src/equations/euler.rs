//! The Euler equations of gas dynamics in `D` dimensions: `D + 2` conserved variables
//! `(rho, rho u_1 .. rho u_D, E)`, ideal gas `p = (gamma - 1) (E - rho |u|^2 / 2)`.

use std::sync::atomic::{AtomicU64, Ordering};

use mote_core::Real;

use super::Equation;
use crate::error::CloudError;
use crate::flux::{FluxKind, hllc_lanes, standard_flux_lanes};

/// The Euler equations with ratio of specific heats `gamma`.
///
/// Density and pressure below the floors are raised to them wherever the equation evaluates a
/// state (flux, wave speed, primitive variables), and every such event is counted
/// ([`Euler::floor_events`]) so that a run can report how often the floors acted: a scheme that
/// needs them often is not resolving the flow.
#[derive(Debug)]
pub struct Euler<const D: usize> {
    gamma: f64,
    density_floor: f64,
    pressure_floor: f64,
    floors: AtomicU64,
}

impl<const D: usize> Clone for Euler<D> {
    fn clone(&self) -> Self {
        Self {
            gamma: self.gamma,
            density_floor: self.density_floor,
            pressure_floor: self.pressure_floor,
            floors: AtomicU64::new(self.floor_events()),
        }
    }
}

impl<const D: usize> Euler<D> {
    /// An ideal gas with `gamma > 1`, floors 1e-10 on density and pressure.
    pub fn new(gamma: f64) -> Result<Self, CloudError> {
        if !(gamma.is_finite() && gamma > 1.0) {
            return Err(CloudError::invalid(
                "gamma",
                gamma,
                "a finite number above 1",
            ));
        }
        Ok(Self {
            gamma,
            density_floor: 1e-10,
            pressure_floor: 1e-10,
            floors: AtomicU64::new(0),
        })
    }

    /// Sets the density and pressure floors (positive).
    pub fn with_floors(mut self, density: f64, pressure: f64) -> Result<Self, CloudError> {
        if !(density > 0.0 && pressure > 0.0) {
            return Err(CloudError::invalid(
                "positivity floors",
                format!("{density}, {pressure}"),
                "positive numbers",
            ));
        }
        self.density_floor = density;
        self.pressure_floor = pressure;
        Ok(self)
    }

    /// The ratio of specific heats.
    pub fn gamma(&self) -> f64 {
        self.gamma
    }

    /// The density and pressure floors.
    pub fn floors(&self) -> (f64, f64) {
        (self.density_floor, self.pressure_floor)
    }

    /// How many times a floor acted since the last [`Euler::take_floor_events`].
    pub fn floor_events(&self) -> u64 {
        self.floors.load(Ordering::Relaxed)
    }

    /// The floor events so far, and resets the count.
    pub fn take_floor_events(&self) -> u64 {
        self.floors.swap(0, Ordering::Relaxed)
    }

    /// Density, velocity and pressure of a conservative state, with the floors applied.
    #[inline(always)]
    pub fn primitive<R: Real>(&self, u: &[R]) -> (R, [R; D], R) {
        let (rho, v, p, _) = self.primitive_inverse(u);
        (rho, v, p)
    }

    /// [`Euler::primitive`] and the floored density's reciprocal: the velocity is the momentum
    /// times the reciprocal, and wave speeds use it too, so that a state costs one division
    /// (divisions and square roots bound the flux passes; see `docs/performance.md`).
    #[inline(always)]
    pub(crate) fn primitive_inverse<R: Real>(&self, u: &[R]) -> (R, [R; D], R, R) {
        let mut rho = u[0];
        let floor = R::cast(self.density_floor);
        // Below the floor, or NaN.
        if rho < floor || rho.is_nan() {
            self.floors.fetch_add(1, Ordering::Relaxed);
            rho = floor;
        }
        let inv = R::one() / rho;
        let v: [R; D] = std::array::from_fn(|d| u[1 + d] * inv);
        let mut kinetic = R::zero();
        for d in 0..D {
            kinetic += u[1 + d] * v[d];
        }
        let mut p = R::cast(self.gamma - 1.0) * (u[D + 1] - R::cast(0.5) * kinetic);
        let floor = R::cast(self.pressure_floor);
        if p < floor || p.is_nan() {
            self.floors.fetch_add(1, Ordering::Relaxed);
            p = floor;
        }
        (rho, v, p, inv)
    }

    /// [`Euler::primitive`] for `W` states in lanes (`u[v][lane]`), in the same operations;
    /// the floor events of the batch are counted with one atomic add.
    #[inline(always)]
    fn primitive_lanes<R: Real, const M: usize, const W: usize>(
        &self,
        u: &[[R; W]; M],
    ) -> PrimitiveLanes<R, D, W> {
        self.primitive_lanes_counting(u, &[true; W])
    }

    /// [`Euler::primitive_lanes`], counting the floor events of the lanes marked in `counted`
    /// only (HLLC does not convert a lane through a zero normal).
    #[inline(always)]
    pub(crate) fn primitive_lanes_counting<R: Real, const M: usize, const W: usize>(
        &self,
        u: &[[R; W]; M],
        counted: &[bool; W],
    ) -> PrimitiveLanes<R, D, W> {
        let (rho_floor, p_floor) = (R::cast(self.density_floor), R::cast(self.pressure_floor));
        let (gm1, half) = (R::cast(self.gamma - 1.0), R::cast(0.5));
        let mut rho = [R::zero(); W];
        let mut v = [[R::zero(); W]; D];
        let mut p = [R::zero(); W];
        let mut inv = [R::zero(); W];
        // Which lanes' density and pressure took their floors: counted after the loop, and
        // only when there is any (rare; a count per lane inside the loop costs mask moves and
        // scalar adds in every batch).
        let mut low_rho = [false; W];
        let mut low_p = [false; W];
        for l in 0..W {
            let r = u[0][l];
            // `|`, not `||`: no branch per lane.
            low_rho[l] = (r < rho_floor) | r.is_nan();
            rho[l] = if low_rho[l] { rho_floor } else { r };
            inv[l] = R::one() / rho[l];
            let mut kinetic = R::zero();
            for d in 0..D {
                v[d][l] = u[1 + d][l] * inv[l];
                kinetic += u[1 + d][l] * v[d][l];
            }
            let q = gm1 * (u[D + 1][l] - half * kinetic);
            low_p[l] = (q < p_floor) | q.is_nan();
            p[l] = if low_p[l] { p_floor } else { q };
        }
        if (0..W).fold(false, |any, l| any | low_rho[l] | low_p[l]) {
            let events = (0..W)
                .map(|l| u64::from(low_rho[l] & counted[l]) + u64::from(low_p[l] & counted[l]))
                .sum();
            self.count_floor_events(events);
        }
        (rho, v, p, inv)
    }

    /// Adds `events` floor applications of a batch (one atomic add, none for zero).
    #[inline(always)]
    pub(crate) fn count_floor_events(&self, events: u64) {
        if events > 0 {
            self.floors.fetch_add(events, Ordering::Relaxed);
        }
    }

    /// [`Equation::max_wave_speed_lanes`] from the primitive variables and the normals'
    /// squared lengths `nn` (from [`squared_lengths`], computed once when both sides of a pair
    /// need them).
    #[inline(always)]
    fn speed_of_primitive_lanes<R: Real, const W: usize>(
        &self,
        (_, v, p, inv): &PrimitiveLanes<R, D, W>,
        n: &[[R; W]; D],
        nn: &[R; W],
    ) -> [R; W] {
        std::array::from_fn(|l| {
            let mut vn = R::zero();
            for d in 0..D {
                vn += v[d][l] * n[d][l];
            }
            vn.abs() + self.sound_speed_along(p[l], inv[l], nn[l])
        })
    }

    /// Rusanov with each side's primitive variables computed once for its flux and its wave
    /// speed (the generic [`crate::flux::rusanov_lanes`] converts each side twice): per lane the
    /// same operations as the generic flux, so the same bits; floors count once per side.
    #[inline(always)]
    fn rusanov_lanes<R: Real, const M: usize, const W: usize>(
        &self,
        ul: &[[R; W]; M],
        ur: &[[R; W]; M],
        n: &[[R; W]; D],
        out: &mut [[R; W]; M],
    ) {
        let (pl, pr) = (self.primitive_lanes(ul), self.primitive_lanes(ur));
        let mut fl = [[R::zero(); W]; M];
        let mut fr = [[R::zero(); W]; M];
        flux_of_primitive_lanes(ul, &pl, n, &mut fl);
        flux_of_primitive_lanes(ur, &pr, n, &mut fr);
        let nn = squared_lengths(n);
        let (sl, sr) = (
            self.speed_of_primitive_lanes(&pl, n, &nn),
            self.speed_of_primitive_lanes(&pr, n, &nn),
        );
        let half = R::cast(0.5);
        for v in 0..D + 2 {
            for l in 0..W {
                let s = sl[l].max(sr[l]);
                out[v][l] = half * (fl[v][l] + fr[v][l]) - half * s * (ur[v][l] - ul[v][l]);
            }
        }
    }

    /// The conservative state of density, velocity and pressure.
    pub fn conservative<R: Real>(&self, rho: R, v: [R; D], p: R) -> Vec<R> {
        let mut out = vec![R::zero(); D + 2];
        Equation::<R, D>::to_conservative(self, &primitive_vec(rho, v, p), &mut out);
        out
    }

    /// The sound speed `sqrt(gamma p / rho)`, formed as the fluxes form it: from the
    /// density's reciprocal ([`Euler::primitive_inverse`]).
    #[inline(always)]
    pub fn sound_speed<R: Real>(&self, rho: R, p: R) -> R {
        self.sound_speed_inverse(p, R::one() / rho)
    }

    /// The sound speed `sqrt(gamma p inv_rho)`.
    #[inline(always)]
    pub(crate) fn sound_speed_inverse<R: Real>(&self, p: R, inv_rho: R) -> R {
        (R::cast(self.gamma) * p * inv_rho).sqrt()
    }

    /// The sound speed times the length of a normal of squared length `nn`, with one square
    /// root: `sqrt(gamma p inv_rho nn)`.
    #[inline(always)]
    pub(crate) fn sound_speed_along<R: Real>(&self, p: R, inv_rho: R, nn: R) -> R {
        (R::cast(self.gamma) * p * inv_rho * nn).sqrt()
    }
}

/// Density, velocities, pressure and the density's reciprocal of `W` states in lanes.
pub(crate) type PrimitiveLanes<R, const D: usize, const W: usize> =
    ([R; W], [[R; W]; D], [R; W], [R; W]);

/// The squared length of each lane's normal.
#[inline(always)]
fn squared_lengths<R: Real, const D: usize, const W: usize>(n: &[[R; W]; D]) -> [R; W] {
    std::array::from_fn(|l| {
        let mut nn = R::zero();
        for d in 0..D {
            nn += n[d][l] * n[d][l];
        }
        nn
    })
}

/// `F(u) . n` of `W` states in lanes from their primitive variables.
#[inline(always)]
fn flux_of_primitive_lanes<R: Real, const D: usize, const M: usize, const W: usize>(
    u: &[[R; W]; M],
    (rho, v, p, _): &PrimitiveLanes<R, D, W>,
    n: &[[R; W]; D],
    out: &mut [[R; W]; M],
) {
    for l in 0..W {
        let mut vn = R::zero();
        for d in 0..D {
            vn += v[d][l] * n[d][l];
        }
        out[0][l] = rho[l] * vn;
        for d in 0..D {
            out[1 + d][l] = u[1 + d][l] * vn + p[l] * n[d][l];
        }
        out[D + 1][l] = (u[D + 1][l] + p[l]) * vn;
    }
}

fn primitive_vec<R: Real, const D: usize>(rho: R, v: [R; D], p: R) -> Vec<R> {
    let mut w = vec![rho];
    w.extend_from_slice(&v);
    w.push(p);
    w
}

impl<R: Real, const D: usize> Equation<R, D> for Euler<D> {
    fn name(&self) -> &'static str {
        "euler"
    }

    const FIXED_VARIABLES: Option<usize> = Some(D + 2);

    fn variables(&self) -> usize {
        D + 2
    }

    #[inline(always)]
    fn flux(&self, u: &[R], n: [R; D], out: &mut [R]) {
        let (rho, v, p) = self.primitive(u);
        let mut vn = R::zero();
        for d in 0..D {
            vn += v[d] * n[d];
        }
        out[0] = rho * vn;
        for d in 0..D {
            out[1 + d] = u[1 + d] * vn + p * n[d];
        }
        out[D + 1] = (u[D + 1] + p) * vn;
    }

    #[inline(always)]
    fn wave_speed_bounds(&self, u: &[R], n: [R; D]) -> (R, R) {
        let (_, v, p, inv) = self.primitive_inverse(u);
        let (mut vn, mut nn) = (R::zero(), R::zero());
        for d in 0..D {
            vn += v[d] * n[d];
            nn += n[d] * n[d];
        }
        let c = self.sound_speed_along(p, inv, nn);
        (vn - c, vn + c)
    }

    fn max_wave_speed(&self, u: &[R], n: [R; D]) -> R {
        let (_, v, p, inv) = self.primitive_inverse(u);
        let (mut vn, mut nn) = (R::zero(), R::zero());
        for d in 0..D {
            vn += v[d] * n[d];
            nn += n[d] * n[d];
        }
        vn.abs() + self.sound_speed_along(p, inv, nn)
    }

    #[inline(always)]
    fn flux_lanes<const M: usize, const W: usize>(
        &self,
        _m: usize,
        u: &[[R; W]; M],
        n: &[[R; W]; D],
        out: &mut [[R; W]; M],
    ) {
        let primitive = self.primitive_lanes(u);
        flux_of_primitive_lanes(u, &primitive, n, out);
    }

    #[inline(always)]
    fn max_wave_speed_lanes<const M: usize, const W: usize>(
        &self,
        _m: usize,
        u: &[[R; W]; M],
        n: &[[R; W]; D],
    ) -> [R; W] {
        let primitive = self.primitive_lanes(u);
        self.speed_of_primitive_lanes(&primitive, n, &squared_lengths(n))
    }

    fn floor_events(&self) -> u64 {
        Euler::floor_events(self)
    }

    fn checks_reconstruction(&self) -> bool {
        true
    }

    fn supports_flux(&self, kind: FluxKind) -> bool {
        matches!(kind, FluxKind::Rusanov | FluxKind::Hllc | FluxKind::Central)
    }

    #[inline(always)]
    fn numerical_flux_lanes<const M: usize, const W: usize>(
        &self,
        kind: FluxKind,
        m: usize,
        ul: &[[R; W]; M],
        ur: &[[R; W]; M],
        n: &[[R; W]; D],
        out: &mut [[R; W]; M],
    ) {
        match kind {
            FluxKind::Hllc => hllc_lanes::<R, D, M, W>(self, ul, ur, n, out),
            FluxKind::Rusanov => self.rusanov_lanes(ul, ur, n, out),
            _ => standard_flux_lanes::<R, D, Self, M, W>(self, kind, m, ul, ur, n, out),
        }
    }

    /// Finite, density and pressure above zero (the floors do not count here: a state that
    /// needs them is not admissible).
    fn admissible(&self, u: &[R]) -> bool {
        if !u[..D + 2].iter().all(|x| x.is_finite()) || u[0] <= R::zero() {
            return false;
        }
        let mut kinetic = R::zero();
        for d in 0..D {
            kinetic += u[1 + d] * u[1 + d];
        }
        // E - |m|^2 / (2 rho) > 0 multiplied through by rho > 0: no division.
        u[0] * u[D + 1] - R::cast(0.5) * kinetic > R::zero()
    }

    /// [`admissible`](Self::admissible) in lanes, in the same operations (so the same
    /// decisions), without the early exits, so that it vectorises.
    #[inline(always)]
    fn admissible_lanes<const M: usize, const W: usize>(
        &self,
        _m: usize,
        u: &[[R; W]; M],
    ) -> [bool; W] {
        let half = R::cast(0.5);
        let mut ok = [false; W];
        for l in 0..W {
            let mut finite = true;
            for x in &u[..D + 2] {
                finite &= x[l].is_finite();
            }
            let mut kinetic = R::zero();
            for d in 0..D {
                kinetic += u[1 + d][l] * u[1 + d][l];
            }
            // `&`, not `&&`: no branch per lane (the energy test is multiplied through by the
            // density, whose sign the first test checks: no division).
            let positive =
                (u[0][l] > R::zero()) & (u[0][l] * u[D + 1][l] - half * kinetic > R::zero());
            ok[l] = finite & positive;
        }
        ok
    }

    /// `(rho, u_1 .. u_D, p)`.
    fn to_primitive(&self, u: &[R], out: &mut [R]) {
        let (rho, v, p) = self.primitive(u);
        out[0] = rho;
        out[1..=D].copy_from_slice(&v);
        out[D + 1] = p;
    }

    /// From `(rho, u_1 .. u_D, p)`.
    fn to_conservative(&self, w: &[R], out: &mut [R]) {
        let rho = w[0];
        let mut kinetic = R::zero();
        for d in 0..D {
            out[1 + d] = rho * w[1 + d];
            kinetic += w[1 + d] * w[1 + d];
        }
        out[0] = rho;
        out[D + 1] = w[D + 1] / R::cast(self.gamma - 1.0) + R::cast(0.5) * rho * kinetic;
    }
}
