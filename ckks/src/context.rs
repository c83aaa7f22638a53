//! [`Context`]: parameters plus the backends objects live on.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};

use hemem_memory::{Allocator, DeviceError, GpuDevice, MemoryConfig, Statistics};

use crate::backend::{Backend, CpuBackend, Device, DeviceSelection, GpuBackend};
use crate::encoding::SpecialFft;
use crate::params::{Level, Parameters, Preset};
use crate::rns::{CrtToFloat, RnsBasis};
use crate::{Error, OperandError, Result};

struct Inner {
    params: Parameters,
    device: Device,
    cpu: Arc<dyn Backend>,
    backend: Arc<dyn Backend>,
    /// Float CRT tables for each level's basis `q_0 … q_l`.
    crt: Vec<CrtToFloat>,
    ffts: RwLock<HashMap<usize, Arc<SpecialFft>>>,
}

/// Parameters and the backends their objects live on. Cheap to clone
/// (clones share everything); `Send + Sync`.
///
/// The device is chosen when a context is made; objects are created there
/// and move with `to_device`/`to_host`; an operation runs where its operands
/// live.
///
/// # Objects belong to one context
///
/// Every key, ciphertext and plaintext belongs to the context that made it
/// (and, on a GPU, to that GPU's memory system): an operation on objects of
/// two contexts is refused with [`OperandError::ContextMismatch`], even when
/// both contexts have the same parameters. To use an object in another
/// context or on another GPU, save it to bytes and load it there
/// ([`crate::serialize::Save`] and [`crate::serialize::Load`]); within one
/// context, `to_device`/`to_host` move it between the host and the device.
///
/// # Memory configuration
///
/// [`Context::new`] uses [`MemoryConfig::default`] and reads no environment
/// variables. A program that wants the `HEMEM_*` variables (the `hemem` CLI,
/// the benchmarks, the GPU test harnesses) passes
/// [`MemoryConfig::from_env`] to [`Context::with_memory`] itself.
#[derive(Clone)]
pub struct Context {
    inner: Arc<Inner>,
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("parameters", &self.inner.params.name())
            .field("device", &self.inner.device)
            .finish_non_exhaustive()
    }
}

impl Context {
    /// A context for `params` on the selected device, with the default
    /// memory settings ([`MemoryConfig::default`]: the `planned` policy, a
    /// budget of the GPU's free memory less a margin). The environment is not
    /// read: use [`Context::with_memory`] with [`MemoryConfig::from_env`] for
    /// `HEMEM_*` control.
    ///
    /// # Errors
    /// [`Error::NoGpu`] when a GPU is asked for but unusable; backend
    /// construction errors.
    pub fn new(params: Parameters, device: DeviceSelection) -> Result<Self> {
        Self::with_memory(params, device, &MemoryConfig::default())
    }

    /// A context whose memory follows `config`: on the GPU its policy,
    /// budget and trace settings; on the CPU, statistics and the trace.
    ///
    /// # Errors
    /// As [`Context::new`], and the memory system's configuration errors (a
    /// budget larger than the card, a malformed profiled trace).
    pub fn with_memory(
        params: Parameters,
        device: DeviceSelection,
        config: &MemoryConfig,
    ) -> Result<Self> {
        let gpu = match device {
            DeviceSelection::Cpu => None,
            DeviceSelection::Gpu(ordinal) => Some(open_gpu(ordinal)?),
            DeviceSelection::Auto => match open_gpu(0) {
                Ok(gpu) => Some(gpu),
                Err(Error::NoGpu { .. }) => None,
                Err(e) => return Err(e),
            },
        };
        match gpu {
            None => {
                Self::with_allocator(params, DeviceSelection::Cpu, Allocator::host_with(config)?)
            }
            Some(device) => {
                let cpu = CpuBackend::new(params.degree().get(), &params.all_moduli())?;
                let allocator = Allocator::gpu(&device, config)?;
                let ordinal = device.ordinal();
                let gpu: Arc<dyn Backend> = Arc::new(GpuBackend::new(
                    device,
                    allocator,
                    cpu.plans(),
                    config.dependent_launch,
                )?);
                Self::assemble(params, Device::Gpu(ordinal), Arc::new(cpu), gpu)
            }
        }
    }

    /// A context whose host objects are allocated through `allocator` (one
    /// built from a `MemoryConfig`, say, that records an allocation trace).
    ///
    /// # Errors
    /// [`Error::HostAllocatorOnGpu`] for [`DeviceSelection::Gpu`]: only the
    /// CPU can be selected this way ([`DeviceSelection::Auto`] selects it);
    /// backend construction errors.
    pub fn with_allocator(
        params: Parameters,
        device: DeviceSelection,
        allocator: Allocator,
    ) -> Result<Self> {
        if let DeviceSelection::Gpu(ordinal) = device {
            return Err(Error::HostAllocatorOnGpu { ordinal });
        }
        let moduli = params.all_moduli();
        let n = params.degree().get();
        let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_allocator(n, &moduli, allocator)?);
        Self::assemble(params, Device::Cpu, Arc::clone(&cpu), cpu)
    }

    fn assemble(
        params: Parameters,
        device: Device,
        cpu: Arc<dyn Backend>,
        backend: Arc<dyn Backend>,
    ) -> Result<Self> {
        let crt = (0..params.q_moduli().len())
            .map(|l| {
                let basis = RnsBasis::new(params.q_moduli().iter().take(l + 1).copied().collect())?;
                Ok(CrtToFloat::new(&basis))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            inner: Arc::new(Inner {
                params,
                device,
                cpu,
                backend,
                crt,
                ffts: RwLock::new(HashMap::new()),
            }),
        })
    }

    /// A CPU context for a secure preset.
    ///
    /// # Errors
    /// As [`Parameters::from_preset`] and [`Context::new`].
    pub fn from_preset(preset: Preset) -> Result<Self> {
        Self::new(Parameters::from_preset(preset)?, DeviceSelection::Cpu)
    }

    /// The parameters.
    pub fn params(&self) -> &Parameters {
        &self.inner.params
    }

    /// The device objects are created on.
    pub fn device(&self) -> Device {
        self.inner.device
    }

    /// The backend of the context's device.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.inner.backend
    }

    /// The CPU backend (host objects).
    pub fn host_backend(&self) -> &Arc<dyn Backend> {
        &self.inner.cpu
    }

    /// The backend for `device`.
    ///
    /// # Errors
    /// [`OperandError::DeviceNotInContext`] for a device this context was not
    /// created for.
    pub fn backend_for(&self, device: Device) -> Result<&Arc<dyn Backend>> {
        match device {
            Device::Cpu => Ok(&self.inner.cpu),
            d if d == self.inner.device => Ok(&self.inner.backend),
            _ => Err(OperandError::DeviceNotInContext {
                device,
                context: self.inner.device,
            }
            .into()),
        }
    }

    /// Waits until every operation queued on the context's device has
    /// completed: for timing, or before reading the memory statistics. A
    /// no-op on the CPU, whose operations complete before they return;
    /// results never need it (downloads and decryption synchronise
    /// themselves).
    ///
    /// # Errors
    /// A failure reported by the device.
    pub fn synchronize(&self) -> Result<()> {
        self.inner.backend.synchronize()
    }

    /// Memory statistics of the context's device.
    pub fn memory_statistics(&self) -> Statistics {
        self.inner.backend.allocator().statistics()
    }

    /// Whether two handles refer to the same context.
    pub fn ptr_eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Checks that `other` is this context.
    ///
    /// # Errors
    /// [`OperandError::ContextMismatch`].
    pub fn check_same(&self, other: &Self) -> Result<()> {
        if self.ptr_eq(other) {
            Ok(())
        } else {
            Err(OperandError::ContextMismatch.into())
        }
    }

    /// Float CRT tables for `level`.
    pub(crate) fn crt(&self, level: Level) -> Result<&CrtToFloat> {
        self.inner.crt.get(level.0).ok_or_else(|| {
            OperandError::LevelOutOfRange {
                level,
                max: self.inner.params.max_level(),
            }
            .into()
        })
    }

    /// Checks a slot count: a power of two no larger than N/2.
    ///
    /// # Errors
    /// [`OperandError::InvalidSlots`].
    pub(crate) fn check_slots(&self, slots: usize) -> Result<()> {
        let max = self.inner.params.degree().get() / 2;
        if slots == 0 || !slots.is_power_of_two() || slots > max {
            return Err(OperandError::InvalidSlots { slots, max }.into());
        }
        Ok(())
    }

    /// The special FFT for `slots` slots (cached).
    pub(crate) fn fft(&self, slots: usize) -> Result<Arc<SpecialFft>> {
        self.check_slots(slots)?;
        if let Some(f) = self
            .inner
            .ffts
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&slots)
        {
            return Ok(Arc::clone(f));
        }
        let fft = Arc::new(SpecialFft::new(slots));
        self.inner
            .ffts
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(slots, Arc::clone(&fft));
        Ok(fft)
    }
}

/// Opens GPU `ordinal`, mapping "no driver / no device" to [`Error::NoGpu`].
fn open_gpu(ordinal: usize) -> Result<GpuDevice> {
    GpuDevice::open(ordinal).map_err(|e| match e {
        hemem_memory::Error::Device(DeviceError::NoGpu { reason }) => Error::NoGpu { reason },
        other => other.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::SecurityCheck;

    fn params() -> Parameters {
        Parameters::from_preset_with(Preset::TestFTb, SecurityCheck::AllowInsecure)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn misuse_is_not_reported_as_a_missing_gpu() {
        // Whether or not this machine has a GPU: these are the caller's
        // mistakes, not the hardware's.
        for ordinal in [0, 3] {
            assert_eq!(
                Context::with_allocator(params(), DeviceSelection::Gpu(ordinal), Allocator::host())
                    .map(|_| ()),
                Err(Error::HostAllocatorOnGpu { ordinal })
            );
        }
        let cpu = Context::new(params(), DeviceSelection::Cpu).unwrap_or_else(|e| panic!("{e}"));
        assert!(cpu.backend_for(Device::Cpu).is_ok());
        assert_eq!(cpu.synchronize(), Ok(()));
        for ordinal in [0, 7] {
            assert_eq!(
                cpu.backend_for(Device::Gpu(ordinal)).map(|_| ()),
                Err(OperandError::DeviceNotInContext {
                    device: Device::Gpu(ordinal),
                    context: Device::Cpu,
                }
                .into())
            );
        }
    }
}
