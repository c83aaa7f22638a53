//! A replay check for host memory: the `profiled` policy consulted on the
//! CPU, where every placement is host memory.

use std::sync::Arc;

use crate::policy::PlacementPolicy;
use crate::{AllocRequest, Allocation, MemoryResource, Placement, Result};

/// Asks `policy` to place every request, and allocates it upstream
/// whatever the answer: on the CPU there is only host memory to place in,
/// but a policy that replays a recording (`profiled`) still checks the run
/// against it, so that a departure is its divergence — an error, or the
/// fallback [`crate::Allocator::policy_divergence`] reports — as on a GPU.
#[derive(Debug)]
pub struct ReplayCheckAdaptor<R> {
    upstream: R,
    policy: Arc<dyn PlacementPolicy>,
}

impl<R: MemoryResource> ReplayCheckAdaptor<R> {
    /// Wraps `upstream`, consulting `policy`.
    pub fn new(upstream: R, policy: Arc<dyn PlacementPolicy>) -> Self {
        Self { upstream, policy }
    }
}

impl<R: MemoryResource> MemoryResource for ReplayCheckAdaptor<R> {
    fn allocate(&self, request: &AllocRequest) -> Result<Allocation> {
        self.policy.place(request)?;
        self.upstream.allocate(request)
    }

    fn deallocate(&self, allocation: Allocation) {
        self.upstream.deallocate(allocation);
    }

    fn placement(&self, request: &AllocRequest) -> Result<Option<Placement>> {
        self.upstream.placement(request)
    }

    fn held_bytes(&self, placement: Placement) -> Option<u64> {
        self.upstream.held_bytes(placement)
    }
}
