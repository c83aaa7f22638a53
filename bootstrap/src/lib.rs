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
//!   Chebyshev or monomial basis, also an [`Evaluator`](ckks::eval::Evaluator)
//!   operation ([`poly_eval::EvaluatePolynomial`]) that lands on the
//!   default scale;
//! - the stages of a SlotToCoeff-first bootstrap, one module each:
//!   [`slot_to_coeff`], [`coeff_to_slot`] and [`eval_mod`] (the
//!   approximate modular reduction composed from them, with the split
//!   into real and imaginary parts before it and the recombination after);
//! - [`schedule`]: each preset's levels and scales through a bootstrap
//!   (`docs/BOOTSTRAP-SCHEDULE.md`), and [`simulate`]: the whole pipeline
//!   on the simulator, for precision estimates.
//!
//! The homomorphic [`Bootstrapper`] (ModRaise, key handling, memory
//! classes) builds on these: [`CkksOps`] implements
//! [`arith::SlotArithmetic`] for hemem-ckks ciphertexts and plaintexts, the
//! bootstrapper encodes the DFTs of a [`schedule::BootstrapSchedule`] once
//! (the encoded diagonals are its `BootstrapConstant` memory), and runs the
//! same stage functions as [`simulate`] around its own ModRaise, on the CPU
//! or the GPU, wherever its context lives; [`MultiBootstrapper`] spreads batches
//! over several devices of one host, each with its own bootstrapper.
//!
//! ```
//! use hemem_bootstrap::arith::{PlainSimulator, SlotArithmetic};
//! use hemem_bootstrap::ckks::params::{Parameters, Preset, SecurityCheck};
//! use hemem_bootstrap::dft::{DftKind, HomomorphicDft};
//! use hemem_bootstrap::poly_eval::{Polynomial, evaluate};
//! use num_complex::Complex64;
//!
//! # fn main() -> hemem_bootstrap::Result<()> {
//! let params = Parameters::from_preset_with(Preset::TestFGb, SecurityCheck::AllowInsecure)?;
//! let sim = PlainSimulator::new(&params);
//! let n = 16;
//! let z: Vec<Complex64> = (0..n).map(|j| Complex64::new(0.5 - j as f64 / 32.0, 0.25)).collect();
//! let level = 20;
//! let x = sim.value(&z, level, sim.prime(level)? as f64)?;
//!
//! // x³ − x/2, two levels down, at exactly the scale asked for.
//! let p = Polynomial::monomial(vec![0.0, -0.5, 0.0, 1.0])?;
//! let y = evaluate(&sim, &x, &p, 2f64.powi(50))?;
//! assert_eq!((sim.level(&y), sim.scale(&y)), (level - 2, 2f64.powi(50)));
//!
//! // CoeffToSlot undoes SlotToCoeff: six levels, each factor's diagonals
//! // encoded at the scale of the level's prime.
//! let stc = HomomorphicDft::with_levels(DftKind::SlotToCoeff, n, 3)?;
//! let cts = HomomorphicDft::with_levels(DftKind::CoeffToSlot, n, 3)?;
//! let scales = |top: usize| -> hemem_bootstrap::Result<Vec<f64>> {
//!     (0..3).map(|i| Ok(sim.prime(top - i)? as f64)).collect()
//! };
//! let stc = stc.encode(&sim, level, &scales(level)?, 0)?;
//! let cts = cts.encode(&sim, level - 3, &scales(level - 3)?, 0)?;
//! let back = cts.evaluate(&sim, &stc.evaluate(&sim, &x)?)?;
//! assert_eq!(sim.level(&back), level - 6);
//! for (a, b) in back.values().iter().zip(&z) {
//!     assert!((a - b).norm() < 1e-9);
//! }
//! # Ok(())
//! # }
//! ```

pub mod approx;
pub mod arith;
pub mod bootstrapper;
pub mod ckks_ops;
pub mod coeff_to_slot;
pub mod dft;
mod error;
pub mod eval_mod;
pub mod hoisting;
mod key_file;
pub mod linear_transform;
pub mod multi_device;
pub mod poly_eval;
pub mod schedule;
pub mod simulate;
pub mod slot_to_coeff;

pub use bootstrapper::{BootstrapKeys, BootstrapOptions, Bootstrapper, SHARED_EXPANSIONS, Stage};
pub use ckks_ops::CkksOps;
pub use error::{DeviceFailure, Error, Result};
pub use hemem_ckks as ckks;
pub use multi_device::{MultiBootstrapper, Split};
