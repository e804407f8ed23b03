//! The numerical fluxes every equation has, written once for the CPU and the device (the
//! formula dialect of `mote-formula`), per variable from the two sides' states `ul`, `ur` and
//! physical fluxes `fl`, `fr` along the normal; and the pieces of the moving-cloud (ALE) fluxes.
//! Which equation supplies the physical fluxes and wave speeds is the passes' business.

/// Rusanov (local Lax-Friedrichs) for one variable: `(fl + fr) / 2 - s (ur - ul) / 2`, with `s`
/// the larger of the two sides' largest wave speeds (on a moving cloud, relative to the
/// interface; `fl`, `fr` then the fluxes relative to it).
pub fn rusanov_flux<F: Float>(ul: F, ur: F, fl: F, fr: F, s: F) -> F {
    F::new(0.5) * (fl + fr) - F::new(0.5) * s * (ur - ul)
}

/// The central flux of one variable: `(fl + fr) / 2`.
pub fn central_flux<F: Float>(fl: F, fr: F) -> F {
    F::new(0.5) * (fl + fr)
}

/// Scalar upwind: `fl` where the Rankine-Hugoniot speed `(fr - fl) / (ur - ul)` is >= 0 (the
/// two differences' signs agree, or there is no jump), else `fr`; no division. For linear
/// advection the exact upwind flux; like every Roe-type flux it admits expansion shocks at sonic
/// points of a nonlinear flux, where Rusanov does not.
pub fn upwind_flux<F: Float>(ul: F, ur: F, fl: F, fr: F) -> F {
    let zero = F::new(0.0);
    let du = ur - ul;
    let df = fr - fl;
    let (up_f, up_u) = (ge::<F>(df, zero), ge::<F>(du, zero));
    let same = or(and(up_f, up_u), and(!up_f, !up_u));
    select(or(same, !ne::<F>(du, zero)), fl, fr)
}

/// The interface velocity of a moving pair along one axis: the mean of the plain average
/// `(wi + wj) / 2` and of the two one-sided Taylor values, whose difference along the half
/// offset is `slope` (third-order accurate where the plain average would cap the scheme at
/// second order).
pub fn interface_velocity<F: Float>(wi: F, wj: F, slope: F) -> F {
    F::new(0.5) * (wi + wj) + F::new(0.25) * slope
}

/// The ALE Rusanov speed: the largest distance of the two sides' wave-speed bounds `(a0, a1)`,
/// `(b0, b1)` from the interface's normal velocity `wn`.
pub fn relative_speed<F: Float>(a0: F, a1: F, b0: F, b1: F, wn: F) -> F {
    let a = F::max(F::abs(a0 - wn), F::abs(a1 - wn));
    F::max(F::max(a, F::abs(b0 - wn)), F::abs(b1 - wn))
}

/// The part `u w_n` a fixed-frame flux gives up on a moving cloud, upwinded on its own: the
/// state downstream of the interface's motion (`ur` where `wn > 0`).
pub fn carried_by_motion<F: Float>(ul: F, ur: F, wn: F) -> F {
    wn * select(gt::<F>(wn, F::new(0.0)), ur, ul)
}
