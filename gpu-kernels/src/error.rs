//! Errors of the kernel crate.

use cudarc::driver::DriverError;
use hemem_memory::StreamId;

/// Errors of loading and launching kernels.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A memory-system error (placement, transfer, budget, device).
    #[error(transparent)]
    Memory(#[from] hemem_memory::Error),
    /// A launch's operands do not have the shape the kernel needs.
    #[error("kernel {kernel}: {what} is {found}, expected {expected}")]
    LaunchShape {
        /// The kernel.
        kernel: &'static str,
        /// Which operand or dimension.
        what: &'static str,
        /// What the kernel needs.
        expected: usize,
        /// What was given.
        found: usize,
    },
    /// A buffer is ordered on another stream than the launch.
    #[error(
        "kernel {kernel}: a buffer lives on the {found} stream, the launch on the {expected} stream"
    )]
    WrongStream {
        /// The kernel.
        kernel: &'static str,
        /// The launch's stream.
        expected: StreamId,
        /// The buffer's stream.
        found: StreamId,
    },
    /// A PTX module, or one of its kernels (named instead), could not be
    /// loaded (an old driver cannot JIT PTX 9.0). The driver's error is a
    /// field, not the error's source: its own message repeats the code (and
    /// asks the driver for a description), so a report that prints every
    /// cause would say it twice (as `hemem_memory::DeviceError::Driver`).
    #[error("loading PTX module {module} failed: {:?}", error.0)]
    Load {
        /// The module.
        module: &'static str,
        /// The driver's error.
        error: DriverError,
    },
    /// A launch failed (the driver's error kept as for [`Error::Load`]).
    #[error("launching kernel {kernel} failed: {:?}", error.0)]
    Launch {
        /// The kernel.
        kernel: &'static str,
        /// The driver's error.
        error: DriverError,
    },
}

/// `Result` with the kernel crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;
    use cudarc::driver::sys::CUresult;

    #[test]
    fn error_strings() {
        let cases: Vec<(Error, &str)> = vec![
            (
                hemem_memory::Error::ZeroSize {
                    class: hemem_memory::MemoryClass::Temporary,
                }
                .into(),
                "zero-size allocation requested for class temporary",
            ),
            (
                Error::LaunchShape {
                    kernel: "touch_verify",
                    what: "counter words",
                    expected: 1,
                    found: 0,
                },
                "kernel touch_verify: counter words is 0, expected 1",
            ),
            (
                Error::WrongStream {
                    kernel: "bench_chunk_add",
                    expected: StreamId::Compute,
                    found: StreamId::Copy,
                },
                "kernel bench_chunk_add: a buffer lives on the copy stream, the launch on the compute stream",
            ),
            (
                Error::Load {
                    module: "touch",
                    error: DriverError(CUresult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION),
                },
                "loading PTX module touch failed: CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
            ),
            (
                Error::Launch {
                    kernel: "touch_fill",
                    error: DriverError(CUresult::CUDA_ERROR_LAUNCH_FAILED),
                },
                "launching kernel touch_fill failed: CUDA_ERROR_LAUNCH_FAILED",
            ),
        ];
        for (error, message) in cases {
            assert_eq!(error.to_string(), message);
            // The driver's error is not a second cause naming the same code.
            if matches!(error, Error::Load { .. } | Error::Launch { .. }) {
                assert!(std::error::Error::source(&error).is_none(), "{message}");
            }
        }
    }
}
