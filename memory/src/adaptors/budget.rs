//! The budget adaptor, after RMM's `failure_callback_resource_adaptor`.

use std::sync::Arc;

use crate::residency::Residency;
use crate::{AllocRequest, Allocation, Error, MemoryResource, Placement, Result};

/// Keeps allocations under the device budget: when the upstream refuses a
/// request for want of device room ([`Error::OverBudget`] from the pool's
/// reservation, or the device's own out-of-memory), it asks the residency
/// manager to make room (trim the pool, evict least recently used managed
/// buffers no operation holds) and retries, a bounded number of times. Then
/// it gives up with [`Error::OverBudget`]: what was requested, the budget,
/// and the device-resident bytes per class and placement.
#[derive(Debug)]
pub struct BudgetAdaptor<R> {
    upstream: R,
    residency: Arc<Residency>,
    retries: u32,
}

impl<R: MemoryResource> BudgetAdaptor<R> {
    /// Retries after making room at most this many times per request.
    pub const DEFAULT_RETRIES: u32 = 6;

    /// Wraps `upstream`, enforcing `residency`'s budget.
    pub fn new(upstream: R, residency: Arc<Residency>) -> Self {
        Self {
            upstream,
            residency,
            retries: Self::DEFAULT_RETRIES,
        }
    }

    /// The wrapped resource.
    pub fn upstream(&self) -> &R {
        &self.upstream
    }

    /// The residency manager whose budget is enforced.
    pub fn residency(&self) -> &Arc<Residency> {
        &self.residency
    }
}

fn needs_room(error: &Error) -> bool {
    matches!(
        error,
        Error::OverBudget { .. }
            | Error::OutOfMemory {
                placement: Placement::DevicePool,
                ..
            }
    )
}

impl<R: MemoryResource> MemoryResource for BudgetAdaptor<R> {
    fn allocate(&self, request: &AllocRequest) -> Result<Allocation> {
        let bytes = request.bytes as u64;
        let mut attempt = 0;
        loop {
            let error = match self.upstream.allocate(request) {
                Ok(allocation) => return Ok(allocation),
                Err(e) if needs_room(&e) => e,
                Err(e) => return Err(e),
            };
            let out_of_memory = matches!(error, Error::OutOfMemory { .. });
            let made_room =
                attempt < self.retries && self.residency.make_room(bytes, out_of_memory)?;
            if !made_room {
                // The pool never holds more than the budget (its maximum
                // size), so a pool out of memory is the budget's refusal too.
                return Err(match error {
                    Error::OverBudget { .. }
                    | Error::OutOfMemory {
                        placement: Placement::DevicePool,
                        ..
                    } => self.residency.over_budget(bytes, request.class),
                    other => other,
                });
            }
            attempt += 1;
        }
    }

    fn deallocate(&self, allocation: Allocation) {
        self.upstream.deallocate(allocation);
    }
}
