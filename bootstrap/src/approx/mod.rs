//! Approximations for EvalMod, in f64: Chebyshev interpolation
//! ([`chebyshev`]), the scaled cosine and its double angles ([`cosine`]),
//! the arcsine correction ([`arcsine`]) and the error of a modular
//! reduction in x-units ([`error`]).
//!
//! BOOTSTRAP-NOTES §3.2: EvalMod approximates `cos(2π(x − ¼)/2^r)` on
//! `[−K, K]` and applies `r` double angles (`cos 2θ = 2cos²θ − 1`) to get
//! `sin(2πx)` (Han–Ki, ePrint 2019/688; Chebyshev interpolation after
//! Chen–Chillotti–Song, ePrint 2018/1043), optionally followed by an
//! arcsine (Lee et al., ePrint 2020/552) that removes the sine's own
//! error. Continuous Chebyshev fits are well conditioned, so f64 suffices.

pub mod arcsine;
pub mod chebyshev;
pub mod cosine;
pub mod error;
