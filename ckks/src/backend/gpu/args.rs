//! Launch arguments from the [`Backend`](crate::backend::Backend) trait's views: device addresses,
//! limb maps and scalars, each checked (positions against the buffer,
//! modulus indices against the constant tables) before any kernel sees it,
//! and the scratch buffers launches write to.

use hemem_gpu_kernels::launch::ckks::prf::Seed;
use hemem_gpu_kernels::launch::ckks::{LimbMap, PtrArray, Scalars};
use hemem_memory::{Buffer, MemoryClass, StreamId};

use super::GpuBackend;
use crate::backend::{Limbs, LimbsMut, check_moduli};
use crate::sampling::UniformSeed;
use crate::{Error, Result};

impl GpuBackend {
    /// A temporary buffer of `limbs` limbs on the compute stream; sensitive
    /// (zeroed before reuse) when it is computed from sensitive inputs.
    pub(super) fn scratch(&self, limbs: usize, sensitive: bool) -> Result<Buffer> {
        Ok(self.allocator.allocate_on(
            MemoryClass::Temporary,
            limbs.max(1) * self.degree * 8,
            sensitive,
            StreamId::Compute,
        )?)
    }

    /// The kernels' limb map of `positions` under `moduli` (global
    /// indices), each index checked against the table: every launch argument
    /// that names moduli is built here, so no kernel indexes the constant or
    /// twiddle tables past their end. The positions are the caller's to
    /// check (a view's `check`, or scratch of known size).
    pub(super) fn limb_map(&self, positions: &[usize], moduli: &[usize]) -> Result<LimbMap> {
        check_moduli(moduli, self.moduli.len())?;
        Ok(LimbMap::new(positions, moduli)?)
    }

    /// Address and limb map of a read-only view, checked (positions against
    /// the buffer, modulus indices against the table).
    pub(super) fn read_view(&self, view: &Limbs<'_>) -> Result<(u64, LimbMap)> {
        view.check(self.degree)?;
        Ok((
            address(view.buffer)?,
            self.limb_map(view.positions, view.moduli)?,
        ))
    }

    /// The device addresses of read-only views (each checked), as a kernel
    /// parameter array.
    pub(super) fn addresses(&self, views: &[Limbs<'_>]) -> Result<PtrArray> {
        let list = views
            .iter()
            .map(|v| {
                self.read_view(v)?;
                address(v.buffer)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(PtrArray::new(&list)?)
    }

    /// Address and limb map of a mutable view, checked (positions against
    /// the buffer, modulus indices against the table).
    pub(super) fn write_view(&self, view: &LimbsMut<'_>) -> Result<(u64, LimbMap)> {
        view.check(self.degree)?;
        Ok((
            address(view.buffer)?,
            self.limb_map(view.positions, view.moduli)?,
        ))
    }

    pub(super) fn scalars(&self, moduli: &[usize], values: &[u64]) -> Result<Scalars> {
        let pairs = moduli
            .iter()
            .zip(values)
            .map(|(&i, &v)| {
                let s = self.modulus(i)?.shoup(v);
                Ok((s.value(), s.quotient()))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Scalars::new(&pairs)?)
    }

    /// Checks that every modulus index is in the table (the kernels index
    /// the constants by it).
    pub(super) fn known_moduli(&self, moduli: &[usize]) -> Result<()> {
        check_moduli(moduli, self.moduli.len())
    }
}

/// The device address of a buffer on the compute stream (16-byte aligned,
/// as the kernels' vector accesses need; the driver aligns to 256).
pub(super) fn address(buffer: &Buffer) -> Result<u64> {
    match (buffer.device_ptr(), buffer.stream()) {
        (Some(ptr), Some(StreamId::Compute)) if ptr.addr() % 16 == 0 => Ok(ptr.addr()),
        (Some(ptr), Some(StreamId::Compute)) => Err(hemem_gpu_kernels::Error::LaunchShape {
            kernel: "gpu backend",
            what: "buffer alignment",
            expected: 16,
            found: (ptr.addr() % 16) as usize,
        }
        .into()),
        (Some(_), Some(stream)) => Err(hemem_gpu_kernels::Error::WrongStream {
            kernel: "gpu backend",
            expected: StreamId::Compute,
            found: stream,
        }
        .into()),
        _ => Err(hemem_memory::Error::WrongPlacement {
            placement: buffer.placement(),
            wanted: "device",
        }
        .into()),
    }
}

/// The kernel parameter of a key's seed: its words and the double rounds
/// of its [`SeedPrf`](crate::sampling::SeedPrf).
pub(super) fn launch_seed(seed: &UniformSeed) -> Seed {
    Seed::new(&seed.bytes, seed.prf.double_rounds())
}

/// The first `count` entries of a stack list (indices, addresses, Galois
/// elements of a launch's parts).
pub(super) fn first<T>(list: &[T], count: usize) -> Result<&[T]> {
    list.get(..count).ok_or(Error::EmptyBasis)
}

pub(super) fn same_length(a: usize, b: usize) -> Result<()> {
    if a == b {
        Ok(())
    } else {
        Err(Error::LengthMismatch {
            expected: a,
            actual: b,
        })
    }
}
