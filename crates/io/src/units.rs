//! Physical units for gravity runs (`[units]`).
//!
//! Without the section a run is in N-body units (G = 1). With `length`, `mass` and `velocity`
//! (e.g. `"kpc"`, `"1e10 Msun"`, `"km/s"`), every number of the configuration and of the output
//! is in those units, the time unit is length / velocity, and G follows:
//! `G = G_SI * mass / (length * velocity^2)`. With `gravitational_constant` alone, the units are
//! the user's own and G is the given value.
//!
//! The engine always integrates with G = 1: a system with constant G is the G = 1 system in the
//! time `tau = sqrt(G) t` with the velocities `u = v / sqrt(G)` (positions and masses unchanged;
//! accelerations `G` times, energies `G` times, momenta `sqrt(G)` times the engine's). The
//! runner converts at its edges ([`Units::time_factor`]), so no solver carries a G and the
//! N-body models of the initial conditions (built with G = 1) are in equilibrium for any G.

use serde::{Deserialize, Serialize};

/// Newton's constant in SI units (CODATA 2018).
pub const G_SI: f64 = 6.674_30e-11;

/// Lengths by name, in metres.
const LENGTHS: [(&str, f64); 10] = [
    ("m", 1.0),
    ("cm", 1e-2),
    ("km", 1e3),
    ("Rsun", 6.957e8),
    ("au", 1.495_978_707e11),
    ("ly", 9.460_730_472_580_8e15),
    ("pc", 3.085_677_581_491_367e16),
    ("kpc", 3.085_677_581_491_367e19),
    ("Mpc", 3.085_677_581_491_367e22),
    ("Rearth", 6.3781e6),
];

/// Masses by name, in kilograms (the Sun's from its IAU nominal GM and G above).
const MASSES: [(&str, f64); 5] = [
    ("kg", 1.0),
    ("g", 1e-3),
    ("Msun", 1.327_124_4e20 / G_SI),
    ("Mjup", 1.266_865_3e17 / G_SI),
    ("Mearth", 3.986_004e14 / G_SI),
];

/// Velocities by name, in metres per second.
const VELOCITIES: [(&str, f64); 5] = [
    ("m/s", 1.0),
    ("cm/s", 1e-2),
    ("km/s", 1e3),
    ("au/yr", 1.495_978_707e11 / 31_557_600.0),
    ("pc/Myr", 3.085_677_581_491_367e16 / 31_557_600e6),
];

/// `[units]` of a gravity run: all unset (N-body units), the three units, or G alone.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UnitsSection {
    /// The length unit: a name (m, cm, km, Rsun, Rearth, au, ly, pc, kpc, Mpc), optionally with
    /// a factor (`"10 kpc"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub length: Option<String>,
    /// The mass unit: kg, g, Msun, Mjup, Mearth, optionally with a factor (`"1e10 Msun"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mass: Option<String>,
    /// The velocity unit: m/s, cm/s, km/s, au/yr, pc/Myr, optionally with a factor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub velocity: Option<String>,
    /// G in the user's own units (instead of the three units above).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gravitational_constant: Option<f64>,
}

/// A resolved unit system.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Units {
    /// G in these units.
    pub g: f64,
    /// The length unit's name (`length unit` for N-body or the user's own units).
    pub length: String,
    /// The mass unit's name.
    pub mass: String,
    /// The velocity unit's name.
    pub velocity: String,
    /// The time unit's name (length / velocity).
    pub time: String,
    /// The time unit in seconds, where the units are physical.
    pub time_seconds: Option<f64>,
    /// The length, mass and velocity units in SI (m, kg, m/s), where the units are physical.
    pub si: Option<[f64; 3]>,
}

impl Units {
    /// N-body units: G = 1.
    pub fn nbody() -> Self {
        Self {
            g: 1.0,
            length: "length unit".into(),
            mass: "mass unit".into(),
            velocity: "velocity unit".into(),
            time: "time unit".into(),
            time_seconds: None,
            si: None,
        }
    }

    /// `sqrt(G)`: engine time per unit of time, user velocity per engine velocity.
    pub fn time_factor(&self) -> f64 {
        self.g.sqrt()
    }
}

/// `"[FACTOR] NAME"` as a multiple of the SI unit, from `table`.
fn parse_unit(text: &str, table: &[(&str, f64)]) -> Result<f64, String> {
    let names = || table.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ");
    let mut words = text.split_whitespace();
    let (factor, name) = match (words.next(), words.next(), words.next()) {
        (Some(name), None, _) => (1.0, name),
        (Some(factor), Some(name), None) => (
            factor
                .parse::<f64>()
                .map_err(|_| format!("`{text}`: `{factor}` is not a number"))?,
            name,
        ),
        _ => {
            return Err(format!(
                "`{text}`: expected a unit such as \"kpc\" or \"1e10 Msun\""
            ));
        }
    };
    if !(factor.is_finite() && factor > 0.0) {
        return Err(format!("`{text}`: the factor must be a finite number > 0"));
    }
    let (_, si) = table
        .iter()
        .find(|(n, _)| *n == name)
        .ok_or_else(|| format!("`{name}` is not a known unit: {}", names()))?;
    Ok(factor * si)
}

impl UnitsSection {
    /// Whether nothing is set (N-body units): the section is then left out of `config.toml`.
    pub fn is_unset(&self) -> bool {
        *self == Self::default()
    }

    /// Checks the section: nothing, the three units, or G alone. The offending key and why.
    pub fn validate(&self) -> Result<(), (String, String)> {
        self.resolve().map(drop)
    }

    /// The unit system the section describes.
    pub fn resolve(&self) -> Result<Units, (String, String)> {
        let bad = |key: &str, msg: String| Err((format!("units.{key}"), msg));
        let given = [
            ("length", &self.length),
            ("mass", &self.mass),
            ("velocity", &self.velocity),
        ];
        let set = given.iter().filter(|(_, v)| v.is_some()).count();
        if let Some(g) = self.gravitational_constant {
            if set > 0 {
                return bad(
                    "gravitational_constant",
                    "give either length, mass and velocity (G follows from them) or \
                     gravitational_constant alone, not both"
                        .into(),
                );
            }
            if !(g.is_finite() && g > 0.0) {
                return bad(
                    "gravitational_constant",
                    format!("{g} is not allowed: a finite value > 0"),
                );
            }
            return Ok(Units {
                g,
                ..Units::nbody()
            });
        }
        if set == 0 {
            return Ok(Units::nbody());
        }
        if let Some((key, _)) = given.iter().find(|(_, v)| v.is_none()) {
            return bad(
                key,
                "required with the other units: length, mass and velocity together (G and the \
                 time unit follow from them)"
                    .into(),
            );
        }
        let (l, m, v) = (
            self.length.as_deref().expect("checked"),
            self.mass.as_deref().expect("checked"),
            self.velocity.as_deref().expect("checked"),
        );
        let length = parse_unit(l, &LENGTHS).map_err(|e| ("units.length".to_string(), e))?;
        let mass = parse_unit(m, &MASSES).map_err(|e| ("units.mass".to_string(), e))?;
        let velocity = parse_unit(v, &VELOCITIES).map_err(|e| ("units.velocity".to_string(), e))?;
        Ok(Units {
            g: G_SI * mass / (length * velocity * velocity),
            length: l.to_string(),
            mass: m.to_string(),
            velocity: v.to_string(),
            time: format!("{l}/({v})"),
            time_seconds: Some(length / velocity),
            si: Some([length, mass, velocity]),
        })
    }
}
