//! Memory resources: one per placement, and the [`Router`] that sends each
//! request to the resource of the placement its policy picks.

mod device_pool;
mod host;
mod managed;
mod pinned_host;
mod router;
mod streamed;

pub use device_pool::DevicePoolResource;
pub use host::HostResource;
pub use managed::ManagedResource;
pub use pinned_host::PinnedHostResource;
pub use router::Router;
pub use streamed::StreamedResource;
