//! Residue number systems: a basis of coprime word-sized moduli
//! ([`RnsBasis`]), exact CRT reconstruction with `num-bigint`, a fast
//! centred CRT to `f64` for decoding ([`CrtToFloat`]), and fast base
//! conversion between bases ([`BaseConverter`]), the kernel of ModUp, ModDown
//! and rescaling.

mod basis;
mod convert;

pub use basis::{CrtToFloat, RnsBasis};
pub use convert::{BaseConverter, MontgomeryForm};
