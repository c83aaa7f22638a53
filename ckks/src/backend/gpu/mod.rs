//! The GPU backend: the [`Backend`] trait on hemem's PTX kernels, with every
//! buffer from the GPU memory system (policies, budget, residency).
//!
//! Work is queued on the device's compute stream in call order; the only
//! synchronisation is [`Backend::read`] (a download). Before each launch the
//! buffers it touches are declared to the allocator, which makes managed
//! buffers resident (or lets them fault, under the `managed` policy) and
//! keeps them from eviction until the launch is queued.
//!
//! Outputs are bit-identical to the CPU backend: the kernels reduce fully,
//! use the CPU plans' ψ, and repeat the CPU's floating-point sequence in
//! ModDown.

#[cfg(test)]
mod emulate;
mod tables;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};

use hemem_gpu_kernels::Kernels;
use hemem_gpu_kernels::launch::ckks::convert::CopyRows;
use hemem_gpu_kernels::launch::ckks::ntt::{ForwardEpilogue, ForwardSource};
use hemem_gpu_kernels::launch::ckks::{self as launch, ElementOp, LimbMap, PtrArray, Scalars};
use hemem_memory::{Allocator, Buffer, GpuDevice, MemoryClass, StreamId};

use self::tables::{
    DeviceConversion, conversion, modulus_table, scale_pairs, twiddle_tables, upload_constant,
};
use super::{
    Backend, BinaryOp, Device, Limbs, LimbsMut, contiguous, inner_product_by_parts, tensor_by_parts,
};
use crate::ntt::{GaloisElement, NttPlan};
use crate::zq::Modulus;
use crate::{Error, Result};

/// Two lists of moduli as one cache key (`first`, a separator, `second`),
/// built on the stack so a cache hit allocates nothing.
struct PairKey {
    words: [usize; 2 * launch::MAX_LIMBS + 1],
    len: usize,
}

impl PairKey {
    fn new(first: &[usize], second: &[usize]) -> Result<Self> {
        let len = first.len() + second.len() + 1;
        let mut words = [0usize; 2 * launch::MAX_LIMBS + 1];
        let slots = words.get_mut(..len).ok_or(Error::LengthMismatch {
            expected: 2 * launch::MAX_LIMBS + 1,
            actual: len,
        })?;
        for (slot, &m) in slots
            .iter_mut()
            .zip(first.iter().chain(&[usize::MAX]).chain(second))
        {
            *slot = m;
        }
        Ok(Self { words, len })
    }

    fn as_slice(&self) -> &[usize] {
        self.words.get(..self.len).unwrap_or(&[])
    }
}

/// The GPU implementation of [`Backend`]. `Send + Sync`: every operation
/// queues on the device's compute stream, in call order; callers from
/// several threads are serialised by the stream, not by the backend.
pub struct GpuBackend {
    device: GpuDevice,
    kernels: Kernels,
    allocator: Allocator,
    degree: usize,
    geometry: launch::ntt::NttGeometry,
    moduli: Vec<Modulus>,
    consts: Buffer,
    twiddles: Buffer,
    n_inv: Buffer,
    /// Base conversions by `PairKey(from, to)`.
    conversions: RwLock<HashMap<Vec<usize>, Arc<DeviceConversion>>>,
    /// Rescaling's `(q_last^{-1} mod q_i, shoup)` pairs by `PairKey(kept, [last])`.
    rescale_scales: RwLock<HashMap<Vec<usize>, Arc<Buffer>>>,
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

fn op_code(op: BinaryOp) -> ElementOp {
    match op {
        BinaryOp::Add => ElementOp::Add,
        BinaryOp::Sub => ElementOp::Sub,
        BinaryOp::Mul => ElementOp::Mul,
    }
}

impl GpuBackend {
    /// A backend on `device` allocating through `allocator` (a GPU
    /// allocator for that device), for the moduli and NTT plans of a
    /// context: uploads the modulus and twiddle tables and loads the
    /// kernels.
    ///
    /// # Errors
    /// Kernel loading (an old driver), allocation and transfer errors.
    pub fn new(device: GpuDevice, allocator: Allocator, plans: &[NttPlan]) -> Result<Self> {
        let degree = plans
            .first()
            .map(NttPlan::degree)
            .ok_or(Error::EmptyBasis)?;
        let geometry = launch::ntt::NttGeometry::new(degree.trailing_zeros())?;
        let moduli: Vec<Modulus> = plans.iter().map(|p| *p.modulus()).collect();
        let kernels = Kernels::load(&device)?;
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
            moduli,
            consts,
            twiddles,
            n_inv,
            conversions: RwLock::new(HashMap::new()),
            rescale_scales: RwLock::new(HashMap::new()),
        })
    }

    /// The GPU.
    pub fn gpu(&self) -> &GpuDevice {
        &self.device
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
                actual: index + 1,
            })
    }

    fn conversion(&self, from: &[usize], to: &[usize]) -> Result<Arc<DeviceConversion>> {
        let key = PairKey::new(from, to)?;
        if let Some(t) = self
            .conversions
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key.as_slice())
        {
            return Ok(Arc::clone(t));
        }
        let from_m = from
            .iter()
            .map(|&i| self.modulus(i))
            .collect::<Result<Vec<_>>>()?;
        let to_m = to
            .iter()
            .map(|&i| self.modulus(i))
            .collect::<Result<Vec<_>>>()?;
        let tables = Arc::new(conversion(&self.allocator, &from_m, &to_m)?);
        self.conversions
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.as_slice().to_vec(), Arc::clone(&tables));
        Ok(tables)
    }

    /// The device table of `(q_last^{-1} mod q_i, shoup)` for each kept
    /// modulus, built once per `(kept, last)`.
    fn rescale_scale(&self, kept: &[usize], last: usize) -> Result<Arc<Buffer>> {
        let key = PairKey::new(kept, &[last])?;
        if let Some(t) = self
            .rescale_scales
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key.as_slice())
        {
            return Ok(Arc::clone(t));
        }
        let q_last = self.modulus(last)?;
        let moduli = kept
            .iter()
            .map(|&i| self.modulus(i))
            .collect::<Result<Vec<_>>>()?;
        let inverses = moduli
            .iter()
            .map(|m| {
                m.inv(q_last.value()).ok_or(Error::NotCoprime {
                    first: m.value(),
                    second: q_last.value(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let table = Arc::new(upload_constant(
            &self.allocator,
            &scale_pairs(&moduli, &inverses),
        )?);
        self.rescale_scales
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.as_slice().to_vec(), Arc::clone(&table));
        Ok(table)
    }

    /// A temporary buffer of `limbs` limbs on the compute stream.
    fn scratch(&self, limbs: usize) -> Result<Buffer> {
        Ok(self
            .allocator
            .allocate(MemoryClass::Temporary, limbs.max(1) * self.degree * 8)?)
    }

    /// Address and limb map of a read-only view, checked.
    fn read_view(&self, view: &Limbs<'_>) -> Result<(u64, LimbMap)> {
        view.check(self.degree)?;
        Ok((
            address(view.buffer)?,
            LimbMap::new(view.positions, view.moduli)?,
        ))
    }

    /// Address and limb map of a mutable view, checked.
    fn write_view(&self, view: &LimbsMut<'_>) -> Result<(u64, LimbMap)> {
        view.check(self.degree)?;
        Ok((
            address(view.buffer)?,
            LimbMap::new(view.positions, view.moduli)?,
        ))
    }

    fn scalars(&self, moduli: &[usize], values: &[u64]) -> Result<Scalars> {
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

    /// Forward NTT of `source` into `dst`'s limbs, with the given last-phase
    /// epilogue.
    fn ntt_forward_raw(
        &self,
        dst: (u64, &LimbMap),
        source: ForwardSource<'_>,
        epilogue: ForwardEpilogue<'_>,
    ) -> Result<()> {
        // SAFETY: both addresses hold their maps' limbs (checked by the
        // callers' views or fresh scratch), allocated on the compute stream
        // where every launch of this backend runs; the source limbs are the
        // destination's own or lie in another buffer; the tables cover every
        // modulus index (they are built for the whole global table).
        unsafe {
            launch::ntt::forward_async(
                &self.kernels,
                StreamId::Compute,
                dst,
                source,
                self.consts()?,
                address(&self.twiddles)?,
                self.geometry,
                epilogue,
            )
        }?;
        Ok(())
    }

    /// Inverse NTT of `src`'s limbs into `dst`'s (the same for in place).
    fn ntt_inverse_raw(&self, dst: (u64, &LimbMap), src: (u64, &LimbMap)) -> Result<()> {
        // SAFETY: as `ntt_forward_raw`.
        unsafe {
            launch::ntt::inverse_async(
                &self.kernels,
                StreamId::Compute,
                dst,
                src,
                self.consts()?,
                address(&self.twiddles)?,
                address(&self.n_inv)?,
                self.geometry,
            )
        }?;
        Ok(())
    }

    fn ntt(&self, buffer: u64, map: &LimbMap, forward: bool) -> Result<()> {
        if forward {
            self.ntt_forward_raw(
                (buffer, map),
                ForwardSource::Limbs { src: buffer, map },
                ForwardEpilogue::Store,
            )
        } else {
            self.ntt_inverse_raw((buffer, map), (buffer, map))
        }
    }

    /// The fused inner product, over the digits after `galois` (1: none).
    fn inner_product(
        &self,
        digits: &[Limbs<'_>],
        galois: u64,
        b: &[Limbs<'_>],
        a: &[Limbs<'_>],
        out0: LimbsMut<'_>,
        out1: LimbsMut<'_>,
    ) -> Result<()> {
        let count = digits.len();
        if count == 0 || count != b.len() || count != a.len() || count > launch::MAX_DIGITS {
            return Err(Error::LengthMismatch {
                expected: count,
                actual: b.len().min(a.len()),
            });
        }
        let (first, key) = (
            digits.first().ok_or(Error::EmptyBasis)?,
            b.first().ok_or(Error::EmptyBasis)?,
        );
        let uniform = |views: &[Limbs<'_>], like: &Limbs<'_>| {
            views
                .iter()
                .all(|v| v.positions == like.positions && v.moduli == like.moduli)
        };
        if !uniform(digits, first)
            || !uniform(b, key)
            || !uniform(a, key)
            || out0.positions != out1.positions
        {
            return if galois == 1 {
                inner_product_by_parts(self, digits, b, a, out0, out1)
            } else {
                // The trait's default: rotate into temporaries, then the sum.
                let rotated = digits
                    .iter()
                    .map(|d| {
                        let mut buffer = self.allocate(MemoryClass::Temporary, d.len(), false)?;
                        self.automorphism(
                            *d,
                            GaloisElement(galois),
                            LimbsMut::new(&mut buffer, d.moduli)?,
                        )?;
                        Ok(buffer)
                    })
                    .collect::<Result<Vec<_>>>()?;
                let views = rotated
                    .iter()
                    .zip(digits)
                    .map(|(buffer, d)| Limbs::new(buffer, d.moduli))
                    .collect::<Result<Vec<_>>>()?;
                inner_product_by_parts(self, &views, b, a, out0, out1)
            };
        }
        let addresses = |views: &[Limbs<'_>]| -> Result<PtrArray> {
            let list = views
                .iter()
                .map(|v| {
                    self.read_view(v)?;
                    address(v.buffer)
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(PtrArray::new(&list)?)
        };
        let (pd, pb, pa) = (addresses(digits)?, addresses(b)?, addresses(a)?);
        let digit_map = LimbMap::new(first.positions, first.moduli)?;
        let key_map = LimbMap::new(key.positions, key.moduli)?;
        let (o0, mo) = self.write_view(&out0)?;
        let (o1, _) = self.write_view(&out1)?;
        let mut touched: Vec<&Buffer> = digits.iter().chain(b).chain(a).map(|v| v.buffer).collect();
        touched.push(&*out0.buffer);
        touched.push(&*out1.buffer);
        let _guard = self.allocator.prepare(&touched)?;
        // SAFETY: every address holds its map's limbs (checked above) on the
        // compute stream; the outputs are distinct buffers from the inputs; the
        // Galois element is odd (a `GaloisElement`), so the gather stays in
        // the limb.
        unsafe {
            launch::arith::key_switch_inner_product_async(
                &self.kernels,
                StreamId::Compute,
                (o0, o1, &mo),
                (&pd, &digit_map),
                (&pb, &pa, &key_map),
                count as u32,
                self.consts()?,
                self.n(),
                galois,
            )
        }?;
        Ok(())
    }

    /// ModDown, and with `addend` the addition after it, in the epilogue.
    fn mod_down_then_add(
        &self,
        x: Limbs<'_>,
        p_count: usize,
        addend: Option<Limbs<'_>>,
        out: LimbsMut<'_>,
    ) -> Result<()> {
        let q_count =
            x.len()
                .checked_sub(p_count)
                .filter(|_| p_count > 0)
                .ok_or(Error::LengthMismatch {
                    expected: p_count + 1,
                    actual: x.len(),
                })?;
        let (q_moduli, p_moduli) = x.moduli.split_at(q_count);
        let (q_positions, p_positions) = x.positions.split_at(q_count);
        if q_moduli != out.moduli {
            return Err(Error::LengthMismatch {
                expected: q_count,
                actual: out.len(),
            });
        }
        let (xa, _) = self.read_view(&x)?;
        let (xo, mo) = self.write_view(&out)?;
        let add = match &addend {
            Some(e) if e.moduli == out.moduli => Some(self.read_view(e)?),
            Some(e) => {
                return Err(Error::LengthMismatch {
                    expected: out.len(),
                    actual: e.len(),
                });
            }
            None => None,
        };
        let tables = self.conversion(p_moduli, q_moduli)?;
        let p_part = self.scratch(p_count)?;
        let _guard = self.allocator.prepare(&[
            x.buffer,
            out.buffer,
            &p_part,
            &tables.table,
            &tables.scale,
            addend.as_ref().map_or(x.buffer, |e| e.buffer),
        ])?;
        let p_addr = address(&p_part)?;
        let p_map = LimbMap::new(contiguous(0, p_count)?, p_moduli)?;
        // The P limbs to coefficients, out of place (no copy).
        self.ntt_inverse_raw(
            (p_addr, &p_map),
            (xa, &LimbMap::new(p_positions, p_moduli)?),
        )?;
        // out = (x_i − NTT(convert(p_part))) · P^{-1} (+ addend): the
        // conversion is computed as the transform loads its points, the
        // subtraction, scaling and addition as it stores them.
        self.ntt_forward_raw(
            (xo, &mo),
            ForwardSource::Convert {
                input: p_addr,
                map: &p_map,
                table: address(&tables.table)?,
                exact: true,
            },
            ForwardEpilogue::SubScale {
                aux: xa,
                aux_map: &LimbMap::new(q_positions, q_moduli)?,
                scale: address(&tables.scale)?,
                add: add.as_ref().map(|(a, m)| (*a, m)),
            },
        )
    }

    fn copy_raw(&self, dst: (u64, &LimbMap), src: (u64, &LimbMap)) -> Result<()> {
        // SAFETY: both addresses hold their maps' limbs on the compute stream;
        // callers pass distinct buffers or disjoint limbs.
        unsafe { launch::arith::copy_async(&self.kernels, StreamId::Compute, dst, src, self.n()) }?;
        Ok(())
    }
}

/// The device address of a buffer on the compute stream (16-byte aligned,
/// as the kernels' vector accesses need; the driver aligns to 256).
fn address(buffer: &Buffer) -> Result<u64> {
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

/// The first `count` entries of a stack list.
fn first(list: &[usize], count: usize) -> Result<&[usize]> {
    list.get(..count).ok_or(Error::EmptyBasis)
}

fn same_length(a: usize, b: usize) -> Result<()> {
    if a == b {
        Ok(())
    } else {
        Err(Error::LengthMismatch {
            expected: a,
            actual: b,
        })
    }
}

impl Backend for GpuBackend {
    fn device(&self) -> Device {
        Device::Gpu(self.device.ordinal())
    }

    fn degree(&self) -> usize {
        self.degree
    }

    fn moduli(&self) -> &[Modulus] {
        &self.moduli
    }

    fn allocator(&self) -> &Allocator {
        &self.allocator
    }

    fn synchronize(&self) -> Result<()> {
        self.device.synchronize(StreamId::Compute)?;
        Ok(())
    }

    fn write(&self, dst: LimbsMut<'_>, src: &[u64]) -> Result<()> {
        let n = self.degree;
        dst.check(n)?;
        same_length(dst.len() * n, src.len())?;
        for (&p, chunk) in dst.positions.iter().zip(src.chunks_exact(n)) {
            self.allocator.upload(dst.buffer, p * n, chunk)?;
        }
        Ok(())
    }

    fn read(&self, src: Limbs<'_>, dst: &mut [u64]) -> Result<()> {
        let n = self.degree;
        src.check(n)?;
        same_length(src.len() * n, dst.len())?;
        let _guard = self.allocator.prepare(&[src.buffer])?;
        for (&p, chunk) in src.positions.iter().zip(dst.chunks_exact_mut(n)) {
            self.allocator.download(src.buffer, p * n, chunk)?;
        }
        Ok(())
    }

    fn copy(&self, src: Limbs<'_>, dst: LimbsMut<'_>) -> Result<()> {
        same_length(src.len(), dst.len())?;
        let s = self.read_view(&src)?;
        let d = self.write_view(&dst)?;
        let _guard = self.allocator.prepare(&[src.buffer, dst.buffer])?;
        self.copy_raw((d.0, &d.1), (s.0, &s.1))
    }

    fn ntt_forward(&self, x: LimbsMut<'_>) -> Result<()> {
        let (addr, map) = self.write_view(&x)?;
        let _guard = self.allocator.prepare(&[x.buffer])?;
        self.ntt(addr, &map, true)
    }

    fn ntt_inverse(&self, x: LimbsMut<'_>) -> Result<()> {
        let (addr, map) = self.write_view(&x)?;
        let _guard = self.allocator.prepare(&[x.buffer])?;
        self.ntt(addr, &map, false)
    }

    fn binary(&self, op: BinaryOp, a: Limbs<'_>, b: Limbs<'_>, out: LimbsMut<'_>) -> Result<()> {
        same_length(a.len(), b.len())?;
        same_length(a.len(), out.len())?;
        let (xa, ma) = self.read_view(&a)?;
        let (xb, mb) = self.read_view(&b)?;
        let (xo, mo) = self.write_view(&out)?;
        let _guard = self.allocator.prepare(&[a.buffer, b.buffer, out.buffer])?;
        // SAFETY: the views were checked against their buffers, which live on
        // the compute stream; `out` may alias `a` or `b` limb for limb, which
        // the element-wise kernel allows.
        unsafe {
            launch::arith::binary_async(
                &self.kernels,
                StreamId::Compute,
                op_code(op),
                (xo, &mo),
                (xa, &ma),
                (xb, &mb),
                self.consts()?,
                self.n(),
            )
        }?;
        Ok(())
    }

    fn binary_assign(&self, op: BinaryOp, acc: LimbsMut<'_>, b: Limbs<'_>) -> Result<()> {
        same_length(acc.len(), b.len())?;
        let (xb, mb) = self.read_view(&b)?;
        let (xo, mo) = self.write_view(&acc)?;
        let _guard = self.allocator.prepare(&[acc.buffer, b.buffer])?;
        // SAFETY: as `binary`, with `acc` as both output and first operand.
        unsafe {
            launch::arith::binary_async(
                &self.kernels,
                StreamId::Compute,
                op_code(op),
                (xo, &mo),
                (xo, &mo),
                (xb, &mb),
                self.consts()?,
                self.n(),
            )
        }?;
        Ok(())
    }

    fn mul_add_assign(&self, acc: LimbsMut<'_>, a: Limbs<'_>, b: Limbs<'_>) -> Result<()> {
        same_length(acc.len(), a.len())?;
        same_length(acc.len(), b.len())?;
        let (xa, ma) = self.read_view(&a)?;
        let (xb, mb) = self.read_view(&b)?;
        let (xo, mo) = self.write_view(&acc)?;
        let _guard = self.allocator.prepare(&[acc.buffer, a.buffer, b.buffer])?;
        // SAFETY: as `binary`.
        unsafe {
            launch::arith::mul_add_async(
                &self.kernels,
                StreamId::Compute,
                (xo, &mo),
                (xa, &ma),
                (xb, &mb),
                self.consts()?,
                self.n(),
            )
        }?;
        Ok(())
    }

    fn negate(&self, x: LimbsMut<'_>) -> Result<()> {
        let (xo, mo) = self.write_view(&x)?;
        let _guard = self.allocator.prepare(&[x.buffer])?;
        // SAFETY: as `binary`.
        unsafe {
            launch::arith::negate_async(
                &self.kernels,
                StreamId::Compute,
                (xo, &mo),
                self.consts()?,
                self.n(),
            )
        }?;
        Ok(())
    }

    fn scalar_assign(&self, op: BinaryOp, x: LimbsMut<'_>, scalars: &[u64]) -> Result<()> {
        same_length(x.len(), scalars.len())?;
        let (xo, mo) = self.write_view(&x)?;
        let s = self.scalars(x.moduli, scalars)?;
        let _guard = self.allocator.prepare(&[x.buffer])?;
        // SAFETY: as `binary`; the scalars are reduced by `shoup`.
        unsafe {
            launch::arith::scalar_async(
                &self.kernels,
                StreamId::Compute,
                op_code(op),
                (xo, &mo),
                &s,
                self.consts()?,
                self.n(),
            )
        }?;
        Ok(())
    }

    fn rescale(&self, x: Limbs<'_>, out: LimbsMut<'_>) -> Result<()> {
        let (&last, kept) = x.moduli.split_last().ok_or(Error::LengthMismatch {
            expected: 1,
            actual: 0,
        })?;
        let &last_position = x.positions.last().ok_or(Error::EmptyBasis)?;
        if kept != out.moduli {
            return Err(Error::LengthMismatch {
                expected: kept.len(),
                actual: out.len(),
            });
        }
        let (xa, _) = self.read_view(&x)?;
        let (xo, mo) = self.write_view(&out)?;
        let kept_map = LimbMap::new(
            x.positions.get(..kept.len()).ok_or(Error::EmptyBasis)?,
            kept,
        )?;
        let scale = self.rescale_scale(kept, last)?;
        let top = self.scratch(1)?;
        let _guard = self
            .allocator
            .prepare(&[x.buffer, out.buffer, &top, &scale])?;
        let top_addr = address(&top)?;
        let top_map = LimbMap::new(&[0], &[last])?;
        // The last limb to coefficients, out of place (no copy).
        self.ntt_inverse_raw(
            (top_addr, &top_map),
            (xa, &LimbMap::new(&[last_position], &[last])?),
        )?;
        // SAFETY: `top` holds one limb, `out` the kept limbs (checked view),
        // distinct buffers on the compute stream; the source modulus index is
        // valid.
        unsafe {
            launch::convert::spread_centered_async(
                &self.kernels,
                StreamId::Compute,
                (xo, &mo),
                top_addr,
                last as u32,
                self.consts()?,
                self.n(),
            )
        }?;
        // out = (x_i − NTT(spread)) · q_last^{-1}, fused into the transform.
        self.ntt_forward_raw(
            (xo, &mo),
            ForwardSource::Limbs { src: xo, map: &mo },
            ForwardEpilogue::SubScale {
                aux: xa,
                aux_map: &kept_map,
                scale: address(&scale)?,
                add: None,
            },
        )
    }

    fn mod_down(&self, x: Limbs<'_>, p_count: usize, out: LimbsMut<'_>) -> Result<()> {
        self.mod_down_then_add(x, p_count, None, out)
    }

    fn mod_down_add(
        &self,
        x: Limbs<'_>,
        p_count: usize,
        addend: Limbs<'_>,
        out: LimbsMut<'_>,
    ) -> Result<()> {
        self.mod_down_then_add(x, p_count, Some(addend), out)
    }

    fn mod_up(
        &self,
        digit: Limbs<'_>,
        digit_ntt: Option<Limbs<'_>>,
        out: LimbsMut<'_>,
    ) -> Result<()> {
        if let Some(d) = &digit_ntt
            && d.moduli != digit.moduli
        {
            return Err(Error::LengthMismatch {
                expected: digit.len(),
                actual: d.len(),
            });
        }
        let (da, dm) = self.read_view(&digit)?;
        let (xo, out_map) = self.write_view(&out)?;
        if let Some(d) = &digit_ntt {
            self.read_view(d)?;
        }
        // Split the output limbs into the digit's own (copied) and the
        // targets (converted), on the stack.
        let mut own_pos = [0usize; launch::MAX_LIMBS];
        let mut own_src = [0usize; launch::MAX_LIMBS];
        let mut own_mod = [0usize; launch::MAX_LIMBS];
        let mut target_pos = [0usize; launch::MAX_LIMBS];
        let mut target_mod = [0usize; launch::MAX_LIMBS];
        let (mut owns, mut targets) = (0usize, 0usize);
        let source_positions = digit_ntt.as_ref().map_or(digit.positions, |d| d.positions);
        for (&p, &m) in out.positions.iter().zip(out.moduli) {
            match digit.moduli.iter().position(|&d| d == m) {
                Some(k) => {
                    let (Some(a), Some(b), Some(c)) = (
                        own_pos.get_mut(owns),
                        own_src.get_mut(owns),
                        own_mod.get_mut(owns),
                    ) else {
                        return Err(Error::EmptyBasis);
                    };
                    *a = p;
                    *b = source_positions.get(k).copied().ok_or(Error::EmptyBasis)?;
                    *c = m;
                    owns += 1;
                }
                None => {
                    let (Some(a), Some(b)) =
                        (target_pos.get_mut(targets), target_mod.get_mut(targets))
                    else {
                        return Err(Error::EmptyBasis);
                    };
                    *a = p;
                    *b = m;
                    targets += 1;
                }
            }
        }
        let own_mod = first(&own_mod, owns)?;
        let target_mod = first(&target_mod, targets)?;
        let own_map = LimbMap::new(first(&own_pos, owns)?, own_mod)?;
        let own_src_map = LimbMap::new(first(&own_src, owns)?, own_mod)?;
        let target_map = LimbMap::new(first(&target_pos, targets)?, target_mod)?;
        let source = match &digit_ntt {
            Some(d) => address(d.buffer)?,
            None => da,
        };
        let copies = (owns > 0).then_some(CopyRows {
            src: source,
            src_map: &own_src_map,
            dst_map: &own_map,
        });
        let tables = if targets == 0 {
            None
        } else {
            Some(self.conversion(digit.moduli, target_mod)?)
        };
        let mut touched: [&Buffer; 4] = [digit.buffer, &*out.buffer, digit.buffer, digit.buffer];
        if let Some(d) = &digit_ntt {
            touched[2] = d.buffer;
        }
        if let Some(t) = &tables {
            touched[3] = &t.table;
        }
        let _guard = self.allocator.prepare(&touched)?;
        match (&tables, digit_ntt.is_some()) {
            // The digit's NTT form is given (decompose): copy the own limbs,
            // and transform the targets with the conversion fused into the
            // transform's first phase.
            (Some(t), true) => {
                if owns > 0 {
                    self.copy_raw((xo, &own_map), (source, &own_src_map))?;
                }
                self.ntt_forward_raw(
                    (xo, &target_map),
                    ForwardSource::Convert {
                        input: da,
                        map: &dm,
                        table: address(&t.table)?,
                        // Centred and exact, as on the CPU (see its `mod_up`).
                        exact: true,
                    },
                    ForwardEpilogue::Store,
                )
            }
            // Coefficients only: convert the targets and copy the own limbs
            // in one launch, then transform every output limb at once.
            (Some(t), false) => {
                // SAFETY: the digit's limbs and the targets are distinct
                // buffers (or, for `out`, limbs disjoint from the digit's own,
                // which the conversion does not read); the copied limbs are
                // `out`'s own limbs, disjoint from the targets; the table
                // matches these moduli.
                unsafe {
                    launch::convert::base_convert_async(
                        &self.kernels,
                        StreamId::Compute,
                        (xo, &target_map),
                        (da, &dm),
                        address(&t.table)?,
                        self.consts()?,
                        self.n(),
                        // Centred and exact, as on the CPU.
                        true,
                        copies,
                    )
                }?;
                self.ntt(xo, &out_map, true)
            }
            (None, _) if owns == 0 => Ok(()),
            (None, true) => self.copy_raw((xo, &own_map), (source, &own_src_map)),
            (None, false) => {
                self.copy_raw((xo, &own_map), (source, &own_src_map))?;
                self.ntt(xo, &own_map, true)
            }
        }
    }

    fn spread_centered(&self, src: Limbs<'_>, out: LimbsMut<'_>) -> Result<()> {
        same_length(1, src.len())?;
        let (sa, _) = self.read_view(&src)?;
        let (&position, &modulus) = src
            .positions
            .first()
            .zip(src.moduli.first())
            .ok_or(Error::EmptyBasis)?;
        let (xo, mo) = self.write_view(&out)?;
        let _guard = self.allocator.prepare(&[src.buffer, out.buffer])?;
        let source = sa + (position * self.degree * 8) as u64;
        // SAFETY: `source` addresses limb `position` of a checked view; `out`
        // is a distinct buffer.
        unsafe {
            launch::convert::spread_centered_async(
                &self.kernels,
                StreamId::Compute,
                (xo, &mo),
                source,
                modulus as u32,
                self.consts()?,
                self.n(),
            )
        }?;
        Ok(())
    }

    fn automorphism(&self, x: Limbs<'_>, g: GaloisElement, out: LimbsMut<'_>) -> Result<()> {
        same_length(x.len(), out.len())?;
        let (xa, ma) = self.read_view(&x)?;
        let (xo, mo) = self.write_view(&out)?;
        let _guard = self.allocator.prepare(&[x.buffer, out.buffer])?;
        // SAFETY: as `copy`: distinct buffers on the compute stream.
        unsafe {
            launch::arith::automorphism_async(
                &self.kernels,
                StreamId::Compute,
                (xo, &mo),
                (xa, &ma),
                g.0,
                self.degree.trailing_zeros(),
            )
        }?;
        Ok(())
    }

    fn key_switch_inner_product(
        &self,
        digits: &[Limbs<'_>],
        b: &[Limbs<'_>],
        a: &[Limbs<'_>],
        out0: LimbsMut<'_>,
        out1: LimbsMut<'_>,
    ) -> Result<()> {
        self.inner_product(digits, 1, b, a, out0, out1)
    }

    fn key_switch_inner_product_galois(
        &self,
        digits: &[Limbs<'_>],
        g: GaloisElement,
        b: &[Limbs<'_>],
        a: &[Limbs<'_>],
        out0: LimbsMut<'_>,
        out1: LimbsMut<'_>,
    ) -> Result<()> {
        self.inner_product(digits, g.0, b, a, out0, out1)
    }

    fn ntt_inverse_into(&self, src: Limbs<'_>, dst: LimbsMut<'_>) -> Result<()> {
        same_length(src.len(), dst.len())?;
        if src.moduli != dst.moduli {
            return Err(Error::LengthMismatch {
                expected: src.len(),
                actual: dst.len(),
            });
        }
        let s = self.read_view(&src)?;
        let d = self.write_view(&dst)?;
        let _guard = self.allocator.prepare(&[src.buffer, dst.buffer])?;
        // `src` and `dst` are distinct buffers (a shared and a mutable borrow).
        self.ntt_inverse_raw((d.0, &d.1), (s.0, &s.1))
    }

    fn tensor(
        &self,
        a0: Limbs<'_>,
        a1: Limbs<'_>,
        b0: Limbs<'_>,
        b1: Limbs<'_>,
        d0: LimbsMut<'_>,
        d1: LimbsMut<'_>,
        d2: LimbsMut<'_>,
    ) -> Result<()> {
        let map = LimbMap::new(a0.positions, a0.moduli)?;
        let alike = |p: &[usize], m: &[usize]| p == a0.positions && m == a0.moduli;
        if !(alike(a1.positions, a1.moduli)
            && alike(b0.positions, b0.moduli)
            && alike(b1.positions, b1.moduli)
            && alike(d0.positions, d0.moduli)
            && alike(d1.positions, d1.moduli)
            && alike(d2.positions, d2.moduli))
        {
            return tensor_by_parts(self, [a0, a1, b0, b1], [d0, d1, d2]);
        }
        let inputs = [
            self.read_view(&a0)?.0,
            self.read_view(&a1)?.0,
            self.read_view(&b0)?.0,
            self.read_view(&b1)?.0,
        ];
        let outputs = [
            self.write_view(&d0)?.0,
            self.write_view(&d1)?.0,
            self.write_view(&d2)?.0,
        ];
        let _guard = self.allocator.prepare(&[
            a0.buffer,
            a1.buffer,
            b0.buffer,
            b1.buffer,
            &*d0.buffer,
            &*d1.buffer,
            &*d2.buffer,
        ])?;
        // SAFETY: seven checked views with one map on the compute stream; the
        // outputs are fresh buffers distinct from the inputs.
        unsafe {
            launch::arith::tensor_async(
                &self.kernels,
                StreamId::Compute,
                outputs,
                inputs,
                &map,
                self.consts()?,
                self.n(),
            )
        }?;
        Ok(())
    }
}
