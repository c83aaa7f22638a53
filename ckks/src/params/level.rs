//! Newtypes for levels, scales, degrees and gadget ranks.

use std::fmt;

/// A ciphertext level: level `l` means the primes `q_0 … q_l` are present.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Level(pub usize);

impl Level {
    /// The level as an index.
    pub const fn get(self) -> usize {
        self.0
    }

    /// Number of Q primes present at this level (`l + 1`; saturating, so
    /// that a level past any chain never wraps to zero primes).
    pub const fn primes(self) -> usize {
        self.0.saturating_add(1)
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The exact scale Δ of an encoded message, as an `f64` (never rounded to a
/// power of two: see DESIGN.md, "Levels and scales").
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Scale(pub f64);

impl Scale {
    /// The scale.
    pub const fn get(self) -> f64 {
        self.0
    }

    /// `log2` of the scale.
    pub fn log2(self) -> f64 {
        self.0.log2()
    }

    /// Whether two scales agree to within a relative `2^-40`: what additions
    /// require.
    pub fn matches(self, other: Self) -> bool {
        (self.0 - other.0).abs() <= self.0.abs().max(other.0.abs()) * (2f64).powi(-40)
    }
}

impl fmt::Display for Scale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "2^{:.4}", self.log2())
    }
}

/// The ring degree N (a power of two).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Degree(pub usize);

impl Degree {
    /// N.
    pub const fn get(self) -> usize {
        self.0
    }

    /// `log2 N`.
    pub const fn log2(self) -> u32 {
        self.0.trailing_zeros()
    }
}

/// The gadget rank of hybrid key switching: the number of digits the
/// modulus `Q` is split into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Dnum(pub usize);

impl Dnum {
    /// The rank.
    pub const fn get(self) -> usize {
        self.0
    }
}
