//! Standard problems: a cloud with its initial state, the equation, the boundary conditions and,
//! where one exists, the exact solution. `mote run` builds its meshless runs from these; the
//! tests use the same set-ups, so what a user runs is what the validation measured.
//!
//! Every problem takes a [`ProblemOptions`]: the resolution (particles across the unit length
//! of the problem's box), the lattice jitter and seed, and the boundary layers to place outside
//! non-periodic faces (as many as the search radius needs). The cloud comes back Morton-ordered
//! with every particle at reconstruction order 1; the caller sets the scheme's order.

use mote_core::Real;
use mote_core::comm::Comm;

use crate::boundary::{Boundaries, Dirichlet, Front, FrontAhead, Inflow, Outflow, SlipWall};
use crate::cloud::{Cloud, LatticeOptions};
use crate::domain::Domain;
use crate::equations::{Burgers, Euler, LinearAdvection};
use crate::error::CloudError;
use crate::exact::{self, EulerRiemann, GasState, IsentropicVortex};

/// The exact solution: writes every conserved variable at `(x, t)` into the slice (one entry
/// per variable, in the state's order).
pub type ExactFn<const D: usize> = Box<dyn Fn([f64; D], f64, &mut [f64]) + Send + Sync>;

/// The exact solution of a scalar problem from its value at `(x, t)`.
fn scalar_exact<const D: usize>(
    u: impl Fn([f64; D], f64) -> f64 + Send + Sync + 'static,
) -> ExactFn<D> {
    Box::new(move |x, t, out| out[0] = u(x, t))
}

/// Writes the conserved Euler variables of `(rho, v, p)` into `out`.
fn gas_conserved<const D: usize>(gamma: f64, rho: f64, v: [f64; D], p: f64, out: &mut [f64]) {
    let kinetic: f64 = v.iter().map(|c| c * c).sum::<f64>() * 0.5 * rho;
    out[0] = rho;
    for d in 0..D {
        out[1 + d] = rho * v[d];
    }
    out[1 + D] = p / (gamma - 1.0) + kinetic;
}

/// How a problem's cloud is laid out.
#[derive(Clone, Debug)]
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
    /// Generate only this rank's part: its own range of the one-process particle order
    /// ([`crate::halo::own_ranges`] of the Morton-ordered cloud), bit for bit the one-process
    /// particles and states, without any rank holding the whole cloud (the lattice's rows are
    /// generated apart and sorted along the Morton curve over the ranks). Problems built from
    /// these options honour it; `None` (or one rank) builds the whole cloud. Collective.
    pub ranks: Option<std::sync::Arc<dyn Comm>>,
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
    match &options.ranks {
        Some(comm) if comm.size() > 1 => {
            // The rank's rows of the lattice order, then its rows of the Morton order.
            let total = Cloud::<R, D>::lattice_len(&domain, lattice)?;
            let rows = crate::halo::own_ranges(total, comm.size())[comm.rank()].clone();
            let mut cloud = Cloud::lattice_rows(domain, lattice, variables, rows.clone())?;
            crate::halo::reorder(&mut cloud, rows.start, total, comm.as_ref())?;
            Ok(cloud)
        }
        _ => {
            let mut cloud = Cloud::lattice(domain, lattice, variables)?;
            cloud.reorder_morton();
            Ok(cloud)
        }
    }
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

/// The Euler equations for `gamma` and a Morton-ordered lattice (zeroed gas variables) on the box
/// from `lo` to `hi`, periodic along the `periodic` axes: what every gas problem starts from.
fn gas_box<R: Real, const D: usize>(
    options: &ProblemOptions,
    gamma: f64,
    lo: [f64; D],
    hi: [f64; D],
    periodic: [bool; D],
) -> Result<(Euler<D>, Cloud<R, D>), CloudError> {
    let h = spacing(options)?;
    let eq = Euler::<D>::new(gamma)?;
    let cloud = lattice::<R, D>(Domain::new_box(lo, hi, periodic)?, h, options, D + 2)?;
    Ok((eq, cloud))
}

/// A problem of the Euler equations in `D` dimensions, with the gas's variable names.
fn gas_problem<R: Real, const D: usize>(
    name: &'static str,
    cloud: Cloud<R, D>,
    equation: Euler<D>,
    boundaries: Boundaries<R, D>,
    exact: Option<ExactFn<D>>,
    end_time: f64,
) -> Problem<R, D, Euler<D>> {
    Problem {
        name,
        cloud,
        equation,
        boundaries,
        variables: gas_variables::<D>(),
        primitive: gas_primitive::<D>(),
        exact,
        end_time,
    }
}

/// The names of Euler's conserved variables in `D` dimensions.
pub fn gas_variables<const D: usize>() -> Vec<String> {
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
        exact: Some(scalar_exact(move |x, t| {
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
        exact: Some(scalar_exact(|x, t| {
            exact::burgers_top_hat(0.2, 0.4, x[0], t)
        })),
        end_time: 0.15,
    })
}

/// The Sod shock tube on `[0, 1]`, diaphragm at 0.5 (density 1, pressure 1 on the left; 0.125,
/// 0.1 on the right; at rest), outflow at both ends, to `t = 0.2`; exact by the Riemann solver.
pub fn sod<R: Real>(
    options: &ProblemOptions,
    gamma: f64,
) -> Result<Problem<R, 1, Euler<1>>, CloudError> {
    let (eq, mut cloud) = gas_box::<R, 1>(options, gamma, [0.0], [1.0], [false])?;
    let (left, right) = ((1.0, 0.0, 1.0), (0.125, 0.0, 0.1));
    fill_gas(&mut cloud, &eq, |x| {
        let (rho, u, p) = if x[0] < 0.5 { left } else { right };
        (rho, [u], p)
    });
    let gas = |(rho, u, p)| GasState { rho, u, p };
    let riemann = EulerRiemann::solve(gas(left), gas(right), gamma)?;
    Ok(gas_problem(
        "sod",
        cloud,
        eq,
        Boundaries::new().with_axis(0, Outflow),
        Some(Box::new(move |x, t, out| {
            let w = if t > 0.0 {
                riemann.sample((x[0] - 0.5) / t)
            } else if x[0] < 0.5 {
                gas(left)
            } else {
                gas(right)
            };
            gas_conserved(gamma, w.rho, [w.u], w.p, out)
        })),
        0.2,
    ))
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
    Ok(gas_problem(
        "isentropic_vortex",
        cloud,
        Euler::<2>::new(gamma)?,
        Boundaries::new(),
        Some(Box::new(move |x, t, out| {
            let (rho, v, p) = vortex.state(x, t);
            gas_conserved(gamma, rho, v, p, out)
        })),
        1.0,
    ))
}

/// The 2-D Riemann problem of Lax and Liu's configuration 3 on `[0, 1]^2` (four constant
/// quadrants meeting at (0.5, 0.5), four shocks), outflow on every face, to `t = 0.3`. No exact
/// solution.
pub fn quadrant<R: Real>(
    options: &ProblemOptions,
    gamma: f64,
) -> Result<Problem<R, 2, Euler<2>>, CloudError> {
    let (eq, mut cloud) = gas_box::<R, 2>(options, gamma, [0.0; 2], [1.0; 2], [false; 2])?;
    fill_gas(&mut cloud, &eq, |[x, y]| match (x > 0.5, y > 0.5) {
        (true, true) => (1.5, [0.0, 0.0], 1.5),
        (false, true) => (0.5323, [1.206, 0.0], 0.3),
        (false, false) => (0.138, [1.206, 1.206], 0.029),
        (true, false) => (0.5323, [0.0, 1.206], 0.3),
    });
    Ok(gas_problem(
        "quadrant",
        cloud,
        eq,
        Boundaries::new()
            .with_axis(0, Outflow)
            .with_axis(1, Outflow),
        None,
        0.3,
    ))
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
    let (eq, mut cloud) = gas_box::<R, 2>(options, gamma, [0.0, 0.0], [3.0, 1.0], [false, false])?;
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
    Ok(gas_problem("double_mach", cloud, eq, boundaries, None, 0.2))
}

/// The Gresho-Chan vortex (Liska and Wendroff's form) on the periodic unit square: density 1, a
/// triangular azimuthal velocity about the centre (`5r` to r = 0.2, `2 - 5r` to 0.4, 0 beyond)
/// held by the pressure gradient (`5 + 12.5 r^2`, `9 + 12.5 r^2 - 20 r + 4 ln(5r)`,
/// `3 + 4 ln 2`), to `t = 3`. A steady solution: the exact solution is the initial state, so the
/// error measures the scheme's dissipation of a rotating flow.
pub fn gresho_vortex<R: Real>(
    options: &ProblemOptions,
    gamma: f64,
) -> Result<Problem<R, 2, Euler<2>>, CloudError> {
    let (eq, mut cloud) = gas_box::<R, 2>(options, gamma, [0.0; 2], [1.0; 2], [true; 2])?;
    fill_gas(&mut cloud, &eq, gresho_state);
    Ok(gas_problem(
        "gresho_vortex",
        cloud,
        eq,
        Boundaries::new(),
        Some(Box::new(move |x, _, out| {
            let (rho, v, p) = gresho_state(x);
            gas_conserved(gamma, rho, v, p, out)
        })),
        3.0,
    ))
}

/// The Gresho vortex's density, velocity and pressure at `x`.
fn gresho_state([x, y]: [f64; 2]) -> (f64, [f64; 2], f64) {
    let (dx, dy) = (x - 0.5, y - 0.5);
    let r = (dx * dx + dy * dy).sqrt();
    let (speed, p) = if r < 0.2 {
        (5.0 * r, 5.0 + 12.5 * r * r)
    } else if r < 0.4 {
        (
            2.0 - 5.0 * r,
            9.0 + 12.5 * r * r - 20.0 * r + 4.0 * (5.0 * r).ln(),
        )
    } else {
        (0.0, 3.0 + 4.0 * 2f64.ln())
    };
    let v = if r > 0.0 {
        [-speed * dy / r, speed * dx / r]
    } else {
        [0.0, 0.0]
    };
    (1.0, v, p)
}

/// The Kelvin-Helmholtz instability on the periodic unit square (the set-up of Springel's
/// moving-mesh tests): a dense band (density 2, velocity +0.5 along x) for `|y - 1/2| < 1/4`
/// between light gas (density 1, velocity -0.5), pressure 2.5, seeded by a transverse velocity
/// `0.1 sin(4 pi x)` localised at both interfaces (Gaussians of width 0.05 / sqrt 2); to
/// `t = 2`, when the billows have rolled up. No exact solution.
pub fn kelvin_helmholtz<R: Real>(
    options: &ProblemOptions,
    gamma: f64,
) -> Result<Problem<R, 2, Euler<2>>, CloudError> {
    let (eq, mut cloud) = gas_box::<R, 2>(options, gamma, [0.0; 2], [1.0; 2], [true; 2])?;
    let sigma2 = 2.0 * (0.05f64 / 2f64.sqrt()).powi(2);
    fill_gas(&mut cloud, &eq, |[x, y]| {
        let inside = (y - 0.5).abs() < 0.25;
        let (rho, vx) = if inside { (2.0, 0.5) } else { (1.0, -0.5) };
        let seed = (-(y - 0.25).powi(2) / sigma2).exp() + (-(y - 0.75).powi(2) / sigma2).exp();
        let vy = 0.1 * (4.0 * std::f64::consts::PI * x).sin() * seed;
        (rho, [vx, vy], 2.5)
    });
    Ok(gas_problem(
        "kelvin_helmholtz",
        cloud,
        eq,
        Boundaries::new(),
        None,
        2.0,
    ))
}

/// The Sedov-Taylor blast in 2-D (cylindrical) on the periodic unit square: gas of density 1 at
/// pressure `1e-5`, with the energy 1 deposited as pressure, evenly by volume, in the particles
/// within two spacings of the centre; a strong circular shock runs out to `R = xi0 (E t^2 /
/// rho0)^(1/4)` (`xi0 = 1.004` for gamma = 1.4), with a density peak of `(gamma + 1) / (gamma -
/// 1)` behind it and a hot, empty centre. Exact: the self-similar solution ([`exact::Sedov`];
/// the ambient pressure and the deposit's finite size are what it leaves out). To `t = 0.1`
/// (`R = 0.318`: the shock stays inside the box to `t = 0.25`).
pub fn sedov<R: Real>(
    options: &ProblemOptions,
    gamma: f64,
) -> Result<Problem<R, 2, Euler<2>>, CloudError> {
    const ENERGY: f64 = 1.0;
    const AMBIENT: f64 = 1e-5;
    let (eq, mut cloud) = gas_box::<R, 2>(options, gamma, [0.0; 2], [1.0; 2], [true; 2])?;
    let solution = exact::Sedov::new(gamma, 2)?;
    let deposit = 2.0 * spacing(options)?;
    let inside = |[x, y]: [f64; 2]| (x - 0.5).hypot(y - 0.5) < deposit;
    let inside_volumes: Vec<f64> = (0..cloud.len())
        .filter(|&i| inside(cloud.position_of(i)))
        .map(|i| cloud.volumes()[i].as_f64())
        .collect();
    // On ranks, the few volumes gathered in rank order (the one-process order) and summed as
    // one process sums them.
    let volume: f64 = match &options.ranks {
        Some(comm) => mote_core::comm::all_gather_varied(comm.as_ref(), &inside_volumes).0,
        None => inside_volumes,
    }
    .iter()
    .sum();
    let hot = (gamma - 1.0) * ENERGY / volume;
    fill_gas(&mut cloud, &eq, |x| {
        (1.0, [0.0; 2], if inside(x) { hot } else { AMBIENT })
    });
    Ok(gas_problem(
        "sedov",
        cloud,
        eq,
        Boundaries::new(),
        Some(Box::new(move |[x, y], t, out| {
            let (dx, dy) = (x - 0.5, y - 0.5);
            let r = dx.hypot(dy);
            let (rho, u, p) = solution.state(r, t, ENERGY, 1.0, AMBIENT);
            let v = if r > 0.0 {
                [u * dx / r, u * dy / r]
            } else {
                [0.0; 2]
            };
            gas_conserved(gamma, rho, v, p, out)
        })),
        0.1,
    ))
}

/// Noh's implosion in 2-D (cylindrical) on `[-1, 1]^2`: cold gas (density 1, pressure
/// `1e-6`) streaming at unit speed towards the centre, where it stagnates behind an outgoing
/// shock at `r = t / 3` (density `((gamma + 1) / (gamma - 1))^2`, 16 for gamma = 5/3); outside,
/// the converging gas is compressed to `1 + t / r`. The faces are held at the exact inflowing
/// state (an [`Inflow`] condition: host code, so the run is on the CPU). To `t = 0.6`.
pub fn noh<R: Real>(
    options: &ProblemOptions,
    gamma: f64,
) -> Result<Problem<R, 2, Euler<2>>, CloudError> {
    let (eq, mut cloud) = gas_box::<R, 2>(options, gamma, [-1.0; 2], [1.0; 2], [false; 2])?;
    let state = move |x: [f64; 2], t: f64| noh_state(gamma, x, t);
    fill_gas(&mut cloud, &eq, |x| state(x, 0.0));
    let inflow = move |t: f64, x: [f64; 2], out: &mut [R]| {
        let (rho, v, p) = state(x, t);
        let mut exact = [0.0; 4];
        gas_conserved(gamma, rho, v, p, &mut exact);
        for (o, e) in out.iter_mut().zip(exact) {
            *o = R::cast(e);
        }
    };
    let mut boundaries = Boundaries::new();
    for axis in 0..2 {
        for upper in [false, true] {
            boundaries = boundaries.with(Cloud::<R, 2>::face_tag(axis, upper), Inflow(inflow));
        }
    }
    Ok(gas_problem(
        "noh",
        cloud,
        eq,
        boundaries,
        Some(Box::new(move |x, t, out| {
            let (rho, v, p) = state(x, t);
            gas_conserved(gamma, rho, v, p, out)
        })),
        0.6,
    ))
}

/// The pressure of Noh's cold gas.
const NOH_PRESSURE: f64 = 1e-6;

/// Noh's 2-D solution at `x` and `t`: inside the shock (`r < t / 3`) gas at rest at density
/// `((g + 1) / (g - 1))^2` and pressure `(g - 1) / 2 * density` (the inflow's kinetic energy
/// per mass, 1/2, thermalised); outside, the inflow at unit speed, density `1 + t / r`, its
/// pressure compressed adiabatically from `1e-6`.
fn noh_state(gamma: f64, [x, y]: [f64; 2], t: f64) -> (f64, [f64; 2], f64) {
    let r = (x * x + y * y).sqrt();
    if r < t / 3.0 {
        let rho = ((gamma + 1.0) / (gamma - 1.0)).powi(2);
        (rho, [0.0, 0.0], 0.5 * (gamma - 1.0) * rho)
    } else if r > 0.0 {
        let rho = 1.0 + t / r;
        (rho, [-x / r, -y / r], NOH_PRESSURE * rho.powf(gamma))
    } else {
        (1.0, [0.0, 0.0], NOH_PRESSURE)
    }
}

/// A constant gas state of a Riemann problem.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GasData<const D: usize> {
    /// Density.
    pub density: f64,
    /// Velocity.
    pub velocity: [f64; D],
    /// Pressure.
    pub pressure: f64,
}

/// Where the two states of a Riemann problem meet on the unit box `[0, 1]^D`: the plane normal
/// to `normal` through the point at `position` along the normal line through the box's centre,
/// measured as on the x axis (0.5: through the centre; for the x axis, the plane `x = position`).
/// The left state lies behind the plane, the right state ahead of it (along the normal).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Diaphragm<const D: usize> {
    /// Position along the normal, 0 to 1.
    pub position: f64,
    /// The plane's normal (any length but zero).
    pub normal: [f64; D],
}

impl<const D: usize> Diaphragm<D> {
    /// The unit normal and the signed distance of `x` from the plane, or an error for a zero or
    /// non-finite normal or a position off the box.
    fn signed_distance(&self) -> Result<impl Fn([f64; D]) -> f64 + Copy + use<D>, CloudError> {
        let length = self.normal.iter().map(|c| c * c).sum::<f64>().sqrt();
        if !(length.is_finite() && length > 0.0) {
            return Err(CloudError::invalid(
                "normal",
                format!("{:?}", self.normal),
                "a finite, non-zero vector",
            ));
        }
        if !(self.position.is_finite() && (0.0..=1.0).contains(&self.position)) {
            return Err(CloudError::invalid(
                "diaphragm",
                self.position,
                "a position in [0, 1]",
            ));
        }
        let n: [f64; D] = std::array::from_fn(|d| self.normal[d] / length);
        // The plane through centre + (position - 1/2) n.
        let offset = n.iter().sum::<f64>() * 0.5 + self.position - 0.5;
        Ok(move |x: [f64; D]| (0..D).map(|d| n[d] * x[d]).sum::<f64>() - offset)
    }

    /// The unit normal.
    fn unit_normal(&self) -> [f64; D] {
        let length = self.normal.iter().map(|c| c * c).sum::<f64>().sqrt();
        std::array::from_fn(|d| self.normal[d] / length)
    }
}

/// A user's gas on the unit box `[0, 1]^D` (periodic, or with outflow faces, or with slip
/// walls when `walls`): `state` gives the density, velocity and pressure at a position, or an
/// error (a value that is not a gas state, named by the caller). No exact solution.
pub fn custom_gas<R: Real, const D: usize>(
    options: &ProblemOptions,
    gamma: f64,
    periodic: bool,
    walls: bool,
    state: impl Fn([f64; D]) -> Result<(f64, [f64; D], f64), CloudError>,
) -> Result<Problem<R, D, Euler<D>>, CloudError> {
    let (eq, mut cloud) = gas_box::<R, D>(options, gamma, [0.0; D], [1.0; D], [periodic; D])?;
    for i in 0..cloud.len() {
        let (rho, v, p) = state(cloud.position_of(i))?;
        for (k, value) in eq.conservative(rho, v, p).into_iter().enumerate() {
            cloud.state_var_mut(k)[i] = R::cast(value);
        }
    }
    Ok(gas_problem(
        "custom",
        cloud,
        eq,
        custom_boundaries(periodic, walls),
        None,
        0.2,
    ))
}

/// The boundaries of a custom problem's unit box: none (periodic), slip walls, or outflow.
fn custom_boundaries<R: Real, const D: usize>(periodic: bool, walls: bool) -> Boundaries<R, D> {
    if walls && !periodic {
        (0..D).fold(Boundaries::new(), |b, d| {
            b.with_axis(d, SlipWall::default())
        })
    } else {
        outflow_unless(periodic)
    }
}

/// A gas whose particles and conserved state the caller gives (`[problem] kind = "file"`), on
/// the unit box with the boundaries of a custom problem (periodic, outflow or slip walls).
pub fn gas_from_cloud<R: Real, const D: usize>(
    cloud: Cloud<R, D>,
    gamma: f64,
    periodic: bool,
    walls: bool,
) -> Result<Problem<R, D, Euler<D>>, CloudError> {
    let eq = Euler::<D>::new(gamma)?;
    Ok(gas_problem(
        "file",
        cloud,
        eq,
        custom_boundaries(periodic, walls),
        None,
        0.2,
    ))
}

/// A scalar state under `equation` whose particles and values the caller gives
/// (`[problem] kind = "file"`), on the unit box, periodic or with outflow faces.
pub fn scalar_from_cloud<R: Real, const D: usize, E>(
    cloud: Cloud<R, D>,
    equation: E,
    periodic: bool,
) -> Problem<R, D, E> {
    Problem {
        name: "file",
        cloud,
        equation,
        boundaries: outflow_unless(periodic),
        variables: vec!["u".to_string()],
        primitive: Vec::new(),
        exact: None,
        end_time: 0.2,
    }
}

/// A user's scalar state `u0` under `equation` on the unit box (periodic, or with outflow
/// faces), with the exact solution `exact` where the caller knows one.
pub fn custom_scalar<R: Real, const D: usize, E>(
    options: &ProblemOptions,
    equation: E,
    periodic: bool,
    u0: impl Fn([f64; D]) -> Result<f64, CloudError>,
    exact: Option<ExactFn<D>>,
) -> Result<Problem<R, D, E>, CloudError> {
    let h = spacing(options)?;
    let domain = Domain::new_box([0.0; D], [1.0; D], [periodic; D])?;
    let mut cloud = lattice::<R, D>(domain, h, options, 1)?;
    for i in 0..cloud.len() {
        cloud.state_var_mut(0)[i] = R::cast(u0(cloud.position_of(i))?);
    }
    Ok(Problem {
        name: "custom",
        cloud,
        equation,
        boundaries: outflow_unless(periodic),
        variables: vec!["u".to_string()],
        primitive: Vec::new(),
        exact,
        end_time: 0.2,
    })
}

/// Outflow on every axis of a box that is not periodic; none on a periodic one.
fn outflow_unless<R: Real, const D: usize>(periodic: bool) -> Boundaries<R, D> {
    let mut boundaries = Boundaries::new();
    if !periodic {
        for d in 0..D {
            boundaries = boundaries.with_axis(d, Outflow);
        }
    }
    boundaries
}

/// The Riemann problem of the Euler equations on the unit box `[0, 1]^D` with outflow faces:
/// `left` behind the diaphragm, `right` ahead of it, to `end_time`. Exact by the 1-D Riemann
/// solver along the normal, the tangential velocity carried by the contact (valid until the
/// waves reach the faces). Toro's tests (ch. 4 and 10) and the 123 problem are instances.
pub fn gas_riemann<R: Real, const D: usize>(
    options: &ProblemOptions,
    gamma: f64,
    left: GasData<D>,
    right: GasData<D>,
    diaphragm: Diaphragm<D>,
    end_time: f64,
) -> Result<Problem<R, D, Euler<D>>, CloudError> {
    let h = spacing(options)?;
    let eq = Euler::<D>::new(gamma)?;
    let distance = diaphragm.signed_distance()?;
    let n = diaphragm.unit_normal();
    let normal_speed = |v: [f64; D]| (0..D).map(|d| n[d] * v[d]).sum::<f64>();
    let tangential = |v: [f64; D]| -> [f64; D] {
        let un = normal_speed(v);
        std::array::from_fn(|d| v[d] - un * n[d])
    };
    let one_d = |s: GasData<D>| GasState {
        rho: s.density,
        u: normal_speed(s.velocity),
        p: s.pressure,
    };
    let riemann = EulerRiemann::solve(one_d(left), one_d(right), gamma)?;
    let domain = Domain::new_box([0.0; D], [1.0; D], [false; D])?;
    let mut cloud = lattice::<R, D>(domain, h, options, D + 2)?;
    fill_gas(&mut cloud, &eq, |x| {
        let s = if distance(x) < 0.0 { left } else { right };
        (s.density, s.velocity, s.pressure)
    });
    let (tl, tr) = (tangential(left.velocity), tangential(right.velocity));
    let mut boundaries = Boundaries::new();
    for d in 0..D {
        boundaries = boundaries.with_axis(d, Outflow);
    }
    Ok(gas_problem(
        "riemann",
        cloud,
        eq,
        boundaries,
        Some(Box::new(move |x, t, out| {
            let s = distance(x);
            let (w, behind) = if t > 0.0 {
                let xi = s / t;
                (riemann.sample(xi), xi <= riemann.u_star)
            } else if s < 0.0 {
                (riemann.sample(f64::NEG_INFINITY), true)
            } else {
                (riemann.sample(f64::INFINITY), false)
            };
            let t = if behind { tl } else { tr };
            let v: [f64; D] = std::array::from_fn(|d| t[d] + w.u * n[d]);
            gas_conserved(gamma, w.rho, v, w.p, out)
        })),
        end_time,
    ))
}

/// A 1-D Riemann problem of Burgers' equation on `[0, 1]` with outflow ends: `left` below
/// `position`, `right` above it, to `end_time`; exact: a shock or a rarefaction fan
/// ([`exact::burgers_riemann`]).
pub fn burgers_riemann<R: Real>(
    options: &ProblemOptions,
    left: f64,
    right: f64,
    position: f64,
    end_time: f64,
) -> Result<Problem<R, 1, Burgers<1>>, CloudError> {
    let cloud = scalar_riemann_cloud::<R>(options, left, right, position)?;
    Ok(Problem {
        name: "riemann",
        cloud,
        equation: Burgers::<1>,
        boundaries: Boundaries::new().with_axis(0, Outflow),
        variables: vec!["u".to_string()],
        primitive: Vec::new(),
        exact: Some(scalar_exact(move |x, t| {
            if t > 0.0 {
                exact::burgers_riemann(left, right, (x[0] - position) / t)
            } else if x[0] < position {
                left
            } else {
                right
            }
        })),
        end_time,
    })
}

/// A 1-D Riemann problem of linear advection at unit speed on `[0, 1]` with outflow ends:
/// `left` below `position`, `right` above it, to `end_time`; exact: the step carried along.
pub fn advection_riemann<R: Real>(
    options: &ProblemOptions,
    left: f64,
    right: f64,
    position: f64,
    end_time: f64,
) -> Result<Problem<R, 1, LinearAdvection<1>>, CloudError> {
    let cloud = scalar_riemann_cloud::<R>(options, left, right, position)?;
    Ok(Problem {
        name: "riemann",
        cloud,
        equation: LinearAdvection::scalar([1.0], 1),
        boundaries: Boundaries::new().with_axis(0, Outflow),
        variables: vec!["u".to_string()],
        primitive: Vec::new(),
        exact: Some(scalar_exact(
            move |x, t| {
                if x[0] - t < position { left } else { right }
            },
        )),
        end_time,
    })
}

/// The cloud of a 1-D scalar Riemann problem on `[0, 1]`.
fn scalar_riemann_cloud<R: Real>(
    options: &ProblemOptions,
    left: f64,
    right: f64,
    position: f64,
) -> Result<Cloud<R, 1>, CloudError> {
    let h = spacing(options)?;
    if !(position.is_finite() && (0.0..=1.0).contains(&position)) {
        return Err(CloudError::invalid(
            "diaphragm",
            position,
            "a position in [0, 1]",
        ));
    }
    for (name, value) in [("left", left), ("right", right)] {
        if !value.is_finite() {
            return Err(CloudError::invalid(name, value, "a finite value"));
        }
    }
    let domain = Domain::new_box([0.0], [1.0], [false])?;
    let mut cloud = lattice::<R, 1>(domain, h, options, 1)?;
    for i in 0..cloud.len() {
        let x = cloud.position_of(i)[0];
        cloud.state_var_mut(0)[i] = R::cast(if x < position { left } else { right });
    }
    Ok(cloud)
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
            ranks: None,
        }
    }

    /// Each problem's initial state is its exact solution at t = 0, and the clouds have the
    /// announced size.
    #[test]
    fn initial_states_match_the_exact_solutions_at_time_zero() {
        fn check<R: Real, const D: usize, E>(p: &Problem<R, D, E>, interior: usize) {
            let exact = p.exact.as_ref().expect("an exact solution");
            for e in exact::errors_all(&p.cloud, |x, out| exact(x, 0.0, out)) {
                assert!(e.max < 1e-12, "{}: {e:?}", p.name);
            }
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
        let gas = |density, velocity, pressure| GasData::<2> {
            density,
            velocity,
            pressure,
        };
        let oblique = Diaphragm {
            position: 0.4,
            normal: [1.0, 2.0],
        };
        let (left, right) = (gas(1.0, [0.3, -0.2], 1.0), gas(0.2, [0.1, 0.4], 0.3));
        let p = gas_riemann::<f64, 2>(&options(16, 4), 1.4, left, right, oblique, 0.1).unwrap();
        check(&p, 256);
        check(
            &burgers_riemann::<f64>(&options(40, 1), 1.0, -0.5, 0.3, 0.2).unwrap(),
            40,
        );
        check(
            &advection_riemann::<f64>(&options(40, 1), 1.0, -0.5, 0.3, 0.2).unwrap(),
            40,
        );
        check(&gresho_vortex::<f64>(&options(16, 0), 1.4).unwrap(), 256);
        check(&noh::<f64>(&options(8, 3), 5.0 / 3.0).unwrap(), 256);
        let kh = kelvin_helmholtz::<f64>(&options(16, 0), 5.0 / 3.0).unwrap();
        assert!(kh.exact.is_none() && kh.cloud.len() == 256);
        let zero = Diaphragm {
            position: 0.5,
            normal: [0.0, 0.0],
        };
        assert!(gas_riemann::<f64, 2>(&options(16, 4), 1.4, left, right, zero, 0.1).is_err());
    }

    /// The Gresho vortex is in equilibrium: its pressure gradient balances the centripetal
    /// acceleration (dp/dr = rho v^2 / r, by central differences) and the pressure is continuous
    /// at r = 0.2 and 0.4. Noh's solution conserves mass across its shock: the inflow's mass
    /// flux `rho (1 + u_s)` with shock speed 1/3 equals the stagnant gas's `rho_s u_s`.
    #[test]
    fn gresho_is_in_equilibrium_and_noh_conserves_mass_across_its_shock() {
        for r in [0.05, 0.15, 0.25, 0.35, 0.45] {
            let at = |r: f64| gresho_state([0.5 + r, 0.5]);
            let dr = 1e-6;
            let dpdr = (at(r + dr).2 - at(r - dr).2) / (2.0 * dr);
            let v = at(r).1[1];
            assert!(
                (dpdr - v * v / r).abs() < 1e-6,
                "r {r}: {dpdr} vs {}",
                v * v / r
            );
        }
        for r in [0.2, 0.4] {
            let (a, b) = (
                gresho_state([0.5 + r - 1e-12, 0.5]),
                gresho_state([0.5 + r, 0.5]),
            );
            assert!((a.2 - b.2).abs() < 1e-9 && (a.1[1] - b.1[1]).abs() < 1e-9);
        }
        let g = 5.0 / 3.0;
        let t = 0.6;
        let (inner, outer) = (
            noh_state(g, [0.2 - 1e-9, 0.0], t),
            noh_state(g, [0.2 + 1e-9, 0.0], t),
        );
        assert!((inner.0 - 16.0).abs() < 1e-12);
        let us = 1.0 / 3.0;
        assert!(
            (outer.0 * (1.0 + us) - inner.0 * us).abs() < 1e-6,
            "{outer:?} {inner:?}"
        );
    }

    /// A planar Riemann problem in 2-D with its normal along y is the 1-D problem along y, with
    /// the tangential velocity carried by the contact: the exact states on both sides of the
    /// contact.
    #[test]
    fn an_oblique_riemann_problem_is_the_one_dimensional_one_along_its_normal() {
        let gas = |density, velocity, pressure| GasData::<2> {
            density,
            velocity,
            pressure,
        };
        let (left, right) = (gas(1.0, [0.5, 0.0], 1.0), gas(0.125, [-0.25, 0.0], 0.1));
        let along_y = Diaphragm {
            position: 0.5,
            normal: [0.0, 1.0],
        };
        let p = gas_riemann::<f64, 2>(&options(8, 2), 1.4, left, right, along_y, 0.2).unwrap();
        let sod = EulerRiemann::solve(
            GasState {
                rho: 1.0,
                u: 0.0,
                p: 1.0,
            },
            GasState {
                rho: 0.125,
                u: 0.0,
                p: 0.1,
            },
            1.4,
        )
        .unwrap();
        let exact = p.exact.as_ref().unwrap();
        let mut out = [0.0; 4];
        let t = 0.2;
        for y in [0.1, 0.45, 0.55, 0.6, 0.7, 0.9] {
            exact([0.37, y], t, &mut out);
            let w = sod.sample((y - 0.5) / t);
            let vx = if (y - 0.5) / t <= sod.u_star {
                0.5
            } else {
                -0.25
            };
            let expected = [w.rho, w.rho * vx, w.rho * w.u];
            for k in 0..3 {
                assert!((out[k] - expected[k]).abs() < 1e-14, "y {y}: {out:?}");
            }
        }
    }
}
