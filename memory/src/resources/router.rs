//! [`Router`]: sends each request to the resource of the placement its
//! policy picks.

use std::fmt;
use std::sync::Arc;

use crate::policy::PlacementPolicy;
use crate::{AllocRequest, Allocation, Error, MemoryResource, Placement, Result};

/// Asks the [`PlacementPolicy`] where a request goes and forwards it to the
/// resource registered for that placement; frees go back to the resource of
/// the allocation's placement. The policy hears of every allocation and free.
pub struct Router {
    policy: Arc<dyn PlacementPolicy>,
    routes: [Option<Box<dyn MemoryResource>>; 5],
}

impl fmt::Debug for Router {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Router")
            .field("policy", &self.policy.name())
            .field("routes", &self.routes)
            .finish()
    }
}

impl Router {
    /// A router with no resources yet.
    pub fn new(policy: Arc<dyn PlacementPolicy>) -> Self {
        Self {
            policy,
            routes: [None, None, None, None, None],
        }
    }

    /// Registers the resource for `placement` (replacing any earlier one).
    #[must_use]
    pub fn with(mut self, placement: Placement, resource: impl MemoryResource + 'static) -> Self {
        if let Some(slot) = self.routes.get_mut(placement.index()) {
            *slot = Some(Box::new(resource));
        }
        self
    }

    /// The policy.
    pub fn policy(&self) -> &Arc<dyn PlacementPolicy> {
        &self.policy
    }

    fn route(&self, placement: Placement) -> Result<&dyn MemoryResource> {
        self.routes
            .get(placement.index())
            .and_then(Option::as_deref)
            .ok_or(Error::PlacementUnavailable { placement })
    }
}

impl MemoryResource for Router {
    fn allocate(&self, request: &AllocRequest) -> Result<Allocation> {
        let placement = self.policy.place(request)?;
        let allocation = self.route(placement)?.allocate(request)?;
        self.policy.allocated(request, allocation.placement);
        Ok(allocation)
    }

    fn deallocate(&self, allocation: Allocation) {
        self.policy
            .released(allocation.class, allocation.bytes, allocation.placement);
        if let Ok(resource) = self.route(allocation.placement) {
            resource.deallocate(allocation);
        }
    }

    /// The policy's placement (policies answer a repeated request the same
    /// way, so asking first changes nothing).
    fn placement(&self, request: &AllocRequest) -> Result<Option<Placement>> {
        let placement = self.policy.place(request)?;
        // The resource refuses here what it would refuse anyway (a zero or
        // impossibly large request), before any byte is counted for it.
        self.route(placement)?.placement(request)?;
        Ok(Some(placement))
    }

    fn held_bytes(&self, placement: Placement) -> Option<u64> {
        self.route(placement).ok()?.held_bytes(placement)
    }
}
