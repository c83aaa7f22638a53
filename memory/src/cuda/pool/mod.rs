//! The library's own device pool, behind the `DevicePool` placement: the
//! page-mapped pool ([`paged`], the default) or the driver's stream-ordered
//! pool ([`driver`]), chosen by [`PoolKind`].
//!
//! Both hand out memory ordered on a stream, keep freed memory for reuse
//! until a trim, and never hold more than their cap, so that under the
//! `planned` policy the driver itself enforces the budget. They differ in
//! what a cap leaves usable: the driver's pool places blocks inside chunks
//! it reserved and can refuse a block while the memory it holds free lies
//! in pieces; the paged pool maps any free page wherever a block needs it.

mod driver;
mod paged;

use std::fmt;
use std::str::FromStr;

use self::driver::DriverPool;
use self::paged::PagedPool;
use super::GpuDevice;
use crate::{ConfigError, DeviceMemory, Result, StreamId};

/// The driver pool's reservation chunk for small allocations (measured: a
/// pool whose maximum was 104 MiB held 128 MiB).
pub(crate) const POOL_CHUNK: u64 = 32 << 20;

/// Which pool backs the `DevicePool` placement (`HEMEM_DEVICE_POOL`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PoolKind {
    /// Device memory mapped page by page into one reserved range
    /// (`cuMemCreate`/`cuMemMap`): any free page backs any new block.
    #[default]
    Paged,
    /// The driver's stream-ordered pool (`cuMemPoolCreate`), whose free
    /// memory can lie in pieces too small for a block under a hard cap.
    Driver,
}

impl FromStr for PoolKind {
    type Err = crate::Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "paged" => Ok(Self::Paged),
            "driver" => Ok(Self::Driver),
            other => Err(ConfigError::InvalidSetting {
                name: "HEMEM_DEVICE_POOL",
                value: other.to_owned(),
            }
            .into()),
        }
    }
}

impl fmt::Display for PoolKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Paged => "paged",
            Self::Driver => "driver",
        })
    }
}

/// What the paged pool has done since it was made: the driver calls behind
/// its page mapping, and the waits its reuse needed. Where a run under a
/// budget spends host time in the pool shows here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolActivity {
    /// Physical pages created (`cuMemCreate`).
    pub pages_created: u64,
    /// Physical pages released (`cuMemRelease`, by trims).
    pub pages_released: u64,
    /// Pages mapped at an address (`cuMemMap`).
    pub pages_mapped: u64,
    /// Pages unmapped for another block or a trim (`cuMemUnmap`).
    pub pages_unmapped: u64,
    /// Times the host waited for a free to complete before unmapping.
    pub host_waits: u64,
    /// Times a stream was made to wait on the other stream's free.
    pub stream_waits: u64,
    /// Host time in the pool's allocations and frees.
    pub host_ns: u64,
    /// Of which waiting for frees to complete.
    pub host_wait_ns: u64,
    /// Of which in `cuMemCreate`, `cuMemMap`, `cuMemSetAccess` and
    /// `cuMemUnmap`.
    pub mapping_ns: u64,
}

/// What an allocation from the pool can fail with.
#[derive(Debug)]
pub(crate) enum PoolAllocError {
    /// The pool (or the device) has no room for it.
    OutOfMemory,
    /// Anything else.
    Other(crate::Error),
}

/// The device pool of one GPU.
#[derive(Debug)]
pub(crate) enum Pool {
    /// See [`PoolKind::Paged`] (boxed: its book is large beside a handle).
    Paged(Box<PagedPool>),
    /// See [`PoolKind::Driver`].
    Driver(DriverPool),
}

impl Pool {
    /// A pool of `kind` on `gpu` that never holds more than `max_bytes`
    /// (rounded down as [`Pool::cap`] rounds).
    ///
    /// # Errors
    /// [`crate::DeviceError::PoolsUnsupported`] when the device lacks what
    /// `kind` needs; driver errors.
    pub(crate) fn create(gpu: &GpuDevice, max_bytes: u64, kind: PoolKind) -> Result<Self> {
        Ok(match kind {
            PoolKind::Paged => Self::Paged(Box::new(PagedPool::create(gpu, max_bytes)?)),
            PoolKind::Driver => Self::Driver(DriverPool::create(gpu, max_bytes)?),
        })
    }

    /// The most a pool of `kind` asked to hold at most `max_bytes` can be
    /// held to: whole 2 MiB pages for the paged pool, whole chunks for the
    /// driver's ([`DriverPool::cap`]). Never zero.
    pub(crate) fn cap(max_bytes: u64, kind: PoolKind) -> u64 {
        match kind {
            PoolKind::Paged => {
                let page = 2 << 20;
                (max_bytes - max_bytes % page).max(page)
            }
            PoolKind::Driver => DriverPool::cap(max_bytes),
        }
    }

    /// The granule the pool's footprint grows by: a page, or the driver
    /// pool's chunk.
    pub(crate) fn granule(&self) -> u64 {
        match self {
            Self::Paged(p) => p.page(),
            Self::Driver(_) => POOL_CHUNK,
        }
    }

    /// Allocates `bytes`, ordered on `stream`.
    pub(crate) fn allocate(
        &self,
        bytes: usize,
        stream: StreamId,
    ) -> std::result::Result<DeviceMemory, PoolAllocError> {
        match self {
            Self::Paged(p) => p.allocate(bytes, stream),
            Self::Driver(p) => p.allocate(bytes, stream),
        }
    }

    /// Zeroes `bytes` of `memory` in order on its stream, before its free.
    ///
    /// # Errors
    /// Driver errors of queueing the memset.
    pub(crate) fn zero(&self, memory: DeviceMemory, bytes: usize) -> Result<()> {
        match self {
            Self::Paged(p) => p.zero(memory, bytes),
            Self::Driver(p) => p.zero(memory, bytes),
        }
    }

    /// Frees `memory` in order on its stream (errors are kept by the device
    /// handle). `memory` must come from this pool and be freed once.
    pub(crate) fn free(&self, memory: DeviceMemory) {
        match self {
            Self::Paged(p) => p.free(memory),
            Self::Driver(p) => p.free(memory),
        }
    }

    /// Gives memory held beyond `keep` bytes back to the device; returns
    /// the bytes held after.
    ///
    /// # Errors
    /// Driver errors.
    pub(crate) fn trim_to(&self, keep: u64) -> Result<u64> {
        match self {
            Self::Paged(p) => p.trim_to(keep),
            Self::Driver(p) => p.trim_to(keep),
        }
    }

    /// Bytes the pool holds from the device (live blocks and freed memory
    /// kept for reuse).
    ///
    /// # Errors
    /// Driver errors.
    pub(crate) fn reserved(&self) -> Result<u64> {
        match self {
            Self::Paged(p) => Ok(p.reserved()),
            Self::Driver(p) => p.reserved(),
        }
    }

    /// What the paged pool has done (`None` for the driver's pool, whose
    /// work the driver does not report).
    pub(crate) fn activity(&self) -> Option<PoolActivity> {
        match self {
            Self::Paged(p) => Some(p.activity()),
            Self::Driver(_) => None,
        }
    }

    /// The most bytes the pool has held at once: for the driver's pool the
    /// driver's own record (`CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH`), for the
    /// paged pool the sum of its physical allocations at their largest.
    ///
    /// # Errors
    /// Driver errors.
    pub(crate) fn reserved_high(&self) -> Result<u64> {
        match self {
            Self::Paged(p) => Ok(p.reserved_high()),
            Self::Driver(p) => p.reserved_high(),
        }
    }
}
