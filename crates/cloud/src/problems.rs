//! Standard problems: a cloud with its initial state, the equation, the boundary conditions and,
//! where one exists, the exact solution. `mote run` builds its meshless runs from these; the
//! tests use the same set-ups, so what a user runs is what the validation measured.
//!
//! Every problem takes a [`ProblemOptions`]: the resolution (particles across the unit length
//! of the problem's box), the lattice jitter and seed, and the boundary layers to place outside
//! non-periodic faces (as many as the search radius needs). The cloud comes back Morton-ordered
//! with every particle at reconstruction order 1; the caller sets the scheme's order.

use mote_core::Real;

use crate::boundary::{Boundaries, Dirichlet, Front, FrontAhead, Outflow};
use crate::cloud::{Cloud, LatticeOptions};
use crate::domain::Domain;
use crate::equations::{Burgers, Euler, LinearAdvection};
use crate::error::CloudError;
use crate::exact::{self, EulerRiemann, GasState, IsentropicVortex};

/// The exact value of the first conserved variable (density for Euler) at `(x, t)`.
pub type ExactFn<const D: usize> = Box<dyn Fn([f64; D], f64) -> f64 + Send + Sync>;

/// How a problem's cloud is laid out.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProblemOptions {
    /// Particles per unit length of the problem's coordinates (the spacing is its inverse),
    /// except for the isentropic vortex, whose box is 10 wide: there, particles per side.
    pub resolution: usize,
    /// Lattice jitter, a fraction of the spacing in `[0, 1)`.
    pub jitter: f64,
    /// Seed of the jitter.
    pub seed: u64,
    /// Layers of boundary particles outside each non-periodic face.
    pub boundary_layers: usize,
}

/// A problem ready to run.
pub struct Problem<R: Real, const D: usize, E> {
    /// Its name, as `[problem] kind` spells it.
    pub name: &'static str,
    /// The particles with their initial state.
    pub cloud: Cloud<R, D>,
    /// The conservation law.
    pub equation: E,
    /// Boundary conditions per tag (empty on a periodic box).
    pub boundaries: Boundaries<R, D>,
    /// A name per conserved variable, for output files.
    pub variables: Vec<String>,
    /// A name per primitive variable (the equation's `to_primitive`); empty where they are the
    /// conserved ones.
    pub primitive: Vec<String>,
    /// The exact solution of the first variable, where one is known.
    pub exact: Option<ExactFn<D>>,
    /// The time the standard test runs to.
    pub end_time: f64,
}

/// The nominal spacing of `resolution` particles per unit length.
fn spacing(options: &ProblemOptions) -> Result<f64, CloudError> {
    if options.resolution < 4 {
        return Err(CloudError::invalid(
            "resolution",
            options.resolution,
            "at least 4 particles per unit length",
        ));
    }
    Ok(1.0 / options.resolution as f64)
}

/// A Morton-ordered lattice on `domain` with `variables` zeroed variables.
fn lattice<R: Real, const D: usize>(
    domain: Domain<D>,
    spacing: f64,
    options: &ProblemOptions,
    variables: usize,
) -> Result<Cloud<R, D>, CloudError> {
    let lattice = LatticeOptions {
        spacing,
        jitter: options.jitter,
        seed: options.seed,
        boundary_layers: options.boundary_layers,
    };
    let mut cloud = Cloud::lattice(domain, lattice, variables)?;
    cloud.reorder_morton();
    Ok(cloud)
}

/// Sets every particle of `cloud` to the Euler state `state(x) = (density, velocity, pressure)`.
fn fill_gas<R: Real, const D: usize>(
    cloud: &mut Cloud<R, D>,
    eq: &Euler<D>,
    state: impl Fn([f64; D]) -> (f64, [f64; D], f64),
) {
    for i in 0..cloud.len() {
        let (rho, v, p) = state(cloud.position_of(i));
        for (k, value) in eq.conservative(rho, v, p).into_iter().enumerate() {
            cloud.state_var_mut(k)[i] = R::cast(value);
        }
    }
}

/// The names of Euler's conserved variables in `D` dimensions.
fn gas_variables<const D: usize>() -> Vec<String> {
    let mut v = vec!["density".to_string()];
    v.extend(
        ["momentum_x", "momentum_y", "momentum_z"][..D]
            .iter()
            .map(|s| s.to_string()),
    );
    v.push("energy".to_string());
    v
}

/// The names of Euler's primitive variables in `D` dimensions.
fn gas_primitive<const D: usize>() -> Vec<String> {
    let mut v = vec!["density".to_string()];
    v.extend(
        ["velocity_x", "velocity_y", "velocity_z"][..D]
            .iter()
            .map(|s| s.to_string()),
    );
    v.push("pressure".to_string());
    v
}

/// Scalar linear advection of `u = sin(2 pi (x_1 + ... + x_D))` on the periodic unit box with
/// velocity `(1, 1/2, 1/4)` (its first `D` components), to `t = 1`: one period along x.
pub fn advection_wave<R: Real, const D: usize>(
    options: &ProblemOptions,
) -> Result<Problem<R, D, LinearAdvection<D>>, CloudError> {
    let h = spacing(options)?;
    let domain = Domain::unit_periodic();
    let mut cloud = lattice::<R, D>(domain, h, options, 1)?;
    let velocity: [f64; D] = std::array::from_fn(|d| [1.0, 0.5, 0.25][d]);
    let u0 = |x: [f64; D]| (2.0 * std::f64::consts::PI * x.iter().sum::<f64>()).sin();
    for i in 0..cloud.len() {
        cloud.state_var_mut(0)[i] = R::cast(u0(cloud.position_of(i)));
    }
    Ok(Problem {
        name: "advection_wave",
        cloud,
        equation: LinearAdvection::scalar(velocity, 1),
        boundaries: Boundaries::new(),
        variables: vec!["u".to_string()],
        primitive: Vec::new(),
        exact: Some(Box::new(move |x, t| {
            exact::advected(u0, velocity, t, domain)(x)
        })),
        end_time: 1.0,
    })
}

/// 1-D Burgers from the top-hat `u = 1` on `[0.2, 0.4)`, 0 elsewhere, on the periodic unit
/// interval, to `t = 0.15` (before the rarefaction catches the shock at `t = 0.4`).
pub fn burgers_top_hat<R: Real>(
    options: &ProblemOptions,
) -> Result<Problem<R, 1, Burgers<1>>, CloudError> {
    let h = spacing(options)?;
    let mut cloud = lattice::<R, 1>(Domain::unit_periodic(), h, options, 1)?;
    for i in 0..cloud.len() {
        let x = cloud.position_of(i)[0];
        cloud.state_var_mut(0)[i] = if (0.2..0.4).contains(&x) {
            R::one()
        } else {
            R::zero()
        };
    }
    Ok(Problem {
        name: "burgers_top_hat",
        cloud,
        equation: Burgers::<1>,
        boundaries: Boundaries::new(),
        variables: vec!["u".to_string()],
        primitive: Vec::new(),
        exact: Some(Box::new(|x, t| exact::burgers_top_hat(0.2, 0.4, x[0], t))),
        end_time: 0.15,
    })
}

/// The Sod shock tube on `[0, 1]`, diaphragm at 0.5 (density 1, pressure 1 on the left; 0.125,
/// 0.1 on the right; at rest), outflow at both ends, to `t = 0.2`; exact by the Riemann solver.
pub fn sod<R: Real>(
    options: &ProblemOptions,
    gamma: f64,
) -> Result<Problem<R, 1, Euler<1>>, CloudError> {
    let h = spacing(options)?;
    let eq = Euler::<1>::new(gamma)?;
    let domain = Domain::new_box([0.0], [1.0], [false])?;
    let mut cloud = lattice::<R, 1>(domain, h, options, 3)?;
    let (left, right) = ((1.0, 0.0, 1.0), (0.125, 0.0, 0.1));
    fill_gas(&mut cloud, &eq, |x| {
        let (rho, u, p) = if x[0] < 0.5 { left } else { right };
        (rho, [u], p)
    });
    let gas = |(rho, u, p)| GasState { rho, u, p };
    let riemann = EulerRiemann::solve(gas(left), gas(right), gamma)?;
    Ok(Problem {
        name: "sod",
        cloud,
        equation: eq,
        boundaries: Boundaries::new().with_axis(0, Outflow),
        variables: gas_variables::<1>(),
        primitive: gas_primitive::<1>(),
        exact: Some(Box::new(move |x, t| {
            if t > 0.0 {
                riemann.sample((x[0] - 0.5) / t).rho
            } else if x[0] < 0.5 {
                left.0
            } else {
                right.0
            }
        })),
        end_time: 0.2,
    })
}

/// Shu's isentropic vortex (strength 5) on the periodic box `[-5, 5)^2`, carried by a uniform
/// flow of velocity (1, 1), to `t = 1`; exact: it moves unchanged. `resolution` is the number
/// of particles per side.
pub fn isentropic_vortex<R: Real>(
    options: &ProblemOptions,
    gamma: f64,
) -> Result<Problem<R, 2, Euler<2>>, CloudError> {
    let vortex = IsentropicVortex {
        gamma,
        strength: 5.0,
        half: 5.0,
    };
    let h = 10.0 * spacing(options)?;
    let domain = Domain::new_box([-5.0; 2], [5.0; 2], [true; 2])?;
    let mut cloud = lattice::<R, 2>(domain, h, options, 4)?;
    vortex.fill(&mut cloud, 0.0)?;
    Ok(Problem {
        name: "isentropic_vortex",
        cloud,
        equation: Euler::<2>::new(gamma)?,
        boundaries: Boundaries::new(),
        variables: gas_variables::<2>(),
        primitive: gas_primitive::<2>(),
        exact: Some(Box::new(move |x, t| vortex.state(x, t).0)),
        end_time: 1.0,
    })
}

/// The 2-D Riemann problem of Lax and Liu's configuration 3 on `[0, 1]^2` (four constant
/// quadrants meeting at (0.5, 0.5), four shocks), outflow on every face, to `t = 0.3`. No exact
/// solution.
pub fn quadrant<R: Real>(
    options: &ProblemOptions,
    gamma: f64,
) -> Result<Problem<R, 2, Euler<2>>, CloudError> {
    let h = spacing(options)?;
    let eq = Euler::<2>::new(gamma)?;
    let domain = Domain::new_box([0.0; 2], [1.0; 2], [false; 2])?;
    let mut cloud = lattice::<R, 2>(domain, h, options, 4)?;
    fill_gas(&mut cloud, &eq, |[x, y]| match (x > 0.5, y > 0.5) {
        (true, true) => (1.5, [0.0, 0.0], 1.5),
        (false, true) => (0.5323, [1.206, 0.0], 0.3),
        (false, false) => (0.138, [1.206, 1.206], 0.029),
        (true, false) => (0.5323, [0.0, 1.206], 0.3),
    });
    Ok(Problem {
        name: "quadrant",
        cloud,
        equation: eq,
        boundaries: Boundaries::new()
            .with_axis(0, Outflow)
            .with_axis(1, Outflow),
        variables: gas_variables::<2>(),
        primitive: gas_primitive::<2>(),
        exact: None,
        end_time: 0.3,
    })
}

/// Woodward and Colella's double Mach reflection on `[0, 3] x [0, 1]`: a Mach 10 shock in
/// `gamma` gas at 60 degrees to a reflecting wall (the classic 30 degree wedge, the wall from
/// x = 1/6 along the bottom), to `t = 0.2`. Post-shock gas enters on the left (fixed), leaves on the right (outflow); the
/// top follows the incident shock exactly ([`Front`] conditions, which the GPU backend applies
/// too). No exact solution.
pub fn double_mach<R: Real>(
    options: &ProblemOptions,
    gamma: f64,
) -> Result<Problem<R, 2, Euler<2>>, CloudError> {
    let h = spacing(options)?;
    let eq = Euler::<2>::new(gamma)?;
    let domain = Domain::new_box([0.0, 0.0], [3.0, 1.0], [false, false])?;
    let mut cloud = lattice::<R, 2>(domain, h, options, 4)?;
    let angle = std::f64::consts::FRAC_PI_6;
    let post_v = [8.25 * angle.cos(), -8.25 * angle.sin()];
    let (pre, post) = ((1.4, [0.0, 0.0], 1.0), (8.0, post_v, 116.5));
    fill_gas(&mut cloud, &eq, |[x, y]| {
        if x < 1.0 / 6.0 + y / 3f64.sqrt() {
            post
        } else {
            pre
        }
    });
    let state = |(rho, v, p)| eq.conservative(rho, v, p).to_vec();
    let (pre, post) = (state(pre), state(post));
    // The bottom: post-shock gas for x < 1/6, a reflecting wall after it. The top follows the
    // incident shock exactly: post-shock gas left of x = 1/6 + (1 + 20 t) / sqrt(3).
    let sqrt3 = 3f64.sqrt();
    let bottom = Front {
        name: "double_mach_bottom".into(),
        axis: 0,
        origin: 1.0 / 6.0,
        speed: 0.0,
        behind: post.clone(),
        ahead: FrontAhead::SlipWall { first_momentum: 1 },
    };
    let top = Front {
        name: "double_mach_top".into(),
        axis: 0,
        origin: 1.0 / 6.0 + 1.0 / sqrt3,
        speed: 20.0 / sqrt3,
        behind: post,
        ahead: FrontAhead::State(pre),
    };
    let boundaries = Boundaries::new()
        .with(Cloud::<R, 2>::face_tag(0, false), Dirichlet)
        .with(Cloud::<R, 2>::face_tag(0, true), Outflow)
        .with(Cloud::<R, 2>::face_tag(1, false), bottom)
        .with(Cloud::<R, 2>::face_tag(1, true), top);
    Ok(Problem {
        name: "double_mach",
        cloud,
        equation: eq,
        boundaries,
        variables: gas_variables::<2>(),
        primitive: gas_primitive::<2>(),
        exact: None,
        end_time: 0.2,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::INTERIOR;

    fn options(resolution: usize, boundary_layers: usize) -> ProblemOptions {
        ProblemOptions {
            resolution,
            jitter: 0.2,
            seed: 3,
            boundary_layers,
        }
    }

    /// Each problem's initial state is its exact solution at t = 0, and the clouds have the
    /// announced size.
    #[test]
    fn initial_states_match_the_exact_solutions_at_time_zero() {
        fn check<R: Real, const D: usize, E>(p: &Problem<R, D, E>, interior: usize) {
            let exact = p.exact.as_ref().expect("an exact solution");
            let e = exact::errors(&p.cloud, 0, |x| exact(x, 0.0));
            assert!(e.max < 1e-12, "{}: {e:?}", p.name);
            let n = p.cloud.tags().iter().filter(|&&t| t == INTERIOR).count();
            assert_eq!(n, interior, "{}", p.name);
        }
        check(&advection_wave::<f64, 2>(&options(20, 0)).unwrap(), 400);
        check(&burgers_top_hat::<f64>(&options(50, 0)).unwrap(), 50);
        let tube = sod::<f64>(&options(100, 3), 1.4).unwrap();
        check(&tube, 100);
        assert_eq!(tube.cloud.len(), 106);
        check(
            &isentropic_vortex::<f64>(&options(24, 0), 1.4).unwrap(),
            576,
        );
        let q = quadrant::<f64>(&options(16, 2), 1.4).unwrap();
        assert_eq!(q.cloud.len(), 20 * 20);
        assert!(q.exact.is_none());
        assert!(matches!(
            sod::<f64>(&options(2, 0), 1.4),
            Err(CloudError::InvalidParameter { .. })
        ));
    }
}
