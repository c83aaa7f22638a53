//! Ordinary host memory, the CPU backend's placement.

use zeroize::Zeroize;

use crate::{AllocRequest, Allocation, Error, Memory, MemoryResource, Placement, Result};

/// Host memory as vectors of 64-bit words, zero-initialised.
///
/// Requests larger than the host's physical memory are refused with
/// [`Error::TooLarge`] rather than left to the operating system's
/// out-of-memory killer.
#[derive(Debug)]
pub struct HostResource {
    limit: usize,
}

impl HostResource {
    /// A host resource whose largest request is the machine's physical memory.
    pub fn new() -> Self {
        Self::with_limit(physical_memory_bytes().unwrap_or(1 << 40))
    }

    /// A host resource that refuses requests above `limit` bytes.
    pub fn with_limit(limit: usize) -> Self {
        Self { limit }
    }

    /// The largest request this resource accepts, in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }
}

impl Default for HostResource {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryResource for HostResource {
    fn allocate(&self, request: &AllocRequest) -> Result<Allocation> {
        if request.bytes == 0 {
            return Err(Error::ZeroSize {
                class: request.class,
            });
        }
        if request.bytes > self.limit {
            return Err(Error::TooLarge {
                requested: request.bytes,
                limit: self.limit,
                class: request.class,
            });
        }
        let words = request.bytes.div_ceil(8);
        let block = vec![0u64; words];
        advise_huge_pages(&block);
        Ok(Allocation::host(request, block))
    }

    fn deallocate(&self, mut allocation: Allocation) {
        if allocation.needs_zeroing()
            && let Memory::Host(words) = &mut allocation.memory
        {
            words.zeroize();
        }
    }

    fn placement(&self, _request: &AllocRequest) -> Result<Option<Placement>> {
        Ok(Some(Placement::Host))
    }
}

/// Asks Linux to back the 2 MiB-aligned part of a large block with
/// transparent huge pages (where THP is in `madvise` mode, the common
/// default). A fresh block is untouched zero pages; faulting it in 4 KiB at a
/// time cost about half of FGb's CPU key generation on the development
/// machine, where a fault and its page clearing are slow.
fn advise_huge_pages(block: &[u64]) {
    const HUGE: usize = 2 << 20;
    let start = block.as_ptr() as usize;
    let end = start + std::mem::size_of_val(block);
    let aligned_start = start.next_multiple_of(HUGE);
    let aligned_end = end - end % HUGE;
    if aligned_end > aligned_start {
        madvise_huge(aligned_start, aligned_end - aligned_start);
    }
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code, reason = "one madvise call on memory this resource owns")]
fn madvise_huge(start: usize, len: usize) {
    // SAFETY: the range lies inside a live allocation owned by the caller;
    // MADV_HUGEPAGE changes only how the kernel backs it, never its contents,
    // and a failure (no THP support) leaves ordinary pages.
    unsafe {
        libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
    }
}

#[cfg(not(target_os = "linux"))]
fn madvise_huge(_start: usize, _len: usize) {}

/// Total physical memory from `/proc/meminfo`, where the platform has it.
fn physical_memory_bytes() -> Option<usize> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AllocationId, MemoryClass};

    fn request(bytes: usize) -> AllocRequest {
        AllocRequest {
            id: AllocationId(1),
            bytes,
            class: MemoryClass::Temporary,
            sensitive: false,
            stream: crate::StreamId::Compute,
        }
    }

    #[test]
    fn rejects_zero_and_absurd_sizes() {
        let host = HostResource::with_limit(1 << 20);
        assert_eq!(
            host.allocate(&request(0)).map(|_| ()),
            Err(Error::ZeroSize {
                class: MemoryClass::Temporary
            })
        );
        assert!(matches!(
            host.allocate(&request((1 << 20) + 1)),
            Err(Error::TooLarge { .. })
        ));
        let a = host.allocate(&request(17)).expect("small allocation");
        assert!(matches!(a.memory(), Memory::Host(w) if w.len() == 3));
        host.deallocate(a);
    }
}
