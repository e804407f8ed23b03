use mote_io::units::*;

fn units(l: &str, m: &str, v: &str) -> Result<Units, (String, String)> {
    UnitsSection {
        length: Some(l.into()),
        mass: Some(m.into()),
        velocity: Some(v.into()),
        gravitational_constant: None,
    }
    .resolve()
}

/// The values every galactic dynamicist knows: G = 4.30092e-6 kpc (km/s)^2 / Msun, the time
/// unit kpc / (km/s) = 0.9778 Gyr; G = 43009.2 in (kpc, 1e10 Msun, km/s), Gadget's units.
#[test]
fn g_follows_from_the_units() {
    let u = units("kpc", "Msun", "km/s").unwrap();
    assert!((u.g / 4.300_92e-6 - 1.0).abs() < 1e-5, "{}", u.g);
    let gyr = 1e9 * 31_557_600.0;
    assert!((u.time_seconds.unwrap() / gyr - 0.977_79).abs() < 1e-4);
    let gadget = units("kpc", "1e10 Msun", "km/s").unwrap();
    assert!((gadget.g / 43_009.2 - 1.0).abs() < 1e-5, "{}", gadget.g);
    // The Sun's GM in au and au/yr: 4 pi^2 (Kepler's third law in years).
    let solar = units("au", "Msun", "au/yr").unwrap();
    let four_pi2 = 4.0 * std::f64::consts::PI.powi(2);
    assert!((solar.g / four_pi2 - 1.0).abs() < 1e-4, "{}", solar.g);
}

#[test]
fn mistakes_name_the_key() {
    assert_eq!(
        units("parsec", "Msun", "km/s").unwrap_err().0,
        "units.length"
    );
    assert_eq!(units("pc", "0 Msun", "km/s").unwrap_err().0, "units.mass");
    assert_eq!(units("pc", "Msun", "km/h").unwrap_err().0, "units.velocity");
    let partial = UnitsSection {
        length: Some("pc".into()),
        ..Default::default()
    };
    assert_eq!(partial.resolve().unwrap_err().0, "units.mass");
    let both = UnitsSection {
        length: Some("pc".into()),
        gravitational_constant: Some(1.0),
        ..Default::default()
    };
    assert_eq!(
        both.resolve().unwrap_err().0,
        "units.gravitational_constant"
    );
    assert_eq!(UnitsSection::default().resolve().unwrap(), Units::nbody());
}
