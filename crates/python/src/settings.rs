//! Keyword arguments as configuration keys: a Python call is turned into the overrides
//! (`section.key=value`) of a configuration, which the library parses and validates exactly as
//! it does a TOML file. The names, defaults, checks and messages are therefore those of the
//! configuration keys (`mote show` lists them), written once.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

/// The settings of a gravity simulation that Python passes by keyword, and the configuration
/// key each one sets.
pub const GRAVITY_SETTINGS: &[(&str, &str)] = &[
    ("precision", "run.precision"),
    ("dt", "run.dt"),
    ("threads", "run.threads"),
    ("memory_limit", "run.memory_limit"),
    ("backend", "run.backend"),
    ("device", "run.device"),
    ("solver", "solver.kind"),
    ("softening", "solver.softening"),
    ("kernel", "solver.kernel"),
    ("theta", "solver.theta"),
    ("multipole", "solver.multipole"),
    ("leaf_size", "solver.leaf_size"),
    ("group_size", "solver.group_size"),
    ("integrator", "integrator.kind"),
];

/// The settings of a meshless simulation that Python passes by keyword, and the configuration
/// key each one sets (a dict value sets the keys of a table: `left={"density": 1.0}`).
pub const MESHLESS_SETTINGS: &[(&str, &str)] = &[
    ("end_time", "run.end_time"),
    ("cfl", "run.cfl"),
    ("precision", "run.precision"),
    ("threads", "run.threads"),
    ("memory_limit", "run.memory_limit"),
    ("min_dt_ratio", "run.min_dt_ratio"),
    ("backend", "run.backend"),
    ("device", "run.device"),
    ("resolution", "problem.resolution"),
    ("jitter", "problem.jitter"),
    ("seed", "problem.seed"),
    ("dim", "problem.dim"),
    ("gamma", "problem.gamma"),
    ("equation", "problem.equation"),
    ("left", "problem.left"),
    ("right", "problem.right"),
    ("diaphragm", "problem.diaphragm"),
    ("normal", "problem.normal"),
    ("periodic", "problem.periodic"),
    ("faces", "problem.faces"),
    ("initial", "problem.initial"),
    ("path", "problem.path"),
    ("order", "scheme.order"),
    ("flux", "scheme.flux"),
    ("formulation", "scheme.formulation"),
    ("stepper", "scheme.stepper"),
    ("limiter", "scheme.limiter"),
    ("limiter_mode", "scheme.limiter_mode"),
    ("weno", "scheme.weno"),
    ("mood", "scheme.mood"),
    ("mood_strategy", "scheme.mood_strategy"),
    ("radius", "scheme.radius"),
    ("motion", "motion"),
    ("adaptivity", "adaptivity"),
    ("relaxation", "relaxation"),
];

/// `key=value` overrides for `value` at `key`: a dict sets each of its entries under `key`
/// (so the table's other keys keep their defaults), anything else one key.
pub fn push_override(key: &str, value: &Bound<'_, PyAny>, out: &mut Vec<String>) -> PyResult<()> {
    if let Ok(d) = value.cast::<PyDict>() {
        for (k, v) in d.iter() {
            let k: String = k.extract()?;
            push_override(&format!("{key}.{k}"), &v, out)?;
        }
        return Ok(());
    }
    out.push(format!("{key}={}", toml_value(value, key)?));
    Ok(())
}

/// The overrides for the entries of `set` (`{"section.key": value}`, as `--set` takes them).
pub fn set_overrides(set: Option<&Bound<'_, PyDict>>, out: &mut Vec<String>) -> PyResult<()> {
    for (key, value) in set.into_iter().flat_map(|d| d.iter()) {
        let key: String = key.extract()?;
        push_override(&key, &value, out)?;
    }
    Ok(())
}

/// The overrides for `kwargs` by `table` (Python name, configuration key); an unknown name is
/// refused with the names accepted.
pub fn table_overrides(
    kwargs: Option<&Bound<'_, PyDict>>,
    table: &[(&str, &str)],
    out: &mut Vec<String>,
) -> PyResult<()> {
    for (k, v) in kwargs.into_iter().flat_map(|d| d.iter()) {
        let name: String = k.extract()?;
        if v.is_none() {
            continue;
        }
        let Some((_, key)) = table.iter().find(|(n, _)| *n == name) else {
            let known: Vec<&str> = table.iter().map(|(n, _)| *n).collect();
            return Err(PyValueError::new_err(format!(
                "unknown setting `{name}`: expected one of {} (or any configuration key through \
                 set={{\"section.key\": value}})",
                known.join(", ")
            )));
        };
        push_override(key, &v, out)?;
    }
    Ok(())
}

/// A Python value as a TOML value (booleans, integers, floats, strings and lists of them).
pub fn toml_value(v: &Bound<'_, PyAny>, key: &str) -> PyResult<String> {
    if v.is_instance_of::<PyBool>() {
        return Ok(v.extract::<bool>()?.to_string());
    }
    if v.is_instance_of::<PyInt>() {
        return Ok(v.extract::<i128>()?.to_string());
    }
    if v.is_instance_of::<PyFloat>() {
        let x: f64 = v.extract()?;
        return Ok(if x.is_nan() {
            "nan".into()
        } else if x.is_infinite() {
            if x > 0.0 { "inf".into() } else { "-inf".into() }
        } else {
            // Rust's shortest round-trip form ("0.1", "1e-5") is a TOML float or integer;
            // an integral value gets a fraction so that it stays a float.
            let s = format!("{x:?}");
            if s.contains(['.', 'e', 'E']) {
                s
            } else {
                format!("{s}.0")
            }
        });
    }
    if v.is_instance_of::<PyString>() {
        let s: String = v.extract()?;
        return Ok(toml::Value::String(s).to_string());
    }
    if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        let items: Vec<String> = v
            .try_iter()?
            .map(|item| toml_value(&item?, key))
            .collect::<PyResult<_>>()?;
        return Ok(format!("[{}]", items.join(", ")));
    }
    // NumPy scalars and other numbers: as a float.
    if let Ok(x) = v.extract::<f64>() {
        return toml_value(&PyFloat::new(v.py(), x), key);
    }
    Err(PyTypeError::new_err(format!(
        "{key}: a {} is not a configuration value (expected a bool, number, string or list)",
        v.get_type().name()?
    )))
}

/// The overrides for `kwargs`: settings by their Python names and, for a built-in
/// distribution, the keys of `[initial_conditions]` its kind accepts (`initial`: the
/// configuration's own list; `n` is `particles`); anything else is refused with the names
/// accepted.
pub fn gravity_overrides(
    kwargs: Option<&Bound<'_, PyDict>>,
    initial: &[&str],
    out: &mut Vec<String>,
) -> PyResult<()> {
    let Some(kwargs) = kwargs else {
        return Ok(());
    };
    let takes_n = initial.contains(&"particles");
    for (k, v) in kwargs.iter() {
        let name: String = k.extract()?;
        if v.is_none() {
            continue;
        }
        let key = if let Some((_, key)) = GRAVITY_SETTINGS.iter().find(|(n, _)| *n == name) {
            key.to_string()
        } else if (takes_n && name == "n") || initial.contains(&name.as_str()) {
            let key = if name == "n" { "particles" } else { &name };
            format!("initial_conditions.{key}")
        } else {
            let mut known: Vec<&str> = GRAVITY_SETTINGS.iter().map(|(n, _)| *n).collect();
            if takes_n {
                known.push("n");
            }
            known.extend(initial);
            return Err(PyValueError::new_err(format!(
                "unknown setting `{name}`: expected one of {}",
                known.join(", ")
            )));
        };
        out.push(format!("{key}={}", toml_value(&v, &name)?));
    }
    Ok(())
}
