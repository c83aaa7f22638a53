//! The simulator's values, plaintexts and operation counts.

use num_complex::Complex64;

/// Operation counts of a [`PlainSimulator`](super::PlainSimulator), for cost estimates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpCounts {
    /// Additions and subtractions of two values.
    pub additions: usize,
    /// Tensor products with relinearisation.
    pub mul_relin: usize,
    /// Rescales.
    pub rescales: usize,
    /// Constant multiplications.
    pub mul_const: usize,
    /// Plaintext multiplications.
    pub mul_plain: usize,
    /// Rotations by a nonzero step (hoisted or not).
    pub rotations: usize,
    /// Hoisted rotation groups (one decomposition each).
    pub hoisted_groups: usize,
    /// Conjugations.
    pub conjugations: usize,
    /// Plaintexts encoded.
    pub encodings: usize,
    /// ModDowns (divisions by `P`) of one polynomial: two per ordinary key
    /// switch, fewer with double hoisting ([`crate::hoisting`]).
    pub mod_downs: usize,
    /// Limb NTTs (forward or inverse, `N` points, one prime) the CPU
    /// backend's algorithms run for the counted operations: decompositions
    /// (`dnum·(l+1+K)` at level `l`), ModDowns (`K + l + 1` each), rescales
    /// (`l + 1` per part) and expansions of compact plaintexts (`l + 1`, or
    /// `l + 1 + K` over `Q ∪ P`). Encodings at setup are not counted.
    pub ntt_limbs: usize,
}

/// A simulated ciphertext: the slot values in message units (the plaintext
/// divided by the scale, noise included), a level and an exact scale.
#[derive(Clone, Debug, PartialEq)]
pub struct SimValue {
    pub(crate) slots: Vec<Complex64>,
    pub(crate) level: usize,
    pub(crate) scale: f64,
}

impl SimValue {
    /// The slot values (message units).
    pub fn values(&self) -> &[Complex64] {
        &self.slots
    }

    /// The level.
    pub fn level(&self) -> usize {
        self.level
    }

    /// The scale.
    pub fn scale(&self) -> f64 {
        self.scale
    }
}

/// A simulated encoded plaintext: the slot values it decodes to (after the
/// encoder's rounding), its level and scale.
#[derive(Clone, Debug, PartialEq)]
pub struct SimPlain {
    pub(super) slots: Vec<Complex64>,
    pub(crate) level: usize,
    pub(super) scale: f64,
    /// Over `Q ∪ P` (for double hoisting, [`crate::hoisting`]).
    pub(crate) extended: bool,
}

impl SimPlain {
    /// The decoded slot values (after rounding).
    pub fn values(&self) -> &[Complex64] {
        &self.slots
    }

    /// The level.
    pub fn level(&self) -> usize {
        self.level
    }

    /// The scale.
    pub fn scale(&self) -> f64 {
        self.scale
    }
}
