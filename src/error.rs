//! Errors of the `hemem` facade's own library code: the benchmark engines
//! and the plots.

use std::path::PathBuf;

/// Errors of the benchmark engines ([`crate::bench`]) and plots
/// ([`crate::plot`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The CKKS layer failed (parameters, keys, an operation, the memory
    /// system below it).
    #[error(transparent)]
    Ckks(#[from] hemem_ckks::Error),
    /// Bootstrapping failed.
    #[error(transparent)]
    Bootstrap(#[from] hemem_bootstrap::Error),
    /// The memory system failed (configuration, budget, trace, driver).
    #[error(transparent)]
    Memory(#[from] hemem_memory::Error),
    /// A file could not be read or written.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done (`reading`, `writing`, `creating`).
        op: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A results CSV could not be read or written.
    #[error("CSV {path}: {source}")]
    Csv {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: csv::Error,
    },
    /// A plot could not be drawn or written.
    #[error("plotting {path}: {source}")]
    Plot {
        /// The PNG being drawn.
        path: PathBuf,
        /// The drawing backend's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The embedded plot font does not parse.
    #[error("the embedded plot font does not parse")]
    Font,
    /// An operation name the sweep does not know.
    #[error(
        "unknown operation {name:?} (expected add, mult, rotate, conjugate, bootstrap, bootstrap_batchB or inference)"
    )]
    UnknownOperation {
        /// The name given.
        name: String,
    },
    /// An image whose pixel count is not the network's `side × side`.
    #[error("the image has {actual} pixels; the network takes {expected}")]
    ImageSize {
        /// `side²`.
        expected: usize,
        /// The pixels given.
        actual: usize,
    },
    /// A pixel outside `[−1, 1]` or not finite.
    #[error("pixel {index} is outside [-1, 1] or not finite")]
    ImagePixel {
        /// Its index (row-major).
        index: usize,
    },
    /// A network shape that cannot be built or packed into the slots.
    #[error("invalid network: {reason}")]
    InvalidNetwork {
        /// What is wrong.
        reason: &'static str,
    },
    /// A layer needs more levels than the parameters give between
    /// bootstraps (or than the encryption level, without bootstrapping).
    #[error("{layer} needs {needed} levels above level 3; the parameters give at most {available}")]
    NotEnoughLevels {
        /// The layer (`stem`, `block`, `fc`).
        layer: &'static str,
        /// Levels it needs.
        needed: usize,
        /// The most levels above 3 a ciphertext can have there.
        available: usize,
    },
    /// An encrypted network's input that is not a fresh encryption of an
    /// image packed for it (another level or slot count).
    #[error("the network's input must be at level {level} with {slots} slots")]
    InputShape {
        /// The encryption level.
        level: usize,
        /// The parameters' slot count.
        slots: usize,
    },
    /// A budget that is neither `none` nor a byte size.
    #[error("invalid budget {text:?} (expected none or a size such as 2GiB)")]
    InvalidBudget {
        /// The text given.
        text: String,
    },
    /// A sweep or workload was given nothing to run.
    #[error("nothing to run: {axis} is empty")]
    EmptyAxis {
        /// The empty list (`presets`, `budgets`, `policies`, `operations`).
        axis: &'static str,
    },
}

impl Error {
    /// The memory system's error underneath, if this is one (through the
    /// CKKS and bootstrapping layers).
    pub fn memory(&self) -> Option<&hemem_memory::Error> {
        match self {
            Self::Memory(e)
            | Self::Ckks(hemem_ckks::Error::Memory(e))
            | Self::Bootstrap(hemem_bootstrap::Error::Ckks(hemem_ckks::Error::Memory(e))) => {
                Some(e)
            }
            _ => None,
        }
    }

    /// Whether the device budget refused a request
    /// ([`hemem_memory::Error::OverBudget`]).
    pub fn is_over_budget(&self) -> bool {
        matches!(self.memory(), Some(hemem_memory::Error::OverBudget { .. }))
    }

    /// Whether the device or the host ran out of memory.
    pub fn is_out_of_memory(&self) -> bool {
        matches!(
            self.memory(),
            Some(
                hemem_memory::Error::OutOfMemory { .. }
                    | hemem_memory::Error::HostOutOfMemory { .. }
                    | hemem_memory::Error::ManagedCapExceeded { .. }
            )
        )
    }

    pub(crate) fn io(
        op: &'static str,
        path: &std::path::Path,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.to_path_buf();
        move |source| Self::Io { op, path, source }
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_strings() {
        assert_eq!(
            Error::UnknownOperation { name: "div".into() }.to_string(),
            "unknown operation \"div\" (expected add, mult, rotate, conjugate, bootstrap, bootstrap_batchB or inference)"
        );
        assert_eq!(
            Error::InvalidBudget {
                text: "lots".into()
            }
            .to_string(),
            "invalid budget \"lots\" (expected none or a size such as 2GiB)"
        );
        assert_eq!(
            Error::EmptyAxis { axis: "presets" }.to_string(),
            "nothing to run: presets is empty"
        );
        assert_eq!(
            Error::ImageSize {
                expected: 1024,
                actual: 784
            }
            .to_string(),
            "the image has 784 pixels; the network takes 1024"
        );
        assert_eq!(
            Error::ImagePixel { index: 3 }.to_string(),
            "pixel 3 is outside [-1, 1] or not finite"
        );
        assert_eq!(
            Error::InvalidNetwork {
                reason: "no channels"
            }
            .to_string(),
            "invalid network: no channels"
        );
        assert_eq!(
            Error::NotEnoughLevels {
                layer: "block",
                needed: 6,
                available: 1
            }
            .to_string(),
            "block needs 6 levels above level 3; the parameters give at most 1"
        );
        assert_eq!(
            Error::InputShape {
                level: 12,
                slots: 2048
            }
            .to_string(),
            "the network's input must be at level 12 with 2048 slots"
        );
        assert_eq!(
            Error::Font.to_string(),
            "the embedded plot font does not parse"
        );
        let io = Error::io("reading", std::path::Path::new("x.csv"))(std::io::Error::other("gone"));
        assert_eq!(io.to_string(), "reading x.csv: gone");
        let csv = Error::Csv {
            path: "s.csv".into(),
            source: csv::Error::from(std::io::Error::other("full")),
        };
        assert_eq!(csv.to_string(), "CSV s.csv: full");
        let plot = Error::Plot {
            path: "f.png".into(),
            source: Box::new(std::io::Error::other("no room")),
        };
        assert_eq!(plot.to_string(), "plotting f.png: no room");
    }

    #[test]
    fn over_budget_is_found_through_the_layers() {
        let over = || hemem_memory::Error::OverBudget {
            requested: 1,
            placing: None,
            budget: 2,
            in_use: Box::default(),
        };
        let wrapped = Error::Bootstrap(hemem_bootstrap::Error::Ckks(hemem_ckks::Error::Memory(
            over(),
        )));
        assert!(wrapped.is_over_budget());
        assert!(Error::Ckks(hemem_ckks::Error::Memory(over())).is_over_budget());
        assert!(!wrapped.is_out_of_memory());
        assert!(!Error::Font.is_over_budget());
    }
}
