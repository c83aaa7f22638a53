//! Where objects live: the [`Device`] of a context and the
//! [`DeviceSelection`] asked for when one is made.

use std::fmt;
use std::str::FromStr;

/// Where an object lives and its operations run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Device {
    /// The host CPU.
    Cpu,
    /// The NVIDIA GPU with this ordinal.
    Gpu(usize),
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cpu => f.write_str("cpu"),
            Self::Gpu(i) => write!(f, "gpu:{i}"),
        }
    }
}

/// The device asked for when a context is made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DeviceSelection {
    /// The CPU.
    #[default]
    Cpu,
    /// The GPU with this ordinal; an error if there is none.
    Gpu(usize),
    /// The first GPU when one is usable, else the CPU.
    Auto,
}

impl FromStr for DeviceSelection {
    type Err = DeviceParseError;

    /// Parses `cpu`, `gpu`, `gpu:N` or `auto`.
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s {
            "cpu" => Ok(Self::Cpu),
            "gpu" => Ok(Self::Gpu(0)),
            "auto" => Ok(Self::Auto),
            _ => s
                .strip_prefix("gpu:")
                .and_then(|n| n.parse().ok())
                .map(Self::Gpu)
                .ok_or_else(|| DeviceParseError { name: s.to_owned() }),
        }
    }
}

impl fmt::Display for DeviceSelection {
    /// Writes the selection as its [`FromStr`] reads it:
    /// `cpu`, `gpu:N` or `auto`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cpu => f.write_str("cpu"),
            Self::Gpu(n) => write!(f, "gpu:{n}"),
            Self::Auto => f.write_str("auto"),
        }
    }
}

/// An unparseable device name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown device {name:?} (expected cpu, gpu, gpu:N or auto)")]
pub struct DeviceParseError {
    /// The name given.
    pub name: String,
}

#[cfg(test)]
mod tests {
    use rand_core::{Rng as _, SeedableRng as _};

    use super::DeviceSelection;

    /// Every selection prints as a name that parses back to it (random GPU
    /// ordinals), and the short name `gpu` is GPU 0.
    #[test]
    fn device_selections_print_as_they_parse() {
        let seed = 0x5e1ec7;
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
        let mut selections = vec![DeviceSelection::Cpu, DeviceSelection::Auto];
        selections.extend((0..32).map(|_| DeviceSelection::Gpu(rng.next_u64() as usize % 1024)));
        for s in selections {
            let name = s.to_string();
            assert_eq!(
                name.parse::<DeviceSelection>(),
                Ok(s),
                "seed {seed}: {name}"
            );
        }
        assert_eq!(
            "gpu".parse::<DeviceSelection>(),
            Ok(DeviceSelection::Gpu(0))
        );
        for bad in ["", "GPU", "gpu:", "gpu:-1", "cuda:0"] {
            assert!(bad.parse::<DeviceSelection>().is_err(), "{bad}");
        }
    }
}
