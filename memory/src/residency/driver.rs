//! What the residency manager asks of the device, behind a trait so its
//! decisions run (and are tested) on the CPU with a recording mock.

use std::fmt;
use std::sync::Arc;

use crate::cuda::{GpuDevice, Location, Pool};
use crate::{AllocationId, DevicePtr, Result, StreamId};

/// A managed buffer as the residency manager knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ManagedRange {
    /// The buffer's allocation id.
    pub id: AllocationId,
    /// Its device address.
    pub ptr: DevicePtr,
    /// Its size in bytes.
    pub bytes: u64,
}

/// The device operations the residency manager issues. Calls come in
/// batches: [`ResidencyDriver::begin`], then advice, prefetches and trims,
/// then [`ResidencyDriver::end`].
pub trait ResidencyDriver: Send + Sync + fmt::Debug {
    /// Orders the batch after the work already queued on the compute stream
    /// (a buffer about to be evicted may still be read there).
    ///
    /// # Errors
    /// Driver errors.
    fn begin(&self) -> Result<()>;

    /// Sets or unsets read-mostly advice.
    ///
    /// # Errors
    /// Driver errors.
    fn set_read_mostly(&self, range: ManagedRange, on: bool) -> Result<()>;

    /// Queues a prefetch to the device (`to_device`) or to the host.
    ///
    /// # Errors
    /// Driver errors.
    fn prefetch(&self, range: ManagedRange, to_device: bool) -> Result<()>;

    /// Trims the device pool to `keep` bytes; returns the bytes it holds after.
    ///
    /// # Errors
    /// Driver errors.
    fn trim_pool(&self, keep: u64) -> Result<u64>;

    /// Orders later compute-stream work after the batch.
    ///
    /// # Errors
    /// Driver errors.
    fn end(&self) -> Result<()>;
}

/// The real driver: prefetches and evictions on the copy stream, ordered
/// against the compute stream with events.
#[derive(Debug)]
pub(crate) struct GpuResidencyDriver {
    pub(crate) gpu: GpuDevice,
    pub(crate) pool: Option<Arc<Pool>>,
}

impl ResidencyDriver for GpuResidencyDriver {
    fn begin(&self) -> Result<()> {
        self.gpu.order(StreamId::Compute, StreamId::Copy)
    }

    fn set_read_mostly(&self, range: ManagedRange, on: bool) -> Result<()> {
        self.gpu
            .advise_read_mostly(range.ptr, usize::try_from(range.bytes).unwrap_or(0), on)
    }

    fn prefetch(&self, range: ManagedRange, to_device: bool) -> Result<()> {
        let to = if to_device {
            Location::Device
        } else {
            Location::Host
        };
        self.gpu.prefetch(
            range.ptr,
            usize::try_from(range.bytes).unwrap_or(0),
            to,
            StreamId::Copy,
        )
    }

    fn trim_pool(&self, keep: u64) -> Result<u64> {
        match &self.pool {
            Some(pool) => pool.trim_to(keep),
            None => Ok(0),
        }
    }

    fn end(&self) -> Result<()> {
        self.gpu.order(StreamId::Copy, StreamId::Compute)
    }
}

/// A driver that does nothing (tests of the accounting alone).
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct NullDriver;

#[cfg(test)]
impl ResidencyDriver for NullDriver {
    fn begin(&self) -> Result<()> {
        Ok(())
    }

    fn set_read_mostly(&self, _range: ManagedRange, _on: bool) -> Result<()> {
        Ok(())
    }

    fn prefetch(&self, _range: ManagedRange, _to_device: bool) -> Result<()> {
        Ok(())
    }

    fn trim_pool(&self, keep: u64) -> Result<u64> {
        Ok(keep)
    }

    fn end(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod mock {
    //! A driver that records what it is asked, for exact expectations.

    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    use super::*;

    /// One recorded call.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum Call {
        Begin,
        ReadMostly(u64, bool),
        ToDevice(u64),
        ToHost(u64),
        Trim(u64),
        End,
    }

    /// Records calls; trims report exactly `keep` bytes held afterwards.
    #[derive(Debug, Clone, Default)]
    pub(crate) struct RecordingDriver {
        pub(crate) calls: Arc<Mutex<Vec<Call>>>,
        /// Bytes a trim leaves the pool holding beyond what it was asked to
        /// keep (chunks shared with live allocations, frees not reached yet).
        pub(crate) trim_slack: Arc<AtomicU64>,
    }

    impl RecordingDriver {
        /// The calls so far, emptied.
        pub(crate) fn take(&self) -> Vec<Call> {
            std::mem::take(&mut *self.calls.lock().unwrap_or_else(|e| e.into_inner()))
        }

        fn push(&self, call: Call) {
            self.calls
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(call);
        }
    }

    impl ResidencyDriver for RecordingDriver {
        fn begin(&self) -> Result<()> {
            self.push(Call::Begin);
            Ok(())
        }

        fn set_read_mostly(&self, range: ManagedRange, on: bool) -> Result<()> {
            self.push(Call::ReadMostly(range.id.0, on));
            Ok(())
        }

        fn prefetch(&self, range: ManagedRange, to_device: bool) -> Result<()> {
            self.push(if to_device {
                Call::ToDevice(range.id.0)
            } else {
                Call::ToHost(range.id.0)
            });
            Ok(())
        }

        fn trim_pool(&self, keep: u64) -> Result<u64> {
            self.push(Call::Trim(keep));
            Ok(keep + self.trim_slack.load(Ordering::Relaxed))
        }

        fn end(&self) -> Result<()> {
            self.push(Call::End);
            Ok(())
        }
    }
}
