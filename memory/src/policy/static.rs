//! The `static` policy: §III-A of the hybrid-UM paper.

use super::PlacementPolicy;
use crate::{AllocRequest, MemoryClass, Placement, Result};

/// The static hybrid scheme (Choi et al., §III-A): scratch (`Temporary`) in
/// the stream-ordered pool, everything else managed with its class's advice
/// (evaluation keys, bootstrapping constants and constants read-mostly;
/// constants preferring the device), prefetched before use.
#[derive(Debug, Clone, Copy, Default)]
pub struct StaticPolicy;

impl StaticPolicy {
    /// The static rule for one class.
    pub const fn placement_for(class: MemoryClass) -> Placement {
        match class {
            MemoryClass::Temporary => Placement::DevicePool,
            _ => Placement::Managed,
        }
    }
}

impl PlacementPolicy for StaticPolicy {
    fn name(&self) -> &'static str {
        "static"
    }

    fn place(&self, request: &AllocRequest) -> Result<Placement> {
        Ok(Self::placement_for(request.class))
    }
}
