//! Conservation laws `du/dt + sum_d dF_d(u)/dx_d = 0`: one file per equation.
//!
//! An equation gives the flux along any direction vector `n` (`F(u) . n = sum_d n_d F_d(u)`, `n`
//! need not be a unit vector) and the largest wave speed along it (the spectral radius of
//! `sum_d n_d dF_d/du`), which is what the Riemann solvers and the time-step control need.
//! Burgers and Euler implement the same trait.

mod advection;
mod burgers;
mod euler;
mod kinetic;

pub use advection::LinearAdvection;
pub use burgers::Burgers;
pub use euler::Euler;
pub use kinetic::KineticTransport;

use mote_core::Real;

use crate::flux::{FluxKind, standard_flux_lanes};

/// A hyperbolic system in `D` dimensions with a run-time number of variables.
pub trait Equation<R: Real, const D: usize>: Send + Sync {
    /// A short name.
    fn name(&self) -> &'static str;

    /// The number of conserved variables when the type fixes it (Burgers: 1, Euler: `D + 2`),
    /// `None` when it is a run-time choice. The flux pass is specialised for the variable count;
    /// a fixed count lets it be compiled for that count only instead of for every supported one
    /// (about a fifth of the code, and of the build time, of crates that instantiate many
    /// equations). `variables` must return this count when it is `Some`.
    const FIXED_VARIABLES: Option<usize> = None;

    /// Number of conserved variables `M`.
    fn variables(&self) -> usize;

    /// `F(u) . n` into `out` (both of length `M`).
    fn flux(&self, u: &[R], n: [R; D], out: &mut [R]);

    /// The largest `|lambda|` of `sum_d n_d dF_d/du` at `u`.
    fn max_wave_speed(&self, u: &[R], n: [R; D]) -> R;

    /// The smallest and the largest eigenvalue of `sum_d n_d dF_d/du` at `u` (bounds suffice).
    /// The default is `-+` [`max_wave_speed`](Self::max_wave_speed); equations that know their
    /// wave speeds override it. A moving cloud's Rusanov flux needs them: its dissipation is the
    /// largest speed relative to the moving interface, `max |lambda - w . n|`, which vanishes
    /// for a particle moving with the flow of a linear equation.
    fn wave_speed_bounds(&self, u: &[R], n: [R; D]) -> (R, R) {
        let s = self.max_wave_speed(u, n);
        (-s, s)
    }

    /// [`flux`](Self::flux) for `W` states at once, in lane layout: `u[v][lane]`, `n[d][lane]`,
    /// `out[v][lane]`, the first `m` variables. The batched flux pass calls this; the default
    /// passes each lane through `flux`, and an equation overrides it with lane-wise loops that
    /// the compiler vectorises.
    #[inline(always)]
    fn flux_lanes<const M: usize, const W: usize>(
        &self,
        m: usize,
        u: &[[R; W]; M],
        n: &[[R; W]; D],
        out: &mut [[R; W]; M],
    ) where
        Self: Sized,
    {
        for l in 0..W {
            let ul: [R; M] = std::array::from_fn(|v| u[v][l]);
            let mut o = [R::zero(); M];
            self.flux(&ul[..m], std::array::from_fn(|d| n[d][l]), &mut o[..m]);
            for v in 0..m {
                out[v][l] = o[v];
            }
        }
    }

    /// [`max_wave_speed`](Self::max_wave_speed) for `W` states at once, in the lane layout of
    /// [`flux_lanes`](Self::flux_lanes).
    #[inline(always)]
    fn max_wave_speed_lanes<const M: usize, const W: usize>(
        &self,
        m: usize,
        u: &[[R; W]; M],
        n: &[[R; W]; D],
    ) -> [R; W]
    where
        Self: Sized,
    {
        std::array::from_fn(|l| {
            let ul: [R; M] = std::array::from_fn(|v| u[v][l]);
            self.max_wave_speed(&ul[..m], std::array::from_fn(|d| n[d][l]))
        })
    }

    /// Whether [`numerical_flux_lanes`](Self::numerical_flux_lanes) implements `kind` for this
    /// equation: Rusanov and central always, upwind for one variable; an equation with its own Riemann
    /// solver (Euler: HLLC) overrides this. Schemes refuse an unsupported flux when built.
    fn supports_flux(&self, kind: FluxKind) -> bool {
        match kind {
            FluxKind::Rusanov | FluxKind::Central => true,
            FluxKind::Upwind => self.variables() == 1,
            FluxKind::Hllc => false,
        }
    }

    /// The numerical flux `kind` for `W` pairs of states in lane layout (`out[v][lane]`), through
    /// the (non-unit) normals `n`. Called once per batch of neighbours; `kind` must be one that
    /// [`supports_flux`](Self::supports_flux) accepts (else Rusanov is used).
    #[inline(always)]
    fn numerical_flux_lanes<const M: usize, const W: usize>(
        &self,
        kind: FluxKind,
        m: usize,
        ul: &[[R; W]; M],
        ur: &[[R; W]; M],
        n: &[[R; W]; D],
        out: &mut [[R; W]; M],
    ) where
        Self: Sized,
    {
        standard_flux_lanes::<R, D, Self, M, W>(self, kind, m, ul, ur, n, out)
    }

    /// Whether a state is physically admissible: every variable finite, by default; Euler also
    /// asks for positive density and pressure. MOOD reduces the order where a candidate state is
    /// not admissible.
    fn admissible(&self, u: &[R]) -> bool {
        u.iter().all(|x| x.is_finite())
    }

    /// [`admissible`](Self::admissible) for `W` states in the lane layout of
    /// [`flux_lanes`](Self::flux_lanes) (the first `m` variables): the flux pass's check of
    /// reconstructed states. The default asks `admissible` lane by lane; an equation that
    /// overrides `admissible` may override this with the same decisions in vectorisable form.
    #[inline(always)]
    fn admissible_lanes<const M: usize, const W: usize>(
        &self,
        m: usize,
        u: &[[R; W]; M],
    ) -> [bool; W]
    where
        Self: Sized,
    {
        std::array::from_fn(|l| {
            let ul: [R; M] = std::array::from_fn(|v| u[v][l]);
            self.admissible(&ul[..m])
        })
    }

    /// Whether the flux pass checks each reconstructed pair of states with
    /// [`admissible`](Self::admissible) and falls back to the particle values (first order for
    /// that pair) when either is not: Euler does (a negative reconstructed density or pressure
    /// would otherwise reach a flux through the floors); scalar equations need not.
    fn checks_reconstruction(&self) -> bool {
        false
    }

    /// How many times positivity floors acted so far (Euler counts them; 0 for equations
    /// without floors).
    fn floor_events(&self) -> u64 {
        0
    }

    /// The velocity the state is carried with, for a moving cloud whose particles follow the
    /// flow ([`crate::motion::StateVelocity`]): the fluid velocity of Euler, the advection
    /// velocity of scalar advection, `u` along every axis for Burgers (its characteristic
    /// speed). `None` (the default) where the equation has no single such velocity.
    fn flow_velocity(&self, _u: &[R]) -> Option<[R; D]> {
        None
    }

    /// Conservative to primitive variables (identity unless overridden).
    fn to_primitive(&self, u: &[R], out: &mut [R]) {
        out.copy_from_slice(u);
    }

    /// Primitive to conservative variables (identity unless overridden).
    fn to_conservative(&self, w: &[R], out: &mut [R]) {
        out.copy_from_slice(w);
    }
}
