//! The plaintext mathematics of CKKS bootstrapping for hemem, written once
//! against [`arith::SlotArithmetic`] and tested in f64 through
//! [`arith::PlainSimulator`]:
//!
//! - [`dft`]: SlotToCoeff and CoeffToSlot as level-collapsed products of
//!   sparse diagonal matrices, with their rotation-key sets;
//! - [`linear_transform`]: baby-step giant-step evaluation of any
//!   diagonal-sparse linear transform, with hoisted rotations;
//! - [`approx`]: Chebyshev interpolation, the scaled cosine with double
//!   angles, the arcsine correction and their error in x-units;
//! - [`poly_eval`]: level-optimal, scale-aware polynomial evaluation in the
//!   Chebyshev or monomial basis;
//! - [`eval_mod`]: the approximate modular reduction composed from them;
//! - [`schedule`]: each preset's levels and scales through a bootstrap
//!   (`docs/BOOTSTRAP-SCHEDULE.md`), and [`simulate`]: the whole pipeline
//!   on the simulator, for precision estimates.
//!
//! The homomorphic bootstrapper (ModRaise, key handling, memory classes)
//! builds on these once hemem-ckks has key switching.

pub mod approx;
pub mod arith;
pub mod dft;
mod error;
pub mod eval_mod;
pub mod linear_transform;
pub mod poly_eval;
pub mod schedule;
pub mod simulate;

pub use error::{Error, Result};
pub use hemem_ckks as ckks;
