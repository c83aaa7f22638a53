//! [`DependentLaunch`]: whether kernels on a stream are launched with
//! programmatic dependent launch (`HEMEM_DEPENDENT_LAUNCH`).
//!
//! A launch with the programmatic-serialization attribute may start its
//! blocks while the previous kernel in the stream still runs; the kernel
//! itself then waits (`griddepcontrol.wait`) before it touches memory, so
//! the stream's order of memory effects is the same as with plain launches,
//! and what overlaps is the next kernel's scheduling with the previous one's
//! last wave (CUDA C++ Programming Guide, "Programmatic Dependent Launch and
//! Synchronization"). It needs compute capability 9.0 (Hopper) or newer and
//! kernels compiled for it. The setting lives with the memory system's
//! because it is a property of how work on hemem's streams is ordered.

use std::fmt;
use std::str::FromStr;

use super::ComputeCapability;
use crate::{ConfigError, Result};

/// Whether kernels are launched with programmatic dependent launch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DependentLaunch {
    /// Where the GPU supports it (compute capability 9.0 or newer), plain
    /// launches elsewhere.
    #[default]
    Auto,
    /// Always; a GPU that cannot is refused
    /// ([`ConfigError::DependentLaunchUnsupported`]).
    On,
    /// Never: every kernel starts when the previous one has completed.
    Off,
}

impl DependentLaunch {
    /// The lowest compute capability with `griddepcontrol` (Hopper).
    pub const MIN_CAPABILITY: ComputeCapability = ComputeCapability { major: 9, minor: 0 };

    /// Whether launches on a GPU of `capability` use it.
    ///
    /// # Errors
    /// [`ConfigError::DependentLaunchUnsupported`] for [`DependentLaunch::On`]
    /// below [`DependentLaunch::MIN_CAPABILITY`].
    pub fn enabled_for(self, capability: ComputeCapability) -> Result<bool> {
        let supported = capability >= Self::MIN_CAPABILITY;
        match self {
            Self::Auto => Ok(supported),
            Self::Off => Ok(false),
            Self::On if supported => Ok(true),
            Self::On => Err(ConfigError::DependentLaunchUnsupported { capability }.into()),
        }
    }
}

impl FromStr for DependentLaunch {
    type Err = crate::Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "auto" => Ok(Self::Auto),
            "on" | "1" | "true" => Ok(Self::On),
            "off" | "0" | "false" => Ok(Self::Off),
            other => Err(ConfigError::InvalidSetting {
                name: "HEMEM_DEPENDENT_LAUNCH",
                value: other.to_owned(),
            }
            .into()),
        }
    }
}

impl fmt::Display for DependentLaunch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::On => "on",
            Self::Off => "off",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    const TURING: ComputeCapability = ComputeCapability { major: 7, minor: 5 };
    const AMPERE: ComputeCapability = ComputeCapability { major: 8, minor: 9 };
    const HOPPER: ComputeCapability = ComputeCapability { major: 9, minor: 0 };
    const BLACKWELL: ComputeCapability = ComputeCapability {
        major: 12,
        minor: 0,
    };

    #[test]
    fn auto_follows_the_capability_and_on_refuses_an_older_card() {
        for cc in [TURING, AMPERE] {
            assert_eq!(DependentLaunch::Auto.enabled_for(cc), Ok(false));
            assert_eq!(DependentLaunch::Off.enabled_for(cc), Ok(false));
            assert_eq!(
                DependentLaunch::On.enabled_for(cc),
                Err(Error::Config(ConfigError::DependentLaunchUnsupported {
                    capability: cc
                }))
            );
        }
        for cc in [HOPPER, BLACKWELL] {
            assert_eq!(DependentLaunch::Auto.enabled_for(cc), Ok(true));
            assert_eq!(DependentLaunch::On.enabled_for(cc), Ok(true));
            assert_eq!(DependentLaunch::Off.enabled_for(cc), Ok(false));
        }
    }

    #[test]
    fn parses_its_names_and_refuses_others() {
        for (text, mode) in [
            ("auto", DependentLaunch::Auto),
            (" on ", DependentLaunch::On),
            ("1", DependentLaunch::On),
            ("true", DependentLaunch::On),
            ("off", DependentLaunch::Off),
            ("0", DependentLaunch::Off),
            ("false", DependentLaunch::Off),
        ] {
            assert_eq!(text.parse::<DependentLaunch>(), Ok(mode), "{text}");
        }
        for mode in [
            DependentLaunch::Auto,
            DependentLaunch::On,
            DependentLaunch::Off,
        ] {
            assert_eq!(mode.to_string().parse::<DependentLaunch>(), Ok(mode));
        }
        for bad in ["", "yes", "ON", "pdl"] {
            assert_eq!(
                bad.parse::<DependentLaunch>(),
                Err(Error::Config(ConfigError::InvalidSetting {
                    name: "HEMEM_DEPENDENT_LAUNCH",
                    value: bad.trim().to_owned(),
                })),
                "{bad:?}"
            );
        }
    }
}
