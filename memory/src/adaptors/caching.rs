//! A caching adaptor: freed blocks are kept by size and handed out again,
//! instead of going back to the operating system (which would fault and zero
//! fresh pages on every large allocation — a third of a CPU key switch).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::{AllocRequest, Allocation, Memory, MemoryResource, Placement, Result};

#[derive(Debug, Default)]
struct Cache {
    blocks: HashMap<usize, Vec<Allocation>>,
    bytes: usize,
}

/// Keeps up to `limit` bytes of freed, non-sensitive **host** allocations by
/// exact size and reuses them. Reused memory is **not** zeroed: callers that need
/// zeros write them. Sensitive allocations are never cached (the upstream
/// zeroes and frees them).
#[derive(Debug)]
pub struct CachingAdaptor<R> {
    upstream: R,
    limit: usize,
    cache: Mutex<Cache>,
}

impl<R: MemoryResource> CachingAdaptor<R> {
    /// Wraps `upstream`, caching at most `limit` bytes.
    pub fn new(upstream: R, limit: usize) -> Self {
        Self {
            upstream,
            limit,
            cache: Mutex::new(Cache::default()),
        }
    }

    /// The wrapped resource.
    pub fn upstream(&self) -> &R {
        &self.upstream
    }

    /// Bytes held in the cache now.
    pub fn cached_bytes(&self) -> usize {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .bytes
    }

    /// Returns every cached block to the upstream resource.
    pub fn trim(&self) {
        let blocks: Vec<Allocation> = {
            let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            cache.bytes = 0;
            cache.blocks.drain().flat_map(|(_, v)| v).collect()
        };
        for block in blocks {
            self.upstream.deallocate(block);
        }
    }
}

impl<R: MemoryResource> MemoryResource for CachingAdaptor<R> {
    fn allocate(&self, request: &AllocRequest) -> Result<Allocation> {
        if !request.sensitive {
            let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(mut block) = cache.blocks.get_mut(&request.bytes).and_then(Vec::pop) {
                cache.bytes -= block.bytes;
                block.id = request.id;
                block.class = request.class;
                return Ok(block);
            }
        }
        self.upstream.allocate(request)
    }

    fn deallocate(&self, allocation: Allocation) {
        // Only host blocks: device blocks are ordered on streams, and reusing
        // them here would bypass the events that order reuse across streams.
        if !allocation.sensitive && matches!(allocation.memory, Memory::Host(_)) {
            let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            if cache.bytes + allocation.bytes <= self.limit {
                cache.bytes += allocation.bytes;
                cache
                    .blocks
                    .entry(allocation.bytes)
                    .or_default()
                    .push(allocation);
                return;
            }
        }
        self.upstream.deallocate(allocation);
    }

    fn placement(&self, request: &AllocRequest) -> Result<Option<Placement>> {
        self.upstream.placement(request)
    }

    fn held_bytes(&self, placement: Placement) -> Option<u64> {
        self.upstream.held_bytes(placement)
    }
}

impl<R> Drop for CachingAdaptor<R> {
    fn drop(&mut self) {
        // Cached blocks own their memory (host vectors) and are freed here.
        self.cache
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .blocks
            .clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AllocationId, HostResource, MemoryClass, StreamId};

    fn request(id: u64, bytes: usize, sensitive: bool) -> AllocRequest {
        AllocRequest {
            id: AllocationId(id),
            bytes,
            class: MemoryClass::Temporary,
            sensitive,
            stream: StreamId::Compute,
        }
    }

    #[test]
    fn reuses_blocks_by_size_within_the_limit() {
        let cache = CachingAdaptor::new(HostResource::new(), 1 << 20);
        let a = cache.allocate(&request(1, 4096, false)).unwrap();
        let Memory::Host(words) = a.memory() else {
            panic!("host memory expected")
        };
        let pointer = words.as_ptr() as usize;
        cache.deallocate(a);
        assert_eq!(cache.cached_bytes(), 4096);
        let b = cache.allocate(&request(2, 4096, false)).unwrap();
        assert_eq!(b.id(), AllocationId(2));
        assert!(matches!(b.memory(), Memory::Host(w) if w.as_ptr() as usize == pointer));
        assert_eq!(cache.cached_bytes(), 0);
        // Other sizes and sensitive blocks are not served from the cache.
        cache.deallocate(b);
        let c = cache.allocate(&request(3, 8192, false)).unwrap();
        assert_eq!(cache.cached_bytes(), 4096);
        let s = cache.allocate(&request(4, 4096, true)).unwrap();
        assert_eq!(
            cache.cached_bytes(),
            4096,
            "sensitive requests bypass the cache"
        );
        cache.deallocate(s);
        assert_eq!(
            cache.cached_bytes(),
            4096,
            "sensitive blocks are never cached"
        );
        // Over the limit, blocks go back upstream.
        let big = cache.allocate(&request(5, 2 << 20, false)).unwrap();
        cache.deallocate(big);
        assert_eq!(cache.cached_bytes(), 4096);
        cache.deallocate(c);
        cache.trim();
        assert_eq!(cache.cached_bytes(), 0);
    }
}
