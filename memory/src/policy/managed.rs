//! The `managed` policy: plain Unified Memory.

use super::{Advice, PlacementPolicy};
use crate::residency::Eviction;
use crate::{AllocRequest, MemoryClass, Placement, Result};

/// Everything managed, without advice, and never prefetched: pages move on
/// fault as plain Unified Memory does (the reference design's "base unified"
/// case). Under an emulated budget the residency manager still evicts least
/// recently used buffers, so the baseline feels the same pressure as the
/// other policies.
#[derive(Debug, Clone, Copy, Default)]
pub struct ManagedPolicy;

impl PlacementPolicy for ManagedPolicy {
    fn name(&self) -> &'static str {
        "managed"
    }

    fn place(&self, _request: &AllocRequest) -> Result<Placement> {
        Ok(Placement::Managed)
    }

    fn prefetches_on_use(&self) -> bool {
        false
    }

    fn advice(&self, _class: MemoryClass) -> Advice {
        Advice::NONE
    }

    fn eviction(&self) -> Eviction {
        Eviction::LeastRecentlyUsed
    }
}
