//! Errors of the memory system.

use crate::{MemoryClass, Placement};

/// Errors of the memory system.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An allocation of zero bytes was requested.
    #[error("zero-size allocation requested for class {class}")]
    ZeroSize {
        /// The class of the request.
        class: MemoryClass,
    },
    /// A request larger than any placement can satisfy.
    #[error("allocation of {requested} bytes for class {class} exceeds the limit of {limit} bytes")]
    TooLarge {
        /// Bytes requested.
        requested: usize,
        /// The largest request the resource accepts.
        limit: usize,
        /// The class of the request.
        class: MemoryClass,
    },
    /// The host could not provide the memory.
    #[error("host out of memory: {requested} bytes for class {class}")]
    HostOutOfMemory {
        /// Bytes requested.
        requested: usize,
        /// The class of the request.
        class: MemoryClass,
    },
    /// A buffer was used where its placement does not allow it (a device buffer
    /// read by the CPU, say).
    #[error("buffer in placement {placement} is not accessible from the {wanted}")]
    WrongPlacement {
        /// Where the buffer lives.
        placement: Placement,
        /// Who tried to access it ("host" or "device").
        wanted: &'static str,
    },
    /// An unknown memory-class name (in a trace file or on the command line).
    #[error("unknown memory class {name:?}")]
    UnknownClass {
        /// The name given.
        name: String,
    },
}

/// `Result` with the memory system's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_strings() {
        let class = MemoryClass::Temporary;
        assert_eq!(
            Error::ZeroSize { class }.to_string(),
            "zero-size allocation requested for class temporary"
        );
        assert_eq!(
            Error::TooLarge {
                requested: 10,
                limit: 5,
                class
            }
            .to_string(),
            "allocation of 10 bytes for class temporary exceeds the limit of 5 bytes"
        );
        assert_eq!(
            Error::HostOutOfMemory {
                requested: 8,
                class
            }
            .to_string(),
            "host out of memory: 8 bytes for class temporary"
        );
        assert_eq!(
            Error::WrongPlacement {
                placement: Placement::DevicePool,
                wanted: "host"
            }
            .to_string(),
            "buffer in placement device_pool is not accessible from the host"
        );
        assert_eq!(
            Error::UnknownClass { name: "x".into() }.to_string(),
            "unknown memory class \"x\""
        );
    }
}
