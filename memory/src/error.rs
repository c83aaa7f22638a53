//! Errors of the memory system: one [`Error`] with sub-enums for the device
//! ([`DeviceError`]), configuration ([`ConfigError`]) and allocation traces
//! ([`TraceError`]).

use std::fmt;
use std::path::PathBuf;

use cudarc::driver::DriverError;

use crate::{AllocationId, MemoryClass, Placement};

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
    /// The device (or the pre-allocated pinned arena) could not provide the memory.
    #[error("out of memory in placement {placement}: {requested} bytes for class {class}")]
    OutOfMemory {
        /// Bytes requested.
        requested: usize,
        /// Where the memory was asked for.
        placement: Placement,
        /// The class of the request.
        class: MemoryClass,
    },
    /// The device budget cannot make room for a request, even after trimming
    /// the pool and evicting every managed buffer no operation is using.
    #[error(
        "over the device budget: {requested} bytes{} requested, budget {budget} bytes, in use: {in_use}",
        placing_suffix(*.placing)
    )]
    OverBudget {
        /// Bytes that had to become device-resident.
        requested: u64,
        /// The class of what was being placed (`None` for a mix of
        /// classes), so that a refusal says what did not fit even when the
        /// budget was exhausted before the request.
        placing: Option<MemoryClass>,
        /// The budget in bytes.
        budget: u64,
        /// Device-resident bytes per class and placement when the request failed.
        in_use: Box<InUse>,
    },
    /// Managed memory would exceed the cap (the GPU's free memory unless
    /// driver-managed oversubscription was opted in to).
    #[error(
        "managed memory cap exceeded: {requested} bytes requested with {allocated} bytes allocated, cap {cap} bytes"
    )]
    ManagedCapExceeded {
        /// Bytes requested.
        requested: u64,
        /// Managed bytes already allocated.
        allocated: u64,
        /// The cap.
        cap: u64,
    },
    /// The allocator has no resource for the placement its policy chose.
    #[error("no resource for placement {placement} in this allocator")]
    PlacementUnavailable {
        /// The placement the policy chose.
        placement: Placement,
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
    /// A transfer reaches outside a buffer.
    #[error(
        "transfer of {words} words at word {offset} does not fit a buffer of {buffer_words} words"
    )]
    TransferOutOfBounds {
        /// First word of the transfer in the buffer.
        offset: usize,
        /// Words transferred.
        words: usize,
        /// Words in the buffer.
        buffer_words: usize,
    },
    /// A buffer was handed to an allocator that did not allocate it.
    #[error("buffer {id} belongs to another allocator")]
    ForeignBuffer {
        /// The buffer's id.
        id: AllocationId,
    },
    /// Sensitive memory (secret-key material) could not be zeroed before its
    /// release: the block is kept out of reuse (never freed) and the failure
    /// is reported by the call that released it ([`crate::Allocator::release`])
    /// or, for a buffer released by `Drop`, by the allocator's next fallible
    /// call ([`crate::Allocator::check`]).
    #[error(
        "sensitive memory of {bytes} bytes in placement {placement} could not be zeroed before its release: {cause}"
    )]
    ZeroingFailed {
        /// Where the memory lives.
        placement: Placement,
        /// Bytes that should have been zeroed.
        bytes: usize,
        /// What the zeroing met (a driver error).
        cause: Box<Error>,
    },
    /// An unknown memory-class name (in a trace file or on the command line).
    #[error("unknown memory class {name:?}")]
    UnknownClass {
        /// The name given.
        name: String,
    },
    /// The GPU or its driver refused.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// A setting could not be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// An allocation trace could not be read, or a replay left it.
    #[error(transparent)]
    Trace(#[from] TraceError),
}

/// Errors about the GPU and its driver.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeviceError {
    /// No usable GPU: the driver library is missing, or it reports no device.
    #[error("no GPU: {reason}")]
    NoGpu {
        /// Why.
        reason: &'static str,
    },
    /// The device ordinal does not exist.
    #[error("GPU {ordinal} does not exist ({count} found)")]
    DeviceOutOfRange {
        /// The ordinal asked for.
        ordinal: usize,
        /// Devices present.
        count: usize,
    },
    /// The GPU is older than Turing: nvcc 13 cannot target it.
    #[error("GPU compute capability {major}.{minor} is below the required 7.5 (Turing)")]
    ComputeCapabilityTooLow {
        /// Major version.
        major: u32,
        /// Minor version.
        minor: u32,
    },
    /// The driver cannot load the kernels' PTX ISA 9.0.
    #[error(
        "CUDA driver {found} is too old: hemem's PTX needs CUDA {required} (driver R580) or newer"
    )]
    DriverTooOld {
        /// The driver's CUDA version.
        found: DriverVersion,
        /// The version needed.
        required: DriverVersion,
    },
    /// The GPU has no concurrent managed access (Windows, WSL, some older
    /// setups): managed placements are refused.
    #[error(
        "GPU {ordinal} has no concurrent managed access (Windows or WSL?): managed placements are unavailable"
    )]
    ManagedUnsupported {
        /// The device ordinal.
        ordinal: usize,
    },
    /// The GPU has no stream-ordered memory pools.
    #[error("GPU {ordinal} does not support memory pools")]
    PoolsUnsupported {
        /// The device ordinal.
        ordinal: usize,
    },
    /// A driver call failed. The message names the `CUresult` without asking
    /// the driver, so it formats even where libcuda is missing. The
    /// driver's error is kept as a field, not as the error's source: its
    /// own message repeats the same code (and asks the driver for a
    /// description), so a report that prints every cause would say it
    /// twice.
    #[error("CUDA driver call {op} failed: {:?}", error.0)]
    Driver {
        /// The driver function.
        op: &'static str,
        /// The driver's error.
        error: DriverError,
    },
    /// A CUPTI call failed (the unified-memory counters used by the tests).
    #[error("CUPTI call {op} failed with code {code}")]
    Cupti {
        /// The CUPTI function.
        op: &'static str,
        /// The `CUptiResult` code.
        code: u32,
    },
}

/// Errors in settings: budgets, policies, environment variables.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A policy name that is not one of `device`, `managed`, `static`,
    /// `profiled`, `dynamic`.
    #[error(
        "unknown memory policy {name:?} (expected planned, device, managed, static, profiled or dynamic)"
    )]
    UnknownPolicy {
        /// The name given.
        name: String,
    },
    /// An eviction order that is not one of `lru`, `next-use`.
    #[error("unknown eviction order {name:?} (expected lru or next-use)")]
    UnknownEviction {
        /// The name given.
        name: String,
    },
    /// A byte size that does not parse (`4GiB`, `512MiB`, `1073741824`).
    #[error(
        "invalid byte size {text:?} (expected a number with an optional unit: B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)"
    )]
    InvalidByteSize {
        /// The text given.
        text: String,
    },
    /// An environment variable or option with a value that is not allowed.
    #[error("invalid value {value:?} for {name}")]
    InvalidSetting {
        /// The variable or option.
        name: &'static str,
        /// The value given.
        value: String,
    },
    /// A budget larger than the GPU can hold.
    #[error("device budget {budget} bytes is larger than the GPU's {available} free bytes")]
    BudgetTooLarge {
        /// The budget asked for.
        budget: u64,
        /// Bytes the GPU has free.
        available: u64,
    },
    /// A budget of zero bytes.
    #[error("device budget must be positive")]
    ZeroBudget,
    /// The profiled policy needs a trace (`--trace FILE`).
    #[error("the profiled policy needs a recorded trace")]
    MissingTrace,
    /// The dynamic policy's threshold must be at least 1.
    #[error("the dynamic policy's threshold must be at least 1")]
    ZeroThreshold,
    /// Programmatic dependent launch was asked for
    /// (`HEMEM_DEPENDENT_LAUNCH=on`) on a GPU older than compute
    /// capability 9.0.
    #[error(
        "programmatic dependent launch needs compute capability 9.0 or newer; this GPU has {capability} (HEMEM_DEPENDENT_LAUNCH=on)"
    )]
    DependentLaunchUnsupported {
        /// The GPU's compute capability.
        capability: crate::cuda::ComputeCapability,
    },
}

/// Errors reading an allocation trace or replaying one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    /// A line of a trace file is malformed.
    #[error("malformed trace, line {line}: {fault}")]
    Malformed {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        fault: TraceFault,
    },
    /// A trace file could not be read or written.
    #[error("trace file {path:?}: {kind}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error's kind.
        kind: std::io::ErrorKind,
    },
    /// The replay made an allocation the recording does not have at this index.
    #[error(
        "replay diverged from the recording at allocation {index}: recorded {recorded_class} of {recorded_bytes} bytes, now {found_class} of {found_bytes} bytes"
    )]
    Divergence {
        /// The allocation id (its 1-based index in the run).
        index: u64,
        /// Class in the recording.
        recorded_class: MemoryClass,
        /// Size in the recording.
        recorded_bytes: u64,
        /// Class requested now.
        found_class: MemoryClass,
        /// Size requested now.
        found_bytes: u64,
    },
    /// The replay made more allocations than the recording.
    #[error("replay made allocation {index}, past the {recorded} allocations of the recording")]
    Exhausted {
        /// The allocation id.
        index: u64,
        /// Allocations in the recording.
        recorded: u64,
    },
}

/// What is wrong with a line of a trace file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TraceFault {
    /// The file is empty.
    #[error("empty file (expected the header line)")]
    Empty,
    /// The first line is not the expected header.
    #[error("expected the header id,class,bytes,placement,stream,alloc_ns,free_ns")]
    Header,
    /// A line has the wrong number of fields.
    #[error("{found} fields instead of 7")]
    FieldCount {
        /// Fields found.
        found: usize,
    },
    /// A numeric field does not parse.
    #[error("field {column} is not a non-negative integer")]
    Number {
        /// The column.
        column: &'static str,
    },
    /// The class is unknown.
    #[error("unknown memory class")]
    Class,
    /// The placement is unknown.
    #[error("unknown placement")]
    Placement,
    /// The stream is unknown.
    #[error("unknown stream")]
    Stream,
    /// Zero bytes.
    #[error("zero-size allocation")]
    ZeroBytes,
    /// The free time precedes the allocation time.
    #[error("freed before it was allocated")]
    FreeBeforeAlloc,
    /// An id appears twice.
    #[error("duplicate allocation id")]
    DuplicateId,
    /// A streaming trace's first line is not its header.
    #[error("expected the header `hemem-streaming-trace 1`")]
    StreamingHeader,
    /// A streaming trace's line starts with an unknown keyword.
    #[error("unknown keyword")]
    StreamingKeyword,
    /// A streaming trace's value does not parse, names an undeclared
    /// object, or the times do not match the steps.
    #[error("malformed value")]
    StreamingValue,
}

/// A CUDA driver version, as `cuDriverGetVersion` reports it (`13000` for 13.0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DriverVersion(pub u32);

impl DriverVersion {
    /// CUDA 13.0 (driver R580): the oldest that loads PTX ISA 9.0.
    pub const CUDA_13_0: Self = Self(13000);
}

impl fmt::Display for DriverVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.0 / 1000, (self.0 % 1000) / 10)
    }
}

/// Device-resident bytes per class and placement (pooled bytes and managed
/// bytes the residency manager has made resident), carried by
/// [`Error::OverBudget`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct InUse {
    cells: [[u64; 5]; 6],
    arena_free: u64,
    pool_cached: u64,
}

impl InUse {
    /// Bytes of `class` in `placement`.
    pub fn get(&self, class: MemoryClass, placement: Placement) -> u64 {
        self.cells
            .get(class.index())
            .and_then(|row| row.get(placement.index()))
            .copied()
            .unwrap_or(0)
    }

    /// Bytes in `placement` over all classes.
    pub fn placement(&self, placement: Placement) -> u64 {
        MemoryClass::ALL
            .into_iter()
            .map(|c| self.get(c, placement))
            .sum()
    }

    /// All device-resident bytes.
    pub fn total(&self) -> u64 {
        Placement::ALL.into_iter().map(|p| self.placement(p)).sum()
    }

    /// Device bytes the library holds that no live buffer uses: the free
    /// room of the streaming arena's chunks and what the pool keeps cached
    /// beyond its live allocations. They count against the budget, so a
    /// refusal's `in use` plus these is what the budget saw.
    pub fn held_free(&self) -> u64 {
        self.arena_free + self.pool_cached
    }

    /// The part of [`InUse::held_free`] in the streaming arena's chunks
    /// (room the arena can hand to streamed objects, not to temporaries).
    pub fn arena_free(&self) -> u64 {
        self.arena_free
    }

    /// The part of [`InUse::held_free`] the pool keeps cached beyond its
    /// live allocations (after a trim: free room lying in chunks that also
    /// hold live blocks, which the driver cannot give back — the pool's
    /// fragmentation).
    pub fn pool_cached(&self) -> u64 {
        self.pool_cached
    }

    pub(crate) fn set_held_free(&mut self, arena_free: u64, pool_cached: u64) {
        self.arena_free = arena_free;
        self.pool_cached = pool_cached;
    }

    pub(crate) fn set(&mut self, class: MemoryClass, placement: Placement, bytes: u64) {
        if let Some(cell) = self
            .cells
            .get_mut(class.index())
            .and_then(|row| row.get_mut(placement.index()))
        {
            *cell = bytes;
        }
    }
}

impl fmt::Display for InUse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} bytes", self.total())?;
        let mut first = true;
        for placement in Placement::ALL {
            for class in MemoryClass::ALL {
                let bytes = self.get(class, placement);
                if bytes > 0 {
                    f.write_str(if first { " (" } else { ", " })?;
                    first = false;
                    write!(f, "{class}/{placement} {bytes}")?;
                }
            }
        }
        if !first {
            f.write_str(")")?;
        }
        if self.held_free() > 0 {
            write!(
                f,
                ", plus {} bytes held free ({} in arena chunks, {} in the pool's cache)",
                self.held_free(),
                self.arena_free,
                self.pool_cached
            )?;
        }
        Ok(())
    }
}

/// `OverBudget`'s words for what was being placed.
fn placing_suffix(placing: Option<MemoryClass>) -> String {
    placing.map_or_else(String::new, |class| format!(" of class {class}"))
}

/// `Result` with the memory system's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// Wraps a driver error with the call that produced it.
pub(crate) fn driver(op: &'static str) -> impl FnOnce(DriverError) -> Error {
    move |error| DeviceError::Driver { op, error }.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cudarc::driver::sys::CUresult;

    /// A driver error's report names its code once: the driver's own error,
    /// whose message repeats the code (and asks the driver for a
    /// description), is not in the chain of causes.
    #[test]
    fn driver_errors_name_their_code_once() {
        let error: Error = DeviceError::Driver {
            op: "cuMemAlloc",
            error: DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY),
        }
        .into();
        let mut causes = Vec::new();
        let mut cause: Option<&dyn std::error::Error> = Some(&error);
        while let Some(e) = cause {
            causes.push(e.to_string());
            cause = e.source();
        }
        let text = causes.join(": ");
        assert_eq!(
            text.matches("CUDA_ERROR_OUT_OF_MEMORY").count(),
            1,
            "{text}"
        );
    }

    #[test]
    fn error_strings() {
        let class = MemoryClass::Temporary;
        let mut in_use = InUse::default();
        in_use.set(MemoryClass::Temporary, Placement::DevicePool, 100);
        in_use.set(MemoryClass::Ciphertext, Placement::Managed, 28);
        let cases: Vec<(Error, &str)> = vec![
            (
                Error::ZeroSize { class },
                "zero-size allocation requested for class temporary",
            ),
            (
                Error::TooLarge {
                    requested: 10,
                    limit: 5,
                    class,
                },
                "allocation of 10 bytes for class temporary exceeds the limit of 5 bytes",
            ),
            (
                Error::HostOutOfMemory {
                    requested: 8,
                    class,
                },
                "host out of memory: 8 bytes for class temporary",
            ),
            (
                Error::OutOfMemory {
                    requested: 8,
                    placement: Placement::DevicePool,
                    class,
                },
                "out of memory in placement device_pool: 8 bytes for class temporary",
            ),
            (
                Error::OverBudget {
                    requested: 64,
                    placing: None,
                    budget: 128,
                    in_use: Box::new(in_use),
                },
                "over the device budget: 64 bytes requested, budget 128 bytes, in use: 128 bytes \
                 (temporary/device_pool 100, ciphertext/managed 28)",
            ),
            (
                Error::OverBudget {
                    requested: 1,
                    placing: Some(MemoryClass::EvaluationKey),
                    budget: 0,
                    in_use: Box::default(),
                },
                "over the device budget: 1 bytes of class evaluation_key requested, budget 0 bytes, \
                 in use: 0 bytes",
            ),
            (
                Error::OverBudget {
                    requested: 0,
                    placing: Some(MemoryClass::Temporary),
                    budget: 96,
                    in_use: Box::new({
                        let mut held = in_use;
                        held.set_held_free(12, 20);
                        held
                    }),
                },
                "over the device budget: 0 bytes of class temporary requested, budget 96 bytes, \
                 in use: 128 bytes (temporary/device_pool 100, ciphertext/managed 28), plus 32 \
                 bytes held free (12 in arena chunks, 20 in the pool's cache)",
            ),
            (
                Error::ManagedCapExceeded {
                    requested: 3,
                    allocated: 2,
                    cap: 4,
                },
                "managed memory cap exceeded: 3 bytes requested with 2 bytes allocated, cap 4 bytes",
            ),
            (
                Error::PlacementUnavailable {
                    placement: Placement::Managed,
                },
                "no resource for placement managed in this allocator",
            ),
            (
                Error::WrongPlacement {
                    placement: Placement::DevicePool,
                    wanted: "host",
                },
                "buffer in placement device_pool is not accessible from the host",
            ),
            (
                Error::TransferOutOfBounds {
                    offset: 4,
                    words: 8,
                    buffer_words: 10,
                },
                "transfer of 8 words at word 4 does not fit a buffer of 10 words",
            ),
            (
                Error::ForeignBuffer {
                    id: AllocationId(7),
                },
                "buffer 7 belongs to another allocator",
            ),
            (
                Error::ZeroingFailed {
                    placement: Placement::DevicePool,
                    bytes: 64,
                    cause: Box::new(DeviceError::NoGpu { reason: "gone" }.into()),
                },
                "sensitive memory of 64 bytes in placement device_pool could not be zeroed before its release: no GPU: gone",
            ),
            (
                Error::UnknownClass { name: "x".into() },
                "unknown memory class \"x\"",
            ),
            (
                DeviceError::NoGpu {
                    reason: "libcuda not found",
                }
                .into(),
                "no GPU: libcuda not found",
            ),
            (
                DeviceError::DeviceOutOfRange {
                    ordinal: 3,
                    count: 1,
                }
                .into(),
                "GPU 3 does not exist (1 found)",
            ),
            (
                DeviceError::ComputeCapabilityTooLow { major: 7, minor: 0 }.into(),
                "GPU compute capability 7.0 is below the required 7.5 (Turing)",
            ),
            (
                DeviceError::DriverTooOld {
                    found: DriverVersion(12080),
                    required: DriverVersion::CUDA_13_0,
                }
                .into(),
                "CUDA driver 12.8 is too old: hemem's PTX needs CUDA 13.0 (driver R580) or newer",
            ),
            (
                DeviceError::ManagedUnsupported { ordinal: 0 }.into(),
                "GPU 0 has no concurrent managed access (Windows or WSL?): managed placements are unavailable",
            ),
            (
                DeviceError::PoolsUnsupported { ordinal: 1 }.into(),
                "GPU 1 does not support memory pools",
            ),
            (
                DeviceError::Driver {
                    op: "cuMemAllocManaged",
                    error: DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY),
                }
                .into(),
                "CUDA driver call cuMemAllocManaged failed: CUDA_ERROR_OUT_OF_MEMORY",
            ),
            (
                DeviceError::Cupti {
                    op: "cuptiActivityEnable",
                    code: 1,
                }
                .into(),
                "CUPTI call cuptiActivityEnable failed with code 1",
            ),
            (
                ConfigError::UnknownPolicy { name: "lru".into() }.into(),
                "unknown memory policy \"lru\" (expected planned, device, managed, static, profiled or dynamic)",
            ),
            (
                ConfigError::UnknownEviction { name: "mru".into() }.into(),
                "unknown eviction order \"mru\" (expected lru or next-use)",
            ),
            (
                ConfigError::InvalidByteSize {
                    text: "4 GB!".into(),
                }
                .into(),
                "invalid byte size \"4 GB!\" (expected a number with an optional unit: B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)",
            ),
            (
                ConfigError::InvalidSetting {
                    name: "HEMEM_MANAGED_OVERSUBSCRIPTION",
                    value: "maybe".into(),
                }
                .into(),
                "invalid value \"maybe\" for HEMEM_MANAGED_OVERSUBSCRIPTION",
            ),
            (
                ConfigError::BudgetTooLarge {
                    budget: 10,
                    available: 5,
                }
                .into(),
                "device budget 10 bytes is larger than the GPU's 5 free bytes",
            ),
            (
                ConfigError::DependentLaunchUnsupported {
                    capability: crate::cuda::ComputeCapability { major: 8, minor: 6 },
                }
                .into(),
                "programmatic dependent launch needs compute capability 9.0 or newer; this GPU has 8.6 (HEMEM_DEPENDENT_LAUNCH=on)",
            ),
            (
                ConfigError::ZeroBudget.into(),
                "device budget must be positive",
            ),
            (
                ConfigError::MissingTrace.into(),
                "the profiled policy needs a recorded trace",
            ),
            (
                ConfigError::ZeroThreshold.into(),
                "the dynamic policy's threshold must be at least 1",
            ),
            (
                TraceError::Malformed {
                    line: 3,
                    fault: TraceFault::FieldCount { found: 5 },
                }
                .into(),
                "malformed trace, line 3: 5 fields instead of 7",
            ),
            (
                TraceError::Io {
                    path: "t.csv".into(),
                    kind: std::io::ErrorKind::NotFound,
                }
                .into(),
                "trace file \"t.csv\": entity not found",
            ),
            (
                TraceError::Divergence {
                    index: 4,
                    recorded_class: MemoryClass::Ciphertext,
                    recorded_bytes: 8,
                    found_class: class,
                    found_bytes: 16,
                }
                .into(),
                "replay diverged from the recording at allocation 4: recorded ciphertext of 8 bytes, now temporary of 16 bytes",
            ),
            (
                TraceError::Exhausted {
                    index: 11,
                    recorded: 10,
                }
                .into(),
                "replay made allocation 11, past the 10 allocations of the recording",
            ),
        ];
        for (error, message) in cases {
            assert_eq!(error.to_string(), message);
        }
        let faults: Vec<(TraceFault, &str)> = vec![
            (TraceFault::Empty, "empty file (expected the header line)"),
            (
                TraceFault::Header,
                "expected the header id,class,bytes,placement,stream,alloc_ns,free_ns",
            ),
            (
                TraceFault::Number { column: "bytes" },
                "field bytes is not a non-negative integer",
            ),
            (TraceFault::Class, "unknown memory class"),
            (TraceFault::Placement, "unknown placement"),
            (TraceFault::Stream, "unknown stream"),
            (TraceFault::ZeroBytes, "zero-size allocation"),
            (TraceFault::FreeBeforeAlloc, "freed before it was allocated"),
            (TraceFault::DuplicateId, "duplicate allocation id"),
        ];
        for (fault, message) in faults {
            assert_eq!(fault.to_string(), message);
        }
        assert_eq!(DriverVersion(13000).to_string(), "13.0");
        assert_eq!(DriverVersion(12090).to_string(), "12.9");
    }
}
