//! Placement policies: each picks a [`Placement`] for an allocation request,
//! and nothing else (policies never allocate; the `Router` does).
//!
//! The policies of the reference design, "Hybrid CUDA Unified Memory
//! Management in FHE Workloads" (Choi et al.), selectable by name at run time:
//!
//! | name | policy | paper |
//! |---|---|---|
//! | `device` | [`DevicePolicy`]: everything pooled | the baseline that fails on small cards |
//! | `managed` | [`ManagedPolicy`]: everything managed, pages fault in | "base unified" |
//! | `static` | [`StaticPolicy`]: `Temporary` pooled, the rest managed and advised | §III-A |
//! | `profiled` | [`ProfiledPolicy`]: per-allocation decisions from a recorded trace | §III-C |
//! | `dynamic` | [`DynamicPolicy`]: per-size live-count history | §III-D |
//! | `planned` | [`PlannedPolicy`]: keys and diagonals streamed from pinned masters, the rest pooled | ours (DESIGN.md) |

mod device;
mod dynamic;
mod managed;
mod planned;
mod profiled;
mod r#static;

pub use device::DevicePolicy;
pub use dynamic::DynamicPolicy;
pub use managed::ManagedPolicy;
pub use planned::PlannedPolicy;
pub use profiled::{Divergence, ProfiledPolicy};
pub use r#static::StaticPolicy;

use std::fmt;
use std::str::FromStr;

use crate::residency::Eviction;
use crate::{AllocRequest, ConfigError, Error, MemoryClass, Placement, Result};

/// Advice given to a managed buffer of some class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Advice {
    /// Read-mostly (`CU_MEM_ADVISE_SET_READ_MOSTLY`): the device keeps a read
    /// replica. Set when the residency manager brings the buffer to the
    /// device, unset before it evicts it.
    pub read_mostly: bool,
    /// Preferred location: the device (`CU_MEM_ADVISE_SET_PREFERRED_LOCATION`).
    pub prefer_device: bool,
}

impl Advice {
    /// No advice (plain Unified Memory).
    pub const NONE: Self = Self {
        read_mostly: false,
        prefer_device: false,
    };

    /// The advice of the static scheme (§III-A) for `class`: evaluation keys,
    /// bootstrapping constants and constants are read-mostly; constants prefer
    /// the device.
    pub const fn for_class(class: MemoryClass) -> Self {
        match class {
            MemoryClass::EvaluationKey | MemoryClass::BootstrapConstant => Self {
                read_mostly: true,
                prefer_device: false,
            },
            MemoryClass::Constant => Self {
                read_mostly: true,
                prefer_device: true,
            },
            MemoryClass::Ciphertext | MemoryClass::Plaintext | MemoryClass::Temporary => Self::NONE,
        }
    }
}

/// Picks where each allocation lives.
///
/// `place` may be called more than once for the same request (the budget
/// adaptor retries after evicting); implementations answer a repeated request
/// id the same way. `allocated` and `released` report what actually happened,
/// for policies that learn from it.
pub trait PlacementPolicy: Send + Sync + fmt::Debug {
    /// The policy's name, as on the command line.
    fn name(&self) -> &'static str;

    /// The placement for `request`.
    ///
    /// # Errors
    /// Policies that replay a recording report a divergence
    /// ([`crate::TraceError::Divergence`]).
    fn place(&self, request: &AllocRequest) -> Result<Placement>;

    /// `request` was allocated in `placement`.
    fn allocated(&self, request: &AllocRequest, placement: Placement) {
        let _ = (request, placement);
    }

    /// An allocation of `class` and `bytes` in `placement` was freed.
    fn released(&self, class: MemoryClass, bytes: usize, placement: Placement) {
        let _ = (class, bytes, placement);
    }

    /// Whether declared managed buffers are prefetched before use (every
    /// policy but `managed`, which lets pages fault in).
    fn prefetches_on_use(&self) -> bool {
        true
    }

    /// The advice a managed buffer of `class` gets.
    fn advice(&self, class: MemoryClass) -> Advice {
        Advice::for_class(class)
    }

    /// The order in which the residency manager evicts managed buffers
    /// under the budget (unless the configuration overrides it): least
    /// recently used, the fastest order measured on the GPU (see
    /// [`crate::residency::eviction`]).
    fn eviction(&self) -> Eviction {
        Eviction::LeastRecentlyUsed
    }

    /// Where a policy that replays a recording first departed from it and
    /// fell back to placing by class (`None` for the others, and while the
    /// replay follows its recording).
    fn divergence(&self) -> Option<crate::TraceError> {
        None
    }
}

/// The policies by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PolicyKind {
    /// [`DevicePolicy`].
    Device,
    /// [`ManagedPolicy`].
    Managed,
    /// [`StaticPolicy`].
    Static,
    /// [`ProfiledPolicy`].
    Profiled,
    /// [`DynamicPolicy`].
    Dynamic,
    /// [`PlannedPolicy`].
    Planned,
}

impl PolicyKind {
    /// Every policy.
    pub const ALL: [Self; 6] = [
        Self::Device,
        Self::Managed,
        Self::Static,
        Self::Profiled,
        Self::Dynamic,
        Self::Planned,
    ];

    /// The name on the command line and in `HEMEM_MEMORY_POLICY`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Device => "device",
            Self::Managed => "managed",
            Self::Static => "static",
            Self::Profiled => "profiled",
            Self::Dynamic => "dynamic",
            Self::Planned => "planned",
        }
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PolicyKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| ConfigError::UnknownPolicy { name: s.to_owned() }.into())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{AllocationId, StreamId};

    pub(crate) fn request(id: u64, class: MemoryClass, bytes: usize) -> AllocRequest {
        AllocRequest {
            id: AllocationId(id),
            bytes,
            class,
            sensitive: false,
            stream: StreamId::Compute,
        }
    }

    #[test]
    fn names_parse_and_unknown_names_are_typed_errors() {
        for kind in PolicyKind::ALL {
            assert_eq!(kind.name().parse::<PolicyKind>(), Ok(kind));
        }
        assert_eq!(
            "lru".parse::<PolicyKind>(),
            Err(ConfigError::UnknownPolicy { name: "lru".into() }.into())
        );
    }

    #[test]
    fn simple_policies_place_by_class() {
        let device = DevicePolicy;
        let managed = ManagedPolicy;
        let fixed = StaticPolicy;
        for (n, class) in MemoryClass::ALL.into_iter().enumerate() {
            let r = request(n as u64 + 1, class, 4096);
            assert_eq!(device.place(&r), Ok(Placement::DevicePool));
            assert_eq!(managed.place(&r), Ok(Placement::Managed));
            let expected = if class == MemoryClass::Temporary {
                Placement::DevicePool
            } else {
                Placement::Managed
            };
            assert_eq!(fixed.place(&r), Ok(expected));
            assert_eq!(managed.advice(class), Advice::NONE);
            assert_eq!(fixed.advice(class), Advice::for_class(class));
        }
        assert!(!managed.prefetches_on_use());
        assert_eq!(managed.eviction(), Eviction::LeastRecentlyUsed);
        assert_eq!(fixed.eviction(), Eviction::LeastRecentlyUsed);
        assert!(fixed.prefetches_on_use() && device.prefetches_on_use());
        assert!(Advice::for_class(MemoryClass::Constant).prefer_device);
        assert!(Advice::for_class(MemoryClass::EvaluationKey).read_mostly);
        assert!(!Advice::for_class(MemoryClass::Ciphertext).read_mostly);
    }
}
