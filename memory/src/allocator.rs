//! [`Allocator`], the handle the rest of hemem allocates through.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::statistics::{StatisticsHandle, StatisticsScope};
use crate::{
    AllocRequest, AllocationId, Buffer, CachingAdaptor, HostResource, MemoryClass, MemoryResource,
    Result, Statistics, StatisticsAdaptor,
};

/// A composed resource chain plus its statistics. Cheap to clone; clones share
/// the chain and the counters.
#[derive(Clone)]
pub struct Allocator {
    top: Arc<dyn MemoryResource>,
    statistics: StatisticsHandle,
    next_id: Arc<AtomicU64>,
}

impl Allocator {
    /// Host memory with statistics: the CPU backend's allocator. Freed
    /// blocks are cached for reuse up to an eighth of physical memory.
    pub fn host() -> Self {
        let host = HostResource::new();
        let limit = host.limit() / 8;
        let counted = StatisticsAdaptor::new(CachingAdaptor::new(host, limit));
        let statistics = counted.handle();
        Self::from_parts(Arc::new(counted), statistics)
    }

    /// An allocator over an already composed chain whose statistics are read
    /// through `statistics`.
    pub fn from_parts(top: Arc<dyn MemoryResource>, statistics: StatisticsHandle) -> Self {
        Self {
            top,
            statistics,
            next_id: Arc::new(AtomicU64::new(1)),
        }
    }

    /// Allocates `bytes` for data of `class`.
    ///
    /// # Errors
    /// Whatever the chain refuses: zero or oversized requests, exhausted
    /// memory, an exceeded budget.
    pub fn allocate(&self, class: MemoryClass, bytes: usize) -> Result<Buffer> {
        self.allocate_with(class, bytes, false)
    }

    /// Allocates memory for secret-key material: it is zeroed before release.
    ///
    /// # Errors
    /// As [`Allocator::allocate`].
    pub fn allocate_sensitive(&self, class: MemoryClass, bytes: usize) -> Result<Buffer> {
        self.allocate_with(class, bytes, true)
    }

    fn allocate_with(&self, class: MemoryClass, bytes: usize, sensitive: bool) -> Result<Buffer> {
        let request = AllocRequest {
            id: AllocationId(self.next_id.fetch_add(1, Ordering::Relaxed)),
            bytes,
            class,
            sensitive,
        };
        let allocation = self.top.allocate(&request)?;
        Ok(Buffer::new(allocation, Arc::clone(&self.top)))
    }

    /// A snapshot of the counters.
    pub fn statistics(&self) -> Statistics {
        self.statistics.snapshot()
    }

    /// Opens a statistics scope whose peaks cover only what happens until it
    /// is finished.
    pub fn statistics_scope(&self) -> StatisticsScope {
        self.statistics.scope()
    }
}

impl fmt::Debug for Allocator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Allocator")
            .field("top", &self.top)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Placement;

    #[test]
    fn buffers_count_while_alive_and_are_freed_on_drop() {
        let a = Allocator::host();
        let b1 = a.allocate(MemoryClass::Ciphertext, 800).expect("alloc");
        let mut b2 = a
            .allocate_sensitive(MemoryClass::EvaluationKey, 64)
            .expect("alloc");
        assert_eq!(b1.words(), 100);
        assert_ne!(b1.id(), b2.id());
        assert_eq!(b2.placement(), Placement::Host);
        b2.host_words_mut().expect("host").fill(7);
        let s = a.statistics();
        assert_eq!(s.class(MemoryClass::Ciphertext).bytes.current, 800);
        assert_eq!(s.total().bytes.current, 864);
        drop(b1);
        drop(b2);
        let s = a.statistics();
        assert_eq!(s.total().bytes.current, 0);
        assert_eq!(s.total().bytes.peak, 864);
        assert_eq!(s.total().frees, 2);
    }
}
