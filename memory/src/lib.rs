//! Memory for hemem: every polynomial buffer carries a [`MemoryClass`], and an
//! allocator composed from small resources and adaptors (in the manner of RAPIDS
//! RMM) decides where it lives and keeps statistics per class and placement.
//!
//! The layers, read outside-in:
//!
//! * [`Allocator`] — the handle the rest of hemem holds: `allocate(class, bytes)`
//!   returns an owning [`Buffer`] that gives its memory back on drop.
//! * adaptors ([`StatisticsAdaptor`]) wrap an upstream [`MemoryResource`] and
//!   observe or constrain it.
//! * resources ([`HostResource`]) own one placement each.
//!
//! Buffers that hold secret-key material are requested as *sensitive*; their
//! memory is zeroed before it is released, in every placement.

pub mod adaptors;
mod allocator;
mod buffer;
mod class;
mod error;
mod resource;
pub mod resources;
mod statistics;

pub use adaptors::{CachingAdaptor, StatisticsAdaptor};
pub use allocator::Allocator;
pub use buffer::Buffer;
pub use class::{MemoryClass, Placement};
pub use error::{Error, Result};
pub use resource::{AllocRequest, Allocation, AllocationId, Memory, MemoryResource};
pub use resources::HostResource;
pub use statistics::{ClassStatistics, Counter, Statistics, StatisticsHandle, StatisticsScope};
