//! The GPU backend: the [`Backend`](super::Backend) trait on hemem's PTX kernels, with every
//! buffer from the GPU memory system (policies, budget, residency).
//!
//! Work is queued on the device's compute stream in call order; the only
//! synchronisation is [`Backend::read`](super::Backend::read) (a download). Before each launch the
//! buffers it touches are declared to the allocator, which makes managed
//! buffers resident (or lets them fault, under the `managed` policy) and
//! keeps them from eviction until the launch is queued.
//!
//! Outputs are bit-identical to the CPU backend: the kernels reduce fully,
//! use the CPU plans' ψ, and repeat the CPU's floating-point sequence in
//! ModDown.

mod args;
mod caches;
#[cfg(test)]
mod emulate;
#[cfg(test)]
mod emulate_acc;
#[cfg(test)]
mod emulate_convert;
#[cfg(test)]
mod emulate_prf;
mod fused;
mod ops;
mod raw;
mod tables;

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use hemem_gpu_kernels::Kernels;
use hemem_gpu_kernels::launch::ckks as launch;
use hemem_gpu_kernels::launch::ckks::ntt::{NttGeometry, NttRows};
use hemem_memory::{Allocator, Buffer, DependentLaunch, GpuDevice};

use self::args::address;
use self::tables::{DeviceConversion, modulus_table, twiddle_tables, upload_constant};
use crate::ntt::NttPlan;
use crate::zq::Modulus;
use crate::{Error, Result};

/// The GPU implementation of [`Backend`](super::Backend). `Send + Sync`: every operation
/// queues on the device's compute stream, in call order; callers from
/// several threads are serialised by the stream, not by the backend.
pub struct GpuBackend {
    device: GpuDevice,
    kernels: Kernels,
    allocator: Allocator,
    degree: usize,
    geometry: launch::ntt::NttGeometry,
    /// The rows phase with 16 points per thread ([`NttRows::Radix16`]);
    /// read at each transform, so it can change between operations.
    rows16: AtomicBool,
    moduli: Vec<Modulus>,
    consts: Buffer,
    twiddles: Buffer,
    n_inv: Buffer,
    /// Base conversions by `PairKey(from, to)`.
    conversions: RwLock<HashMap<Vec<usize>, Arc<DeviceConversion>>>,
    /// Rescaling's `(q_last^{-1} mod q_i, shoup)` pairs by `PairKey(kept, [last])`.
    rescale_scales: RwLock<HashMap<Vec<usize>, Arc<Buffer>>>,
    /// Decomposition's `(N^{-1}·q̂_i^{-1}, shoup)` pairs by `PairKey(moduli, [alpha])`.
    decompose_scales: RwLock<HashMap<Vec<usize>, Arc<Buffer>>>,
}

impl fmt::Debug for GpuBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuBackend")
            .field("device", &self.device.ordinal())
            .field("degree", &self.degree)
            .field("moduli", &self.moduli.len())
            .finish_non_exhaustive()
    }
}

impl GpuBackend {
    /// A backend on `device` allocating through `allocator` (a GPU
    /// allocator for that device), for the moduli and NTT plans of a
    /// context: uploads the modulus and twiddle tables and loads the
    /// kernels, launched with programmatic dependent launch where
    /// `dependent_launch` enables it for the card ([`Kernels::load`]).
    ///
    /// # Errors
    /// Kernel loading (an old driver; `DependentLaunch::On` on a card older
    /// than compute capability 9.0), allocation and transfer errors.
    pub fn new(
        device: GpuDevice,
        allocator: Allocator,
        plans: &[NttPlan],
        dependent_launch: DependentLaunch,
    ) -> Result<Self> {
        let degree = plans
            .first()
            .map(NttPlan::degree)
            .ok_or(Error::EmptyBasis)?;
        let geometry = launch::ntt::NttGeometry::new(degree.trailing_zeros())?;
        let moduli: Vec<Modulus> = plans.iter().map(|p| *p.modulus()).collect();
        let kernels = Kernels::load(&device, dependent_launch)?;
        let consts = upload_constant(&allocator, &modulus_table(&moduli))?;
        let (tw, inv) = twiddle_tables(plans);
        let twiddles = upload_constant(&allocator, &tw)?;
        let n_inv = upload_constant(&allocator, &inv)?;
        Ok(Self {
            device,
            kernels,
            allocator,
            degree,
            geometry,
            rows16: AtomicBool::new(false),
            moduli,
            consts,
            twiddles,
            n_inv,
            conversions: RwLock::new(HashMap::new()),
            rescale_scales: RwLock::new(HashMap::new()),
            decompose_scales: RwLock::new(HashMap::new()),
        })
    }

    /// The GPU.
    pub fn gpu(&self) -> &GpuDevice {
        &self.device
    }

    /// The NTT geometry with the rows kernels selected now.
    fn ntt_geometry(&self) -> NttGeometry {
        let rows = if self.rows16.load(Ordering::Relaxed) {
            NttRows::Radix16
        } else {
            NttRows::Radix8
        };
        self.geometry.with_rows(rows)
    }

    fn n(&self) -> u32 {
        self.degree as u32
    }

    fn consts(&self) -> Result<u64> {
        address(&self.consts)
    }

    fn modulus(&self, index: usize) -> Result<Modulus> {
        self.moduli
            .get(index)
            .copied()
            .ok_or(Error::LengthMismatch {
                expected: self.moduli.len(),
                actual: index.saturating_add(1),
            })
    }
}
