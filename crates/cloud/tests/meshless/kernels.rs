//! The batched (SIMD) derivative and flux passes against a plain per-pair reference written
//! here from the formulas, and bitwise equality across SIMD levels.

use std::f64::consts::TAU;

use mote_cloud::equations::{Equation, Euler, LinearAdvection};
use mote_cloud::flux::rusanov;
use mote_cloud::mls::{Basis, default_radius_factor};
use mote_cloud::scheme::{Formulation, Muscl};
use mote_cloud::{Cloud, Domain, LatticeOptions, NeighbourList, NeighbourSearch, RowMajor, Weight};
use mote_core::{CpuBackend, SimdLevel};

/// Linear advection through the scalar trait methods only, so that the batched pass runs the
/// trait's default lane methods.
struct ScalarOnly(LinearAdvection<2>);

impl Equation<f64, 2> for ScalarOnly {
    fn name(&self) -> &'static str {
        "scalar_only"
    }
    fn variables(&self) -> usize {
        Equation::<f64, 2>::variables(&self.0)
    }
    fn flux(&self, u: &[f64], n: [f64; 2], out: &mut [f64]) {
        self.0.flux(u, n, out)
    }
    fn max_wave_speed(&self, u: &[f64], n: [f64; 2]) -> f64 {
        self.0.max_wave_speed(u, n)
    }
}

/// A jittered periodic cloud with `m` smooth variables and mixed orders `1..=order`.
fn cloud(m: usize, order: usize) -> Cloud<f64, 2> {
    cloud_with(m, order, |x, v| {
        let k = 1.0 + v as f64;
        (TAU * k * x[0]).sin() * (TAU * x[1]).cos() + 0.3 * v as f64
    })
}

/// [`cloud`] with variable `v` at `x` given by `state(x, v)`.
fn cloud_with(m: usize, order: usize, state: impl Fn([f64; 2], usize) -> f64) -> Cloud<f64, 2> {
    let opts = LatticeOptions {
        spacing: 1.0 / 14.0,
        jitter: 0.3,
        seed: 11,
        boundary_layers: 0,
    };
    let mut cloud = Cloud::<f64, 2>::lattice(Domain::unit_periodic(), opts, m).unwrap();
    cloud.reorder_morton();
    for (i, o) in cloud.orders_mut().iter_mut().enumerate() {
        *o = (if i % 5 == 0 { 1 + i % order } else { order }) as u8;
    }
    for i in 0..cloud.len() {
        let x = cloud.position_of(i);
        for v in 0..m {
            cloud.state_var_mut(v)[i] = state(x, v);
        }
    }
    cloud
}

/// An Euler state on the cloud: smooth, except near-vacuum particles every 23rd position in the
/// cloud's build order, next to which the reconstructions go negative and the flux pass falls
/// back to the particle values.
fn euler_cloud(order: usize) -> Cloud<f64, 2> {
    let eq = Euler::<2>::new(1.4).unwrap();
    let mut cloud = cloud_with(4, order, |x, v| {
        let (s, c) = ((TAU * x[0]).sin(), (TAU * x[1]).cos());
        let u = eq.conservative(1.0 + 0.5 * s * c, [0.3 * c, -0.2 * s], 1.0 + 0.4 * c);
        u[v]
    });
    for i in (0..cloud.len()).step_by(23) {
        let u = eq.conservative(1e-3, [0.0, 0.0], 1e-3);
        for (v, value) in u.into_iter().enumerate() {
            cloud.state_var_mut(v)[i] = value;
        }
    }
    cloud
}

/// `du/dt` from the plain formulas: derivatives by the MLS coefficients, Taylor
/// reconstruction at the pair midpoints with the interface order, Rusanov flux.
fn reference<E: Equation<f64, 2>>(
    scheme: &Muscl<f64, 2, E>,
    cloud: &Cloud<f64, 2>,
    list: &NeighbourList<RowMajor>,
    fallbacks: &mut usize,
) -> Vec<Vec<f64>> {
    let (n, m, order) = (cloud.len(), scheme.equation().variables(), scheme.order());
    let mr = scheme.reconstruction_terms();
    let idx = list.indices();
    let coef = |a: usize, s: usize| scheme.mls().coefficients(a)[s];
    let u = |v: usize, i: usize| cloud.state(v)[i];
    let derivs: Vec<Vec<Vec<f64>>> = (0..n)
        .map(|i| {
            (0..m)
                .map(|v| {
                    (0..mr)
                        .map(|a| {
                            list.slots(i)
                                .map(|s| coef(a, s) * (u(v, idx[s] as usize) - u(v, i)))
                                .sum()
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    let basis = Basis::<2>::new((order - 1).max(1)).unwrap();
    let geometry = cloud.geometry();
    let mut du = vec![vec![0.0; n]; m];
    for i in 0..n {
        let xi = cloud.position_of(i);
        let mut acc = vec![0.0; m];
        for s in list.slots(i) {
            let j = idx[s] as usize;
            let xj = cloud.position_of(j);
            let delta: [f64; 2] = std::array::from_fn(|d| {
                let x = xj[d] - xi[d];
                0.5 * (x - x.round())
            });
            let k = (cloud.orders()[i].min(cloud.orders()[j]) as usize).min(order);
            let terms = if k > 1 { Basis::<2>::size(k - 1) } else { 0 };
            let mut plus = vec![0.0; basis.len()];
            let mut minus = vec![0.0; basis.len()];
            basis.eval(delta, &mut plus);
            basis.eval(delta.map(|x| -x), &mut minus);
            let mut ul: Vec<f64> = (0..m)
                .map(|v| u(v, i) + (0..terms).map(|a| derivs[i][v][a] * plus[a]).sum::<f64>())
                .collect();
            let mut ur: Vec<f64> = (0..m)
                .map(|v| u(v, j) + (0..terms).map(|a| derivs[j][v][a] * minus[a]).sum::<f64>())
                .collect();
            // Euler: an inadmissible reconstruction falls back to the particle values.
            let eq = scheme.equation();
            if eq.checks_reconstruction() && !(eq.admissible(&ul) && eq.admissible(&ur)) {
                *fallbacks += 1;
                ul = (0..m).map(|v| u(v, i)).collect();
                ur = (0..m).map(|v| u(v, j)).collect();
            }
            let b = [coef(0, s), coef(1, s)];
            let normal = match scheme.formulation() {
                Formulation::MlsDivergence => b,
                Formulation::Conservative => {
                    let back = list.slots(j).find(|&t| idx[t] as usize == i).unwrap();
                    std::array::from_fn(|d| {
                        geometry.volumes[i] * b[d] - geometry.volumes[j] * coef(d, back)
                    })
                }
            };
            let mut f = vec![0.0; m];
            rusanov(scheme.equation(), &ul, &ur, normal, &mut f);
            let mut fi = vec![0.0; m];
            scheme.equation().flux(
                &(0..m).map(|v| u(v, i)).collect::<Vec<_>>(),
                normal,
                &mut fi,
            );
            for v in 0..m {
                acc[v] += match scheme.formulation() {
                    Formulation::MlsDivergence => f[v] - fi[v],
                    Formulation::Conservative => f[v],
                };
            }
        }
        for v in 0..m {
            du[v][i] = match scheme.formulation() {
                Formulation::MlsDivergence => -2.0 * acc[v],
                Formulation::Conservative => -acc[v] / geometry.volumes[i],
            };
        }
    }
    du
}

/// Runs the scheme's passes at every available SIMD level: asserts they agree bitwise and
/// returns the largest difference from the reference relative to its largest value.
fn compare<E: Equation<f64, 2>>(equation: E, order: usize, formulation: Formulation) -> f64 {
    let cloud = cloud(equation.variables(), order);
    compare_on(equation, cloud, order, formulation).0
}

/// [`compare`] on a given cloud; also returns how many pairs the reference computed with the
/// admissibility fallback.
fn compare_on<E: Equation<f64, 2>>(
    equation: E,
    cloud: Cloud<f64, 2>,
    order: usize,
    formulation: Formulation,
) -> (f64, usize) {
    let m = equation.variables();
    let mut scheme = Muscl::new(equation, order, formulation, Weight::default()).unwrap();
    let radius = default_radius_factor::<2>(order) / 14.0;
    let mut list = NeighbourList::<RowMajor>::default();
    NeighbourSearch::new(radius)
        .unwrap()
        .build(&cloud, CpuBackend::Serial, &mut list)
        .unwrap();
    scheme.prepare(&cloud, &list, CpuBackend::Serial).unwrap();
    let mut fallbacks = 0;
    let expected = reference(&scheme, &cloud, &list, &mut fallbacks);
    let u: Vec<&[f64]> = (0..m).map(|v| cloud.state(v)).collect();
    let mut first: Option<Vec<Vec<f64>>> = None;
    let mut worst = 0.0f64;
    for level in SimdLevel::gather_levels() {
        scheme.set_simd_level(level).unwrap();
        let mut du = vec![vec![0.0; cloud.len()]; m];
        let outs: Vec<&mut [f64]> = du.iter_mut().map(|x| x.as_mut_slice()).collect();
        scheme.rhs(&cloud.geometry(), &list, &u, outs, CpuBackend::threads(2));
        match &first {
            None => first = Some(du.clone()),
            Some(f) => assert!(
                f.iter()
                    .flatten()
                    .zip(du.iter().flatten())
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "SIMD level {level} differs from the first level"
            ),
        }
        let scale = expected
            .iter()
            .flatten()
            .fold(0.0f64, |a, x| a.max(x.abs()));
        let diff = expected
            .iter()
            .flatten()
            .zip(du.iter().flatten())
            .fold(0.0f64, |a, (x, y)| a.max((x - y).abs()));
        worst = worst.max(diff / scale);
    }
    (worst, fallbacks)
}

#[test]
fn batched_passes_match_the_plain_formulas_at_every_simd_level() {
    let scalar = || LinearAdvection::<2>::scalar([1.0, -0.5], 1);
    // Orders 1 (no reconstruction), 3 (closed-form quadratic terms) and 4 (recursive basis),
    // mixed per particle; both formulations.
    for (order, formulation) in [
        (1, Formulation::MlsDivergence),
        (3, Formulation::MlsDivergence),
        (3, Formulation::Conservative),
        (4, Formulation::MlsDivergence),
    ] {
        let e = compare(scalar(), order, formulation);
        assert!(e < 1e-12, "order {order} {formulation:?}: {e:e}");
    }
    // A two-variable system, through the lane methods and through the scalar defaults.
    let system = || {
        LinearAdvection::<2>::system(vec![vec![0.5, 1.0, 1.0, 0.5], vec![0.0, 0.3, 0.3, -0.2]])
            .unwrap()
    };
    let e = compare(system(), 3, Formulation::MlsDivergence);
    assert!(e < 1e-12, "system: {e:e}");
    let e = compare(ScalarOnly(system()), 3, Formulation::Conservative);
    assert!(e < 1e-12, "system, default lane methods: {e:e}");
    // Euler (its own Rusanov and admissibility lanes), with pairs that need the fallback.
    for order in [2, 3] {
        let eq = Euler::<2>::new(1.4).unwrap();
        let (e, fallbacks) = compare_on(eq, euler_cloud(order), order, Formulation::MlsDivergence);
        eprintln!("Euler MUSCL{order}: {fallbacks} pairs fell back, difference {e:e}");
        assert!(fallbacks > 0, "the test must exercise the fallback");
        assert!(e < 1e-12, "Euler MUSCL{order}: {e:e}");
    }
}

/// Every particle at the scheme's order (no MOOD): at orders 2 and 3 the flux pass of a scalar
/// equation runs groups compiled for a constant term count at the AVX2 level and the run-time
/// count at the others (decision 0017); all must give the same bits and the plain formulas.
/// Systems, and every equation at first order, take the term count per block instead of per
/// interface (the neighbours' orders are not read): checked here too, Euler with its
/// admissibility fallback.
#[test]
fn constant_term_groups_match_the_run_time_count() {
    for order in [1, 2, 3] {
        let mut uniform = cloud(1, order);
        uniform.orders_mut().fill(order as u8);
        for formulation in [Formulation::MlsDivergence, Formulation::Conservative] {
            let eq = LinearAdvection::<2>::scalar([1.0, -0.5], 1);
            let (e, _) = compare_on(eq, uniform.clone(), order, formulation);
            assert!(e < 1e-12, "order {order} {formulation:?}: {e:e}");
        }
        let mut system = cloud(2, order);
        system.orders_mut().fill(order as u8);
        let eq = LinearAdvection::<2>::scalar([0.5, 1.0], 2);
        let (e, _) = compare_on(eq, system, order, Formulation::MlsDivergence);
        assert!(e < 1e-12, "order {order}, two variables: {e:e}");
        let mut euler = euler_cloud(order);
        euler.orders_mut().fill(order as u8);
        let eq = Euler::<2>::new(1.4).unwrap();
        let (e, fallbacks) = compare_on(eq, euler, order, Formulation::MlsDivergence);
        assert!(e < 1e-12, "order {order}, Euler: {e:e}");
        assert!(
            order == 1 || fallbacks > 0,
            "Euler must exercise the fallback"
        );
    }
}
