//! Memory resources: one per placement.

mod host;

pub use host::HostResource;
