//! What a buffer holds ([`MemoryClass`]) and where it lives ([`Placement`]).

use std::fmt;
use std::str::FromStr;

use crate::Error;

/// What a buffer holds. The class decides placement and advice under each
/// memory policy; users never pass one by hand: the typed wrappers
/// (`Ciphertext`, `SwitchingKey`, scratch guards) pick it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemoryClass {
    /// User ciphertexts.
    Ciphertext,
    /// Encoded plaintexts.
    Plaintext,
    /// Relinearisation, rotation and conjugation keys (and public keys).
    EvaluationKey,
    /// Encoded CoeffToSlot / SlotToCoeff diagonals.
    BootstrapConstant,
    /// Twiddles, base-conversion tables and other per-context constants.
    Constant,
    /// Scratch inside one operation.
    Temporary,
}

impl MemoryClass {
    /// Every class, in a fixed order (the order of [`MemoryClass::index`]).
    pub const ALL: [Self; 6] = [
        Self::Ciphertext,
        Self::Plaintext,
        Self::EvaluationKey,
        Self::BootstrapConstant,
        Self::Constant,
        Self::Temporary,
    ];

    /// The class's name as written in JSON and CSV (`evaluation_key`, …).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Ciphertext => "ciphertext",
            Self::Plaintext => "plaintext",
            Self::EvaluationKey => "evaluation_key",
            Self::BootstrapConstant => "bootstrap_constant",
            Self::Constant => "constant",
            Self::Temporary => "temporary",
        }
    }

    /// Whether data of this class is written once and then only read
    /// (switching keys, bootstrapping diagonals): what the `planned` policy
    /// streams from a pinned host master copy.
    pub const fn is_read_only(self) -> bool {
        matches!(self, Self::EvaluationKey | Self::BootstrapConstant)
    }

    /// A dense index in `0..6`, for per-class tables.
    pub const fn index(self) -> usize {
        match self {
            Self::Ciphertext => 0,
            Self::Plaintext => 1,
            Self::EvaluationKey => 2,
            Self::BootstrapConstant => 3,
            Self::Constant => 4,
            Self::Temporary => 5,
        }
    }
}

impl fmt::Display for MemoryClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for MemoryClass {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| Error::UnknownClass { name: s.to_owned() })
    }
}

/// Where a buffer's memory lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Placement {
    /// Ordinary (pageable) host memory: the CPU backend's placement.
    Host,
    /// The library's own stream-ordered device memory pool.
    DevicePool,
    /// CUDA managed (unified) memory, prefetched before use.
    Managed,
    /// Pre-allocated pinned host memory, the target of explicit swaps.
    PinnedHost,
    /// A read-only object of the `planned` policy: a master copy in pinned
    /// host memory and, while the residency manager keeps it there, a copy
    /// in a pooled device slot.
    Streamed,
}

impl Placement {
    /// Every placement, in the order of [`Placement::index`].
    pub const ALL: [Self; 5] = [
        Self::Host,
        Self::DevicePool,
        Self::Managed,
        Self::PinnedHost,
        Self::Streamed,
    ];

    /// The placement's name as written in JSON and CSV.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Host => "host",
            Self::DevicePool => "device_pool",
            Self::Managed => "managed",
            Self::PinnedHost => "pinned_host",
            Self::Streamed => "streamed",
        }
    }

    /// A dense index in `0..5`, for per-placement tables.
    pub const fn index(self) -> usize {
        match self {
            Self::Host => 0,
            Self::DevicePool => 1,
            Self::Managed => 2,
            Self::PinnedHost => 3,
            Self::Streamed => 4,
        }
    }

    /// Whether the CPU may read and write this memory directly.
    pub const fn is_host_accessible(self) -> bool {
        matches!(self, Self::Host | Self::PinnedHost)
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_names_round_trip_and_indices_are_dense() {
        for (i, class) in MemoryClass::ALL.into_iter().enumerate() {
            assert_eq!(class.index(), i);
            assert_eq!(class.name().parse::<MemoryClass>(), Ok(class));
        }
        for (i, placement) in Placement::ALL.into_iter().enumerate() {
            assert_eq!(placement.index(), i);
        }
        assert!(matches!(
            "keys".parse::<MemoryClass>(),
            Err(Error::UnknownClass { .. })
        ));
    }
}
