//! Meshless III in one test binary (each test file would otherwise instantiate the solver at
//! the test profile's opt-level again: a few minutes of CI build each): adaptivity, moving
//! clouds, IMEX stepping with kinetic relaxation.

mod adapt;
mod moving;
mod relaxation;
