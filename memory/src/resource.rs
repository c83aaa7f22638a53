//! The resource interface: requests, allocations and the [`MemoryResource`] trait.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::cuda::PinnedBlock;
use crate::{Error, MemoryClass, Placement, Result};

/// A process-unique number naming one allocation, used by statistics and traces.
/// An [`crate::Allocator`] numbers its allocations 1, 2, 3, … in request order,
/// which is what lets the profiled policy replay a recording.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AllocationId(pub u64);

impl fmt::Display for AllocationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Which of the GPU handle's two streams an allocation is ordered on.
///
/// Pooled memory is allocated and freed in the order of its stream; using it
/// on the other stream needs an event (see `Allocator::hand_over`). Host
/// allocations carry [`StreamId::Compute`] nominally.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StreamId {
    /// The stream kernels run on.
    #[default]
    Compute,
    /// The stream prefetches and evictions run on.
    Copy,
}

impl StreamId {
    /// Both streams.
    pub const ALL: [Self; 2] = [Self::Compute, Self::Copy];

    /// The stream's name as written in traces.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Compute => "compute",
            Self::Copy => "copy",
        }
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for StreamId {
    type Err = ();

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|x| x.name() == s).ok_or(())
    }
}

/// A device address (`CUdeviceptr`): what kernels receive. Valid only while
/// the [`crate::Buffer`] it came from is alive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DevicePtr(pub u64);

impl DevicePtr {
    /// The raw address.
    pub const fn addr(self) -> u64 {
        self.0
    }

    /// The address `bytes` further on.
    pub const fn offset(self, bytes: u64) -> Self {
        Self(self.0.wrapping_add(bytes))
    }
}

impl fmt::Display for DevicePtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// What is asked of a resource: a size, the class of the data, whether the
/// data is secret (then it is zeroed before its memory is released), and the
/// stream the memory is ordered on.
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
    /// The stream the allocation is ordered on.
    pub stream: StreamId,
}

/// Device memory: its address and the stream it is ordered on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceMemory {
    pub(crate) ptr: DevicePtr,
    pub(crate) stream: StreamId,
}

impl DeviceMemory {
    /// The device address.
    pub fn ptr(&self) -> DevicePtr {
        self.ptr
    }

    /// The stream the memory is ordered on.
    pub fn stream(&self) -> StreamId {
        self.stream
    }
}

/// The memory behind an allocation, by placement.
#[derive(Debug)]
#[non_exhaustive]
pub enum Memory {
    /// Host memory owned as 64-bit words (the CPU backend's placement).
    Host(Vec<u64>),
    /// A block of the library's stream-ordered device pool.
    DevicePool(DeviceMemory),
    /// CUDA managed memory.
    Managed(DeviceMemory),
    /// A block of the pre-allocated pinned host arena.
    PinnedHost(PinnedBlock),
    /// A streamed read-only object (the `planned` policy).
    Streamed(StreamedMemory),
}

/// The memory of a streamed object: its master copy in pinned host memory
/// and the device slot the residency manager gives it while it is resident.
#[derive(Debug)]
pub struct StreamedMemory {
    pub(crate) master: PinnedBlock,
    pub(crate) slot: Arc<AtomicU64>,
}

impl StreamedMemory {
    /// The device copy's address now, if the object is resident. Kernels
    /// may use it only between an operation's `prepare` and the guard's drop.
    pub fn slot(&self) -> Option<DevicePtr> {
        match self.slot.load(Ordering::Acquire) {
            0 => None,
            addr => Some(DevicePtr(addr)),
        }
    }

    /// The host address of the master copy.
    pub fn master_addr(&self) -> u64 {
        self.master.addr()
    }
}

impl Memory {
    fn empty() -> Self {
        Self::Host(Vec::new())
    }

    /// The device memory, for the device placements.
    pub fn device(&self) -> Option<DeviceMemory> {
        match self {
            Self::DevicePool(d) | Self::Managed(d) => Some(*d),
            // Compute-stream work is ordered after the copy that filled the
            // slot by the residency manager (an event per fetch).
            Self::Streamed(s) => s.slot().map(|ptr| DeviceMemory {
                ptr,
                stream: StreamId::Compute,
            }),
            Self::Host(_) | Self::PinnedHost(_) => None,
        }
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
    /// Set once a sensitive allocation has been zeroed explicitly
    /// ([`crate::Allocator::release`]): the resource need not zero it again.
    pub(crate) wiped: bool,
    pub(crate) memory: Memory,
}

impl Allocation {
    /// A host allocation answering `request`.
    pub(crate) fn host(request: &AllocRequest, words: Vec<u64>) -> Self {
        Self::new(request, Placement::Host, Memory::Host(words))
    }

    /// An allocation of `placement` answering `request`.
    pub(crate) fn new(request: &AllocRequest, placement: Placement, memory: Memory) -> Self {
        Self {
            id: request.id,
            bytes: request.bytes,
            class: request.class,
            placement,
            sensitive: request.sensitive,
            wiped: false,
            memory,
        }
    }

    /// Whether the resource must zero the memory before releasing it:
    /// sensitive and not already zeroed by [`crate::Allocator::release`].
    pub(crate) fn needs_zeroing(&self) -> bool {
        self.sensitive && !self.wiped
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

    /// The stream the memory is ordered on (device placements).
    pub fn stream(&self) -> Option<StreamId> {
        self.memory.device().map(|d| d.stream)
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
            wiped: self.wiped,
            memory: std::mem::replace(&mut self.memory, Memory::empty()),
        }
    }
}

/// Zeroing failures met where they cannot be returned (a resource's
/// `deallocate`, run by a buffer's `Drop`): shared by an allocator and the
/// resources that zero device memory, and reported by the allocator's next
/// fallible call ([`crate::Allocator::check`]).
///
/// A failed zeroing is never silent: the first failure is kept until it is
/// reported, and the block it concerns is kept out of reuse.
#[derive(Clone, Debug, Default)]
pub(crate) struct ZeroingFailures {
    first: Arc<Mutex<Option<Error>>>,
}

impl ZeroingFailures {
    /// Records that `bytes` of sensitive memory in `placement` could not be
    /// zeroed because of `cause` (the first unreported failure is kept).
    pub(crate) fn record(&self, placement: Placement, bytes: usize, cause: Error) {
        let mut first = self.first.lock().unwrap_or_else(PoisonError::into_inner);
        if first.is_none() {
            *first = Some(Error::ZeroingFailed {
                placement,
                bytes,
                cause: Box::new(cause),
            });
        }
    }

    /// The first unreported failure, taken out.
    pub(crate) fn take(&self) -> Option<Error> {
        self.first
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

/// A source of memory, or an adaptor over one.
///
/// `allocate` validates and may fail with a typed error; `deallocate` never
/// fails. Sensitive memory is zeroed before it is released; a zeroing that
/// fails keeps the block out of reuse and is reported by the allocator's next
/// fallible call ([`crate::Allocator::check`]); other driver errors met while
/// freeing are kept by the GPU handle (`GpuDevice::take_deferred_error`).
/// Implementations are shared between threads. Device memory is freed in
/// order on the stream it was allocated on.
pub trait MemoryResource: Send + Sync + fmt::Debug {
    /// Allocates memory for `request`.
    ///
    /// # Errors
    /// Zero-size or oversized requests, exhausted memory, or (for adaptors)
    /// an exceeded budget.
    fn allocate(&self, request: &AllocRequest) -> Result<Allocation>;

    /// Gives memory back. Sensitive memory is zeroed before release.
    fn deallocate(&self, allocation: Allocation);

    /// Where [`allocate`](MemoryResource::allocate) would place `request`,
    /// asked before it is made: a resource of one placement answers that
    /// placement, the [`crate::Router`] its policy's choice, an adaptor its
    /// upstream's answer. The [`crate::BudgetAdaptor`] reserves the bytes
    /// for that placement before it forwards the request. `None` (the
    /// default) when the resource cannot say: the budget adaptor then
    /// counts the allocation once it is made.
    ///
    /// # Errors
    /// A policy's refusal to place (a profiled replay that diverged); what
    /// the resource would refuse anyway ([`crate::Error::ZeroSize`],
    /// [`crate::Error::TooLarge`]), so that it is refused as such rather
    /// than as over the budget.
    fn placement(&self, request: &AllocRequest) -> Result<Option<Placement>> {
        let _ = request;
        Ok(None)
    }

    /// Bytes this resource holds from the device for `placement` as the
    /// driver rounds them — a pool's reservation, live blocks and the freed
    /// memory it keeps — or `None` (the default) when it holds none or
    /// cannot say. The [`crate::BudgetAdaptor`] reads it after each pooled
    /// allocation, so the budget counts what the pool really holds.
    fn held_bytes(&self, placement: Placement) -> Option<u64> {
        let _ = placement;
        None
    }
}

/// A shared resource serves as the resource it shares (as RMM's resources
/// are referenced, not owned, by their adaptors).
impl<R: MemoryResource + ?Sized> MemoryResource for std::sync::Arc<R> {
    fn allocate(&self, request: &AllocRequest) -> Result<Allocation> {
        (**self).allocate(request)
    }

    fn deallocate(&self, allocation: Allocation) {
        (**self).deallocate(allocation);
    }

    fn placement(&self, request: &AllocRequest) -> Result<Option<Placement>> {
        (**self).placement(request)
    }

    fn held_bytes(&self, placement: Placement) -> Option<u64> {
        (**self).held_bytes(placement)
    }
}
