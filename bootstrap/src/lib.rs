//! CKKS bootstrapping for hemem (SlotToCoeff first, then ModRaise, CoeffToSlot
//! and EvalMod), written once over the `Backend` trait of `hemem-ckks`.
//!
//! The bootstrapper arrives with its own issue; this crate fixes its place at
//! the top of the dependency chain, below only the `hemem` facade.

pub use hemem_ckks as ckks;
