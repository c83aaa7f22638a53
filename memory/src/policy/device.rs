//! The `device` policy: everything in the pool.

use super::PlacementPolicy;
use crate::{AllocRequest, Placement, Result};

/// Everything in the stream-ordered device pool. Over the budget, allocations
/// fail with [`crate::Error::OverBudget`] (what was requested, the budget, and
/// the bytes per class and placement) — the baseline that fails on small cards.
#[derive(Debug, Clone, Copy, Default)]
pub struct DevicePolicy;

impl PlacementPolicy for DevicePolicy {
    fn name(&self) -> &'static str {
        "device"
    }

    fn place(&self, _request: &AllocRequest) -> Result<Placement> {
        Ok(Placement::DevicePool)
    }
}
