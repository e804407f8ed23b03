//! The Euler equations of gas dynamics in `D` dimensions: `D + 2` conserved variables
//! `(rho, rho u_1 .. rho u_D, E)`, ideal gas `p = (gamma - 1) (E - rho |u|^2 / 2)`.

use std::sync::atomic::{AtomicU64, Ordering};

use mote_core::Real;

use super::Equation;
use crate::error::CloudError;
use crate::flux::{FluxKind, standard_flux_lanes};
use crate::formula::euler as formula;
use crate::formula::{Float, Lanes, splat};

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

    /// The formulas' parameter array `[gamma, gamma - 1, density floor, pressure floor]` in
    /// precision `R` (the device's parameter array holds the same values).
    #[inline(always)]
    pub fn params<R: Real>(&self) -> [R; 4] {
        crate::formula::euler_params(self.gamma, self.density_floor, self.pressure_floor)
            .map(R::cast)
    }

    /// Density, velocity and pressure of a conservative state, with the floors applied.
    #[inline(always)]
    pub fn primitive<R: Real>(&self, u: &[R]) -> (R, [R; D], R) {
        let mut v = [R::zero(); D];
        let (rho, p, _, floors) = formula::euler_primitive(u, &self.params(), &mut v, D);
        self.count_floors(floors);
        (rho, v, p)
    }

    /// Adds the floor applications a formula counted (`F`: one state or lanes of them; one
    /// atomic add, none for zero).
    #[inline(always)]
    pub(crate) fn count_floors<F: Float>(&self, floors: F) {
        let events = F::total(floors);
        if events > 0.0 {
            self.floors.fetch_add(events as u64, Ordering::Relaxed);
        }
    }

    /// HLLC for `W` pairs in lanes ([`crate::flux::hllc`] in every lane at once).
    #[inline(always)]
    fn hllc_lanes<R: Real, const M: usize, const W: usize>(
        &self,
        ul: &[[R; W]; M],
        ur: &[[R; W]; M],
        n: &[[R; W]; D],
        out: &mut [[R; W]; M],
    ) {
        let zero = Lanes::<R, W>::splat(R::zero());
        let (mut e, mut vl, mut vr) = ([zero; D], [zero; D], [zero; D]);
        let floors = formula::hllc(
            Lanes::wrap(&ul[..D + 2]),
            Lanes::wrap(&ur[..D + 2]),
            Lanes::wrap(n),
            &splat(self.params()),
            &mut e,
            &mut vl,
            &mut vr,
            Lanes::wrap_mut(&mut out[..D + 2]),
            D,
        );
        self.count_floors(floors);
    }

    /// Rusanov for `W` pairs in lanes, each side's primitive variables computed once for its
    /// flux and its wave speed (the generic [`crate::flux::rusanov_lanes`] converts each side
    /// twice): per lane the same operations as the generic flux, so the same bits; floors
    /// count once per side.
    #[inline(always)]
    fn rusanov_lanes<R: Real, const M: usize, const W: usize>(
        &self,
        ul: &[[R; W]; M],
        ur: &[[R; W]; M],
        n: &[[R; W]; D],
        out: &mut [[R; W]; M],
    ) {
        let zero = Lanes::<R, W>::splat(R::zero());
        let (mut vl, mut vr) = ([zero; D], [zero; D]);
        let (mut fl, mut fr) = ([zero; M], [zero; M]);
        let floors = formula::euler_rusanov(
            Lanes::wrap(&ul[..D + 2]),
            Lanes::wrap(&ur[..D + 2]),
            Lanes::wrap(n),
            &splat(self.params()),
            &mut vl,
            &mut vr,
            &mut fl,
            &mut fr,
            Lanes::wrap_mut(&mut out[..D + 2]),
            D,
        );
        self.count_floors(floors);
    }

    /// The conservative state of density, velocity and pressure.
    pub fn conservative<R: Real>(&self, rho: R, v: [R; D], p: R) -> Vec<R> {
        let mut out = vec![R::zero(); D + 2];
        Equation::<R, D>::to_conservative(self, &primitive_vec(rho, v, p), &mut out);
        out
    }

    /// The normal velocity and the sound speed times `|n|` of a state (floors counted).
    #[inline(always)]
    fn speeds<R: Real>(&self, u: &[R], n: [R; D]) -> (R, R) {
        let mut vel = [R::zero(); D];
        let (vn, c, floors) = formula::euler_speeds(u, &n, &self.params(), &mut vel, D);
        self.count_floors(floors);
        (vn, c)
    }

    /// The sound speed `sqrt(gamma p / rho)`, formed as the fluxes form it: from the
    /// density's reciprocal.
    #[inline(always)]
    pub fn sound_speed<R: Real>(&self, rho: R, p: R) -> R {
        (R::cast(self.gamma) * p * (R::one() / rho)).sqrt()
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
        let mut vel = [R::zero(); D];
        let floors = formula::euler_flux(u, &n, &self.params(), &mut vel, out, D);
        self.count_floors(floors);
    }

    #[inline(always)]
    fn wave_speed_bounds(&self, u: &[R], n: [R; D]) -> (R, R) {
        let (vn, c) = self.speeds(u, n);
        (vn - c, vn + c)
    }

    fn max_wave_speed(&self, u: &[R], n: [R; D]) -> R {
        let (vn, c) = self.speeds(u, n);
        vn.abs() + c
    }

    #[inline(always)]
    fn flux_lanes<const M: usize, const W: usize>(
        &self,
        _m: usize,
        u: &[[R; W]; M],
        n: &[[R; W]; D],
        out: &mut [[R; W]; M],
    ) {
        let mut vel = [Lanes::splat(R::zero()); D];
        let floors = formula::euler_flux(
            Lanes::wrap(&u[..D + 2]),
            Lanes::wrap(n),
            &splat(self.params()),
            &mut vel,
            Lanes::wrap_mut(&mut out[..D + 2]),
            D,
        );
        self.count_floors(floors);
    }

    #[inline(always)]
    fn max_wave_speed_lanes<const M: usize, const W: usize>(
        &self,
        _m: usize,
        u: &[[R; W]; M],
        n: &[[R; W]; D],
    ) -> [R; W] {
        let mut vel = [Lanes::splat(R::zero()); D];
        let params = splat(self.params());
        let (vn, c, floors) = formula::euler_speeds(
            Lanes::wrap(&u[..D + 2]),
            Lanes::wrap(n),
            &params,
            &mut vel,
            D,
        );
        self.count_floors(floors);
        (Lanes::abs(vn) + c).0
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
            FluxKind::Hllc => self.hllc_lanes(ul, ur, n, out),
            FluxKind::Rusanov => self.rusanov_lanes(ul, ur, n, out),
            _ => standard_flux_lanes::<R, D, Self, M, W>(self, kind, m, ul, ur, n, out),
        }
    }

    /// Finite, density and pressure above zero (the floors do not count here: a state that
    /// needs them is not admissible).
    fn admissible(&self, u: &[R]) -> bool {
        formula::euler_admissible(u, D)
    }

    #[inline(always)]
    fn admissible_lanes<const M: usize, const W: usize>(
        &self,
        _m: usize,
        u: &[[R; W]; M],
    ) -> [bool; W] {
        formula::euler_admissible(Lanes::wrap(&u[..D + 2]), D).lanes()
    }

    /// `(rho, u_1 .. u_D, p)`.
    fn flow_velocity(&self, u: &[R]) -> Option<[R; D]> {
        Some(self.primitive(u).1)
    }

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
