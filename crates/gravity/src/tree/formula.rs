//! The tree's formulas on the CPU: `crates/gravity/formulas/tree.rs` compiled as plain Rust
//! ([`mote_formula::host!`]); the GPU crate compiles the same file as `#[cube]` functions.

use mote_core::formula::*;

mote_formula::host!("formulas/tree.rs");
