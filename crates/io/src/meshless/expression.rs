//! Values of a user's initial state: a number, or an expression of the position `x`, `y`, `z`
//! (`exmex`: `+ - * / ^`, `sin cos tan exp ln log sqrt abs min max atan2 tanh ...`, the
//! constants `PI` and `E`; every number a float, so `1/2` is 0.5). A comparison (`<`, `<=`, `>`,
//! `>=`) is 1 where it holds and 0 elsewhere and binds looser than arithmetic, so regions are
//! written as sums of indicators: `1 - 0.875 * (x > 0.5)` is Sod's density.

use exmex::prelude::*;
use exmex::{BinOp, FloatOpsFactory, MakeOperators, Operator};
use serde::{Deserialize, Serialize};

/// The operators of an initial-state expression: exmex's float operators and the comparisons.
#[derive(Clone, Debug)]
pub struct Operators;

impl MakeOperators<f64> for Operators {
    fn make<'a>() -> Vec<Operator<'a, f64>> {
        let compare = |repr: &'a str, apply: fn(f64, f64) -> f64| {
            // Below `+` (0) and `-` (1): `x + 1 < 2` compares the sum.
            Operator::make_bin(
                repr,
                BinOp {
                    apply,
                    prio: -1,
                    is_commutative: false,
                },
            )
        };
        let mut ops = FloatOpsFactory::<f64>::make();
        ops.extend([
            compare("<=", |a, b| truth(a <= b)),
            compare(">=", |a, b| truth(a >= b)),
            compare("<", |a, b| truth(a < b)),
            compare(">", |a, b| truth(a > b)),
        ]);
        ops
    }
}

/// 1 for true, 0 for false.
fn truth(b: bool) -> f64 {
    if b { 1.0 } else { 0.0 }
}

/// A value of the initial state as the configuration gives it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    /// A constant.
    Number(f64),
    /// An expression of `x`, `y`, `z`.
    Expression(String),
}

/// A value ready to evaluate at positions.
#[derive(Clone, Debug)]
pub struct Parsed {
    expression: Option<FlatEx<f64, Operators>>,
    constant: f64,
    /// The axis of each of the expression's variables (in exmex's alphabetical order).
    axes: Vec<usize>,
}

/// The names of the coordinates.
const AXES: [&str; 3] = ["x", "y", "z"];

impl Parsed {
    /// Parses `value` for a problem in `dim` dimensions: an error says what is wrong (syntax,
    /// an unknown variable, a coordinate the problem does not have).
    pub fn parse(value: &Value, dim: usize) -> Result<Self, String> {
        let text = match value {
            Value::Number(c) => {
                return Ok(Self {
                    expression: None,
                    constant: *c,
                    axes: Vec::new(),
                });
            }
            Value::Expression(text) => text,
        };
        let expression = FlatEx::<f64, Operators>::parse(text)
            .map_err(|e| format!("\"{text}\" is not an expression: {e}"))?;
        let axes = expression
            .var_names()
            .iter()
            .map(|name| match AXES[..dim].iter().position(|a| a == name) {
                Some(axis) => Ok(axis),
                None => Err(format!(
                    "\"{text}\": unknown variable `{name}` (the variables are {} in {dim}-D)",
                    AXES[..dim].join(", ")
                )),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            expression: Some(expression),
            constant: f64::NAN,
            axes,
        })
    }

    /// The value at `x` (NaN where the expression cannot be evaluated).
    pub fn at(&self, x: &[f64]) -> f64 {
        match &self.expression {
            None => self.constant,
            Some(e) => {
                let mut vars = [0.0; 3];
                for (v, &axis) in vars.iter_mut().zip(&self.axes) {
                    *v = x[axis];
                }
                e.eval(&vars[..self.axes.len()]).unwrap_or(f64::NAN)
            }
        }
    }

    /// Whether the value is a number (not an expression).
    pub fn is_constant(&self) -> bool {
        self.expression.is_none()
    }
}
