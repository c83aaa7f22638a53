//! The resource interface: requests, allocations and the [`MemoryResource`] trait.

use std::fmt;

use crate::{MemoryClass, Placement, Result};

/// A process-unique number naming one allocation, used by statistics and traces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AllocationId(pub u64);

impl fmt::Display for AllocationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// What is asked of a resource: a size, the class of the data, and whether the
/// data is secret (then it is zeroed before its memory is released).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocRequest {
    /// The id the allocator gave this request.
    pub id: AllocationId,
    /// Bytes wanted; never zero once validated.
    pub bytes: usize,
    /// What the buffer will hold.
    pub class: MemoryClass,
    /// Whether the buffer holds secret-key material.
    pub sensitive: bool,
}

/// The memory behind an allocation, by placement.
#[derive(Debug)]
#[non_exhaustive]
pub enum Memory {
    /// Host memory owned as 64-bit words (the CPU backend's placement).
    Host(Vec<u64>),
}

impl Memory {
    fn empty() -> Self {
        Self::Host(Vec::new())
    }
}

/// A block of memory handed out by a [`MemoryResource`], with the metadata that
/// statistics and traces read. Resources create it; a [`crate::Buffer`] owns it
/// and gives it back through [`MemoryResource::deallocate`].
#[derive(Debug)]
pub struct Allocation {
    pub(crate) id: AllocationId,
    pub(crate) bytes: usize,
    pub(crate) class: MemoryClass,
    pub(crate) placement: Placement,
    pub(crate) sensitive: bool,
    pub(crate) memory: Memory,
}

impl Allocation {
    /// A host allocation answering `request`.
    pub(crate) fn host(request: &AllocRequest, words: Vec<u64>) -> Self {
        Self {
            id: request.id,
            bytes: request.bytes,
            class: request.class,
            placement: Placement::Host,
            sensitive: request.sensitive,
            memory: Memory::Host(words),
        }
    }

    /// The allocation's id.
    pub fn id(&self) -> AllocationId {
        self.id
    }

    /// Bytes requested (the memory may be rounded up to whole words).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The class of the data.
    pub fn class(&self) -> MemoryClass {
        self.class
    }

    /// Where the memory lives.
    pub fn placement(&self) -> Placement {
        self.placement
    }

    /// Whether the memory holds secret-key material.
    pub fn is_sensitive(&self) -> bool {
        self.sensitive
    }

    /// The memory itself.
    pub fn memory(&self) -> &Memory {
        &self.memory
    }

    /// Moves the allocation out, leaving an empty shell behind (used by
    /// `Buffer`'s drop, which must hand the allocation back by value).
    pub(crate) fn take(&mut self) -> Self {
        Self {
            id: self.id,
            bytes: self.bytes,
            class: self.class,
            placement: self.placement,
            sensitive: self.sensitive,
            memory: std::mem::replace(&mut self.memory, Memory::empty()),
        }
    }
}

/// A source of memory, or an adaptor over one.
///
/// `allocate` validates and may fail with a typed error; `deallocate` never
/// fails. Implementations are shared between threads.
pub trait MemoryResource: Send + Sync + fmt::Debug {
    /// Allocates memory for `request`.
    ///
    /// # Errors
    /// Zero-size or oversized requests, exhausted memory, or (for adaptors)
    /// an exceeded budget.
    fn allocate(&self, request: &AllocRequest) -> Result<Allocation>;

    /// Gives memory back. Sensitive memory is zeroed before release.
    fn deallocate(&self, allocation: Allocation);
}
