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
#[cfg(test)]
mod emulate_prf;
mod tables;

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use hemem_gpu_kernels::Kernels;
use hemem_gpu_kernels::launch::ckks::convert::CopyRows;
use hemem_gpu_kernels::launch::ckks::ntt::{ForwardEpilogue, ForwardSource, NttGeometry, NttRows};
use hemem_gpu_kernels::launch::ckks::{self as launch, ElementOp, LimbMap, PtrArray, Scalars};
use hemem_memory::{Allocator, Buffer, GpuDevice, MemoryClass, StreamId};

use self::tables::{
    DeviceConversion, conversion, modulus_table, scale_pairs, twiddle_tables, upload_constant,
    y_scale_words,
};
use super::{
    Backend, BinaryOp, Device, Limbs, LimbsMut, check_moduli, contiguous, decompose_by_parts,
    inner_product_by_parts, seeded_inner_product_by_parts, tensor_by_parts,
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
        let tables = Arc::new(conversion(&self.allocator, self.degree, &from_m, &to_m)?);
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

    /// A temporary buffer of `limbs` limbs on the compute stream; sensitive
    /// (zeroed before reuse) when it is computed from sensitive inputs.
    fn scratch(&self, limbs: usize, sensitive: bool) -> Result<Buffer> {
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
    fn limb_map(&self, positions: &[usize], moduli: &[usize]) -> Result<LimbMap> {
        check_moduli(moduli, self.moduli.len())?;
        Ok(LimbMap::new(positions, moduli)?)
    }

    /// Address and limb map of a read-only view, checked (positions against
    /// the buffer, modulus indices against the table).
    fn read_view(&self, view: &Limbs<'_>) -> Result<(u64, LimbMap)> {
        view.check(self.degree)?;
        Ok((
            address(view.buffer)?,
            self.limb_map(view.positions, view.moduli)?,
        ))
    }

    /// The device addresses of read-only views (each checked), as a kernel
    /// parameter array.
    fn addresses(&self, views: &[Limbs<'_>]) -> Result<PtrArray> {
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
    fn write_view(&self, view: &LimbsMut<'_>) -> Result<(u64, LimbMap)> {
        view.check(self.degree)?;
        Ok((
            address(view.buffer)?,
            self.limb_map(view.positions, view.moduli)?,
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

    /// Forward NTT of `source` into `dst`'s limbs (one part per buffer),
    /// with the given last-phase epilogue.
    fn ntt_forward_raw(
        &self,
        dst: (&[u64], &LimbMap),
        source: ForwardSource<'_>,
        epilogue: ForwardEpilogue<'_>,
    ) -> Result<()> {
        // SAFETY: every address holds its map's limbs (checked by the
        // callers' views or fresh scratch; compact sources at least N/gap
        // words, checked by `compact_words`), allocated on the compute stream
        // where every launch of this backend runs; the source limbs are the
        // destination's own or lie in another buffer, and the parts'
        // destinations are distinct buffers or disjoint limbs of scratch;
        // the tables cover every modulus index (they are built for the
        // whole global table, and `limb_map` checks each index against it)
        // and the conversion tables match their
        // sources and targets (built from the same lists).
        unsafe {
            launch::ntt::forward_async(
                &self.kernels,
                StreamId::Compute,
                dst,
                source,
                self.consts()?,
                address(&self.twiddles)?,
                self.ntt_geometry(),
                epilogue,
            )
        }?;
        Ok(())
    }

    /// Inverse NTT of `src`'s limbs into `dst`'s (the same for in place),
    /// one part per buffer; with `y_scale`, a conversion's `y_i` instead of
    /// the coefficients.
    fn ntt_inverse_raw(
        &self,
        dst: (&[u64], &LimbMap),
        src: (&[u64], &LimbMap),
        y_scale: Option<u64>,
    ) -> Result<()> {
        // SAFETY: as `ntt_forward_raw`; `y_scale` holds a pair per limb.
        unsafe {
            launch::ntt::inverse_async(
                &self.kernels,
                StreamId::Compute,
                dst,
                src,
                self.consts()?,
                address(&self.twiddles)?,
                address(&self.n_inv)?,
                y_scale,
                self.ntt_geometry(),
            )
        }?;
        Ok(())
    }

    fn ntt(&self, buffer: u64, map: &LimbMap, forward: bool) -> Result<()> {
        if forward {
            self.ntt_forward_raw(
                (&[buffer], map),
                ForwardSource::Limbs {
                    src: &[buffer],
                    map,
                },
                ForwardEpilogue::Store,
            )
        } else {
            self.ntt_inverse_raw((&[buffer], map), (&[buffer], map), None)
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
                        let mut buffer =
                            self.allocate(MemoryClass::Temporary, d.len(), d.is_sensitive())?;
                        self.automorphism(
                            *d,
                            GaloisElement(galois),
                            LimbsMut::whole(&mut buffer, d.moduli)?,
                        )?;
                        Ok(buffer)
                    })
                    .collect::<Result<Vec<_>>>()?;
                let views = rotated
                    .iter()
                    .zip(digits)
                    .map(|(buffer, d)| Limbs::whole(buffer, d.moduli))
                    .collect::<Result<Vec<_>>>()?;
                inner_product_by_parts(self, &views, b, a, out0, out1)
            };
        }
        // Declared before any address is read: a streamed key half has a
        // device address only while it is resident.
        let mut touched: Vec<&Buffer> = digits.iter().chain(b).chain(a).map(|v| v.buffer).collect();
        touched.push(&*out0.buffer);
        touched.push(&*out1.buffer);
        let _guard = self.allocator.prepare(&touched)?;
        let (pd, pb, pa) = (
            self.addresses(digits)?,
            self.addresses(b)?,
            self.addresses(a)?,
        );
        let digit_map = self.limb_map(first.positions, first.moduli)?;
        let key_map = self.limb_map(key.positions, key.moduli)?;
        let (o0, mo) = self.write_view(&out0)?;
        let (o1, _) = self.write_view(&out1)?;
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

    /// ModDown of one or two parts (the same views but for their buffers),
    /// each with the addition after it in the epilogue where `addend` has
    /// one: one launch per kernel for every part. `Ok(false)` when the
    /// views differ (the caller falls back to one part at a time).
    fn mod_down_parts(
        &self,
        x: &[Limbs<'_>],
        p_count: usize,
        addend: &[Option<Limbs<'_>>],
        out: &[LimbsMut<'_>],
    ) -> Result<bool> {
        let (Some(x0), Some(o0)) = (x.first(), out.first()) else {
            return Err(Error::EmptyBasis);
        };
        let q_count = x0
            .len()
            .checked_sub(p_count)
            .filter(|_| p_count > 0)
            .ok_or(Error::LengthMismatch {
                expected: p_count + 1,
                actual: x0.len(),
            })?;
        let (q_moduli, p_moduli) = x0.moduli.split_at(q_count);
        let (q_positions, p_positions) = x0.positions.split_at(q_count);
        if q_moduli != o0.moduli {
            return Err(Error::LengthMismatch {
                expected: q_count,
                actual: o0.len(),
            });
        }
        let first_add = addend.iter().flatten().next();
        if let Some(e) = addend.iter().flatten().find(|e| e.moduli != o0.moduli) {
            return Err(Error::LengthMismatch {
                expected: o0.len(),
                actual: e.len(),
            });
        }
        let uniform = x
            .iter()
            .all(|v| v.positions == x0.positions && v.moduli == x0.moduli)
            && out
                .iter()
                .all(|v| v.positions == o0.positions && v.moduli == o0.moduli)
            && addend
                .iter()
                .flatten()
                .all(|e| first_add.is_some_and(|f| f.positions == e.positions))
            && x.len() == out.len()
            && x.len() == addend.len()
            && x.len() <= 2;
        if !uniform {
            return Ok(false);
        }
        let parts = x.len();
        let mut xs = [0u64; 2];
        let mut outs = [0u64; 2];
        let mut adds = [0u64; 2];
        for (((v, o), e), (xa, (oa, ea))) in x
            .iter()
            .zip(out)
            .zip(addend)
            .zip(xs.iter_mut().zip(outs.iter_mut().zip(adds.iter_mut())))
        {
            *xa = self.read_view(v)?.0;
            *oa = self.write_view(o)?.0;
            if let Some(e) = e {
                *ea = self.read_view(e)?.0;
            }
        }
        let (xs, outs, adds) = (
            first_u64(&xs, parts)?,
            first_u64(&outs, parts)?,
            first_u64(&adds, parts)?,
        );
        let tables = self.conversion(p_moduli, q_moduli)?;
        let p_part = self.scratch(
            parts * p_count,
            x.iter().any(Limbs::is_sensitive) || addend.iter().flatten().any(Limbs::is_sensitive),
        )?;
        let mut touched: Vec<&Buffer> = x.iter().map(|v| v.buffer).collect();
        touched.extend(out.iter().map(|o| &*o.buffer));
        touched.extend(addend.iter().flatten().map(|e| e.buffer));
        touched.extend([&p_part, &tables.table, &tables.scale, &tables.y_scale]);
        let _guard = self.allocator.prepare(&touched)?;
        let p_addr = address(&p_part)?;
        let limb_bytes = (p_count * self.degree * 8) as u64;
        let p_parts = [p_addr, p_addr + limb_bytes];
        let p_map = self.limb_map(contiguous(0, p_count)?, p_moduli)?;
        // The P limbs to coefficients, out of place (no copy), times
        // N^{-1}·P̂_i^{-1}: the conversion's y_i, once per coefficient.
        self.ntt_inverse_raw(
            (first_u64(&p_parts, parts)?, &p_map),
            (xs, &self.limb_map(p_positions, p_moduli)?),
            Some(address(&tables.y_scale)?),
        )?;
        // out = (x_i − NTT(convert(y))) · P^{-1} (+ addend): the
        // conversion is computed as the transform loads its points, the
        // subtraction, scaling and addition as it stores them.
        let mut all_p = [0usize; 2 * launch::MAX_SOURCES];
        for (slot, &m) in all_p
            .iter_mut()
            .zip(p_moduli.iter().cycle())
            .take(parts * p_count)
        {
            *slot = m;
        }
        let conv_map = self.limb_map(
            contiguous(0, parts * p_count)?,
            first(&all_p, parts * p_count)?,
        )?;
        let table = address(&tables.table)?;
        let add_map = match first_add {
            Some(e) => self.limb_map(e.positions, e.moduli)?,
            None => self.limb_map(&[], &[])?,
        };
        self.ntt_forward_raw(
            (outs, &self.limb_map(o0.positions, o0.moduli)?),
            ForwardSource::Convert {
                input: p_addr,
                map: &conv_map,
                per: p_count,
                tables: first_u64(&[table, table], parts)?,
                exact: true,
                prescaled: true,
                own: None,
            },
            ForwardEpilogue::SubScale {
                aux: xs,
                aux_map: &self.limb_map(q_positions, q_moduli)?,
                scale: address(&tables.scale)?,
                add: if first_add.is_some() { adds } else { &[] },
                add_map: &add_map,
            },
        )?;
        Ok(true)
    }

    /// Rescale of one or two parts (the same views but for their
    /// buffers): one launch per kernel for every part; `Ok(false)` when the
    /// views differ.
    fn rescale_parts(&self, x: &[Limbs<'_>], out: &[LimbsMut<'_>]) -> Result<bool> {
        let (Some(x0), Some(o0)) = (x.first(), out.first()) else {
            return Err(Error::EmptyBasis);
        };
        let (&last, kept) = x0.moduli.split_last().ok_or(Error::LengthMismatch {
            expected: 1,
            actual: 0,
        })?;
        let &last_position = x0.positions.last().ok_or(Error::EmptyBasis)?;
        if kept != o0.moduli {
            return Err(Error::LengthMismatch {
                expected: kept.len(),
                actual: o0.len(),
            });
        }
        let uniform = x
            .iter()
            .all(|v| v.positions == x0.positions && v.moduli == x0.moduli)
            && out
                .iter()
                .all(|v| v.positions == o0.positions && v.moduli == o0.moduli)
            && x.len() == out.len()
            && x.len() <= 2;
        if !uniform {
            return Ok(false);
        }
        let parts = x.len();
        let mut xs = [0u64; 2];
        let mut outs = [0u64; 2];
        for ((v, o), (xa, oa)) in x.iter().zip(out).zip(xs.iter_mut().zip(outs.iter_mut())) {
            *xa = self.read_view(v)?.0;
            *oa = self.write_view(o)?.0;
        }
        let (xs, outs) = (first_u64(&xs, parts)?, first_u64(&outs, parts)?);
        let kept_map = self.limb_map(
            x0.positions.get(..kept.len()).ok_or(Error::EmptyBasis)?,
            kept,
        )?;
        let scale = self.rescale_scale(kept, last)?;
        let top = self.scratch(parts, x.iter().any(Limbs::is_sensitive))?;
        let mut touched: Vec<&Buffer> = x.iter().map(|v| v.buffer).collect();
        touched.extend(out.iter().map(|o| &*o.buffer));
        touched.extend([&top, &*scale]);
        let _guard = self.allocator.prepare(&touched)?;
        let top_addr = address(&top)?;
        let tops = [top_addr, top_addr + (self.degree * 8) as u64];
        // The last limb of each part to coefficients, out of place (no copy).
        self.ntt_inverse_raw(
            (first_u64(&tops, parts)?, &self.limb_map(&[0], &[last])?),
            (xs, &self.limb_map(&[last_position], &[last])?),
            None,
        )?;
        // out = (x_i − NTT(centred lift of the top limb)) · q_last^{-1}: the
        // lift as the transform loads its points, the rest as it stores.
        self.ntt_forward_raw(
            (outs, &self.limb_map(o0.positions, o0.moduli)?),
            ForwardSource::Spread {
                input: top_addr,
                map: &self.limb_map(contiguous(0, parts)?, first(&[last, last], parts)?)?,
            },
            ForwardEpilogue::SubScale {
                aux: xs,
                aux_map: &kept_map,
                scale: address(&scale)?,
                add: &[],
                add_map: &self.limb_map(&[], &[])?,
            },
        )?;
        Ok(true)
    }

    /// The fused decomposition (see [`Backend::decompose_mod_up`]);
    /// `Ok(false)` when the views do not fit its kernels.
    fn decompose_fused(&self, c: Limbs<'_>, alpha: usize, out: &[LimbsMut<'_>]) -> Result<bool> {
        let count = c.len();
        let Some(o0) = out.first() else {
            return Ok(false);
        };
        let fits = alpha > 0
            && alpha <= launch::MAX_SOURCES
            && out.len() == count.div_ceil(alpha)
            && out.len() <= launch::ntt::MAX_PARTS
            && o0.moduli.get(..count) == Some(c.moduli)
            && out
                .iter()
                .all(|o| o.positions == o0.positions && o.moduli == o0.moduli);
        if !fits {
            return Ok(false);
        }
        let (ca, cm) = self.read_view(&c)?;
        let mut outs = [0u64; launch::ntt::MAX_PARTS];
        let mut tables = Vec::with_capacity(out.len());
        let mut table_addresses = [0u64; launch::ntt::MAX_PARTS];
        let mut targets = [0usize; launch::MAX_LIMBS];
        for (j, o) in out.iter().enumerate() {
            let (Some(slot), Some(table_slot)) = (outs.get_mut(j), table_addresses.get_mut(j))
            else {
                return Ok(false);
            };
            *slot = self.write_view(o)?.0;
            let start = j * alpha;
            let end = (start + alpha).min(count);
            let digit = c.moduli.get(start..end).ok_or(Error::EmptyBasis)?;
            let mut t = 0usize;
            for &m in o0.moduli.iter().filter(|m| !digit.contains(m)) {
                *targets.get_mut(t).ok_or(Error::EmptyBasis)? = m;
                t += 1;
            }
            let table = self.conversion(digit, first(&targets, t)?)?;
            *table_slot = address(&table.table)?;
            tables.push(table);
        }
        let parts = out.len();
        let y_scale = self.decompose_scale(c.moduli, alpha)?;
        let y = self.scratch(count, c.is_sensitive())?;
        let mut touched: Vec<&Buffer> = vec![c.buffer, &y, &y_scale];
        touched.extend(out.iter().map(|o| &*o.buffer));
        touched.extend(tables.iter().map(|t| &t.table));
        let _guard = self.allocator.prepare(&touched)?;
        let ya = address(&y)?;
        let y_map = self.limb_map(contiguous(0, count)?, c.moduli)?;
        // c to y_i = [x_i · q̂_i^{-1}]_{q_i} (q̂ of the limb's digit), out of
        // place: the conversion's first step, once per coefficient.
        self.ntt_inverse_raw((&[ya], &y_map), (&[ca], &cm), Some(address(&y_scale)?))?;
        // Every digit at once: its own limbs copied from c, the others
        // converted (exact, centred, as on the CPU) as the transform loads
        // its points.
        self.ntt_forward_raw(
            (
                first_u64(&outs, parts)?,
                &self.limb_map(o0.positions, o0.moduli)?,
            ),
            ForwardSource::Convert {
                input: ya,
                map: &y_map,
                per: alpha,
                tables: first_u64(&table_addresses, parts)?,
                exact: true,
                prescaled: true,
                own: Some((ca, &cm)),
            },
            ForwardEpilogue::Store,
        )?;
        Ok(true)
    }

    /// The per-limb `(N^{-1}·q̂_i^{-1}, shoup)` pairs of a decomposition of
    /// `moduli` into digits of `alpha` limbs, built once per pair.
    fn decompose_scale(&self, moduli: &[usize], alpha: usize) -> Result<Arc<Buffer>> {
        let key = PairKey::new(moduli, &[alpha])?;
        if let Some(t) = self
            .decompose_scales
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key.as_slice())
        {
            return Ok(Arc::clone(t));
        }
        let mut words = Vec::with_capacity(2 * moduli.len());
        for digit in moduli.chunks(alpha.max(1)) {
            let m = digit
                .iter()
                .map(|&i| self.modulus(i))
                .collect::<Result<Vec<_>>>()?;
            words.extend(y_scale_words(self.degree, &m)?);
        }
        let table = Arc::new(upload_constant(&self.allocator, &words)?);
        self.decompose_scales
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.as_slice().to_vec(), Arc::clone(&table));
        Ok(table)
    }

    /// Checks that every modulus index is in the table (the kernels index
    /// the constants by it).
    fn known_moduli(&self, moduli: &[usize]) -> Result<()> {
        check_moduli(moduli, self.moduli.len())
    }

    /// The inner product with a compressed key in one kernel, over the
    /// digits after `galois` (1: none); `Ok(false)` when the views do not
    /// fit it (the caller expands `a` instead).
    #[allow(
        clippy::too_many_arguments,
        reason = "the trait method's operands and the Galois element"
    )]
    fn seeded_inner_product(
        &self,
        digits: &[Limbs<'_>],
        galois: u64,
        b: &[Limbs<'_>],
        seed: &[u8; 32],
        out0: &LimbsMut<'_>,
        out1: &LimbsMut<'_>,
    ) -> Result<bool> {
        let count = digits.len();
        if count == 0 || count != b.len() {
            return Err(Error::LengthMismatch {
                expected: count,
                actual: b.len(),
            });
        }
        let (first, key) = (
            digits.first().ok_or(Error::EmptyBasis)?,
            b.first().ok_or(Error::EmptyBasis)?,
        );
        let fits = count <= launch::MAX_DIGITS
            && self.degree.is_multiple_of(8)
            && digits
                .iter()
                .all(|v| v.positions == first.positions && v.moduli == out0.moduli)
            && b.iter()
                .all(|v| v.positions == key.positions && v.moduli == out0.moduli)
            && out0.positions == out1.positions
            && out0.moduli == out1.moduli;
        if !fits {
            return Ok(false);
        }
        self.known_moduli(out0.moduli)?;
        // Declared before any address is read (streamed key halves).
        let mut touched: Vec<&Buffer> = digits.iter().chain(b).map(|v| v.buffer).collect();
        touched.push(&*out0.buffer);
        touched.push(&*out1.buffer);
        let _guard = self.allocator.prepare(&touched)?;
        let (pd, pb) = (self.addresses(digits)?, self.addresses(b)?);
        let digit_map = self.limb_map(first.positions, first.moduli)?;
        let key_map = self.limb_map(key.positions, key.moduli)?;
        let (o0, mo) = self.write_view(out0)?;
        let (o1, _) = self.write_view(out1)?;
        // SAFETY: every address holds its map's limbs (checked above) on the
        // compute stream; the outputs are distinct buffers from the inputs
        // (mutable borrows); the modulus indices are in the constant table;
        // the Galois element is odd and below 2N (a `GaloisElement`).
        unsafe {
            launch::prf::key_switch_inner_product_seeded_async(
                &self.kernels,
                StreamId::Compute,
                (o0, o1, &mo),
                (&pd, &digit_map),
                (&pb, &key_map),
                &launch::prf::Seed::new(seed),
                count as u32,
                self.consts()?,
                self.n(),
                galois,
            )
        }?;
        Ok(true)
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

/// The first `count` addresses of a stack list.
fn first_u64(list: &[u64], count: usize) -> Result<&[u64]> {
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

    fn set_ntt_rows(&self, rows: NttRows) {
        self.rows16
            .store(rows == NttRows::Radix16, Ordering::Relaxed);
    }

    fn ntt_rows(&self) -> Option<NttRows> {
        Some(self.ntt_geometry().rows)
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
        let _guard = self.allocator.prepare(&[src.buffer, dst.buffer])?;
        let s = self.read_view(&src)?;
        let d = self.write_view(&dst)?;
        self.copy_raw((d.0, &d.1), (s.0, &s.1))
    }

    fn ntt_forward(&self, x: LimbsMut<'_>) -> Result<()> {
        let _guard = self.allocator.prepare(&[x.buffer])?;
        let (addr, map) = self.write_view(&x)?;
        self.ntt(addr, &map, true)
    }

    fn ntt_inverse(&self, x: LimbsMut<'_>) -> Result<()> {
        let _guard = self.allocator.prepare(&[x.buffer])?;
        let (addr, map) = self.write_view(&x)?;
        self.ntt(addr, &map, false)
    }

    fn binary(&self, op: BinaryOp, a: Limbs<'_>, b: Limbs<'_>, out: LimbsMut<'_>) -> Result<()> {
        same_length(a.len(), b.len())?;
        same_length(a.len(), out.len())?;
        let _guard = self.allocator.prepare(&[a.buffer, b.buffer, out.buffer])?;
        let (xa, ma) = self.read_view(&a)?;
        let (xb, mb) = self.read_view(&b)?;
        let (xo, mo) = self.write_view(&out)?;
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
        let _guard = self.allocator.prepare(&[acc.buffer, b.buffer])?;
        let (xb, mb) = self.read_view(&b)?;
        let (xo, mo) = self.write_view(&acc)?;
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
        let _guard = self.allocator.prepare(&[acc.buffer, a.buffer, b.buffer])?;
        let (xa, ma) = self.read_view(&a)?;
        let (xb, mb) = self.read_view(&b)?;
        let (xo, mo) = self.write_view(&acc)?;
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
        let _guard = self.allocator.prepare(&[x.buffer])?;
        let (xo, mo) = self.write_view(&x)?;
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
        let _guard = self.allocator.prepare(&[x.buffer])?;
        let (xo, mo) = self.write_view(&x)?;
        let s = self.scalars(x.moduli, scalars)?;
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
        self.rescale_parts(&[x], &[out]).map(|_| ())
    }

    fn rescale_pair(&self, x: [Limbs<'_>; 2], out: [LimbsMut<'_>; 2]) -> Result<()> {
        if self.rescale_parts(&x, &out)? {
            return Ok(());
        }
        for (x, out) in x.into_iter().zip(out) {
            self.rescale(x, out)?;
        }
        Ok(())
    }

    fn mod_down(&self, x: Limbs<'_>, p_count: usize, out: LimbsMut<'_>) -> Result<()> {
        self.mod_down_parts(&[x], p_count, &[None], &[out])
            .map(|_| ())
    }

    fn mod_down_add(
        &self,
        x: Limbs<'_>,
        p_count: usize,
        addend: Limbs<'_>,
        out: LimbsMut<'_>,
    ) -> Result<()> {
        self.mod_down_parts(&[x], p_count, &[Some(addend)], &[out])
            .map(|_| ())
    }

    fn mod_down_pair(
        &self,
        x: [Limbs<'_>; 2],
        p_count: usize,
        addend: [Option<Limbs<'_>>; 2],
        out: [LimbsMut<'_>; 2],
    ) -> Result<()> {
        if self.mod_down_parts(&x, p_count, &addend, &out)? {
            return Ok(());
        }
        for ((x, addend), out) in x.into_iter().zip(addend).zip(out) {
            self.mod_down_parts(&[x], p_count, &[addend], &[out])?;
        }
        Ok(())
    }

    fn decompose_mod_up(&self, c: Limbs<'_>, alpha: usize, out: &mut [LimbsMut<'_>]) -> Result<()> {
        if self.decompose_fused(c, alpha, out)? {
            return Ok(());
        }
        decompose_by_parts(self, c, alpha, out)
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
        // The arguments are declared before their addresses are read (a
        // streamed buffer has one only while resident); the conversion
        // table below, pooled or managed, has a fixed address.
        let held: [&Buffer; 3] = [
            digit.buffer,
            &*out.buffer,
            digit_ntt.as_ref().map_or(digit.buffer, |d| d.buffer),
        ];
        let _held = self.allocator.prepare(&held)?;
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
        let own_map = self.limb_map(first(&own_pos, owns)?, own_mod)?;
        let own_src_map = self.limb_map(first(&own_src, owns)?, own_mod)?;
        let target_map = self.limb_map(first(&target_pos, targets)?, target_mod)?;
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
                    (&[xo], &target_map),
                    ForwardSource::Convert {
                        input: da,
                        map: &dm,
                        per: dm.len(),
                        tables: &[address(&t.table)?],
                        // Centred and exact, as on the CPU (see its `mod_up`).
                        exact: true,
                        prescaled: false,
                        own: None,
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
        let _guard = self.allocator.prepare(&[src.buffer, out.buffer])?;
        let (sa, _) = self.read_view(&src)?;
        let (&position, &modulus) = src
            .positions
            .first()
            .zip(src.moduli.first())
            .ok_or(Error::EmptyBasis)?;
        let (xo, mo) = self.write_view(&out)?;
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
        let _guard = self.allocator.prepare(&[x.buffer, out.buffer])?;
        let (xa, ma) = self.read_view(&x)?;
        let (xo, mo) = self.write_view(&out)?;
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

    /// On the device: one thread per ChaCha20 block of eight coefficients.
    fn uniform_from_seed(&self, seed: &[u8; 32], digit: usize, out: LimbsMut<'_>) -> Result<()> {
        let _guard = self.allocator.prepare(&[out.buffer])?;
        let (xo, mo) = self.write_view(&out)?;
        self.known_moduli(out.moduli)?;
        let digit = u32::try_from(digit).map_err(|_| Error::LengthMismatch {
            expected: u32::MAX as usize,
            actual: digit,
        })?;
        // SAFETY: the view was checked against its buffer, which lives on the
        // compute stream and is borrowed mutably; the modulus indices are in
        // the constant table.
        unsafe {
            launch::prf::uniform_from_seed_async(
                &self.kernels,
                StreamId::Compute,
                (xo, &mo),
                &launch::prf::Seed::new(seed),
                digit,
                self.consts()?,
                self.n(),
            )
        }?;
        Ok(())
    }

    /// One kernel that generates `a_j` as it reads `b_j`; views it does not
    /// fit fall back to expansion into temporaries.
    fn key_switch_inner_product_seeded(
        &self,
        digits: &[Limbs<'_>],
        galois: Option<GaloisElement>,
        b: &[Limbs<'_>],
        seed: &[u8; 32],
        out0: LimbsMut<'_>,
        out1: LimbsMut<'_>,
    ) -> Result<()> {
        let g = galois.map_or(1, |g| g.0);
        if self.seeded_inner_product(digits, g, b, seed, &out0, &out1)? {
            return Ok(());
        }
        seeded_inner_product_by_parts(self, digits, galois, b, seed, out0, out1)
    }

    fn ntt_inverse_into(&self, src: Limbs<'_>, dst: LimbsMut<'_>) -> Result<()> {
        same_length(src.len(), dst.len())?;
        if src.moduli != dst.moduli {
            return Err(Error::LengthMismatch {
                expected: src.len(),
                actual: dst.len(),
            });
        }
        let _guard = self.allocator.prepare(&[src.buffer, dst.buffer])?;
        let s = self.read_view(&src)?;
        let d = self.write_view(&dst)?;
        // `src` and `dst` are distinct buffers (a shared and a mutable borrow).
        self.ntt_inverse_raw((&[d.0], &d.1), (&[s.0], &s.1), None)
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
        let map = self.limb_map(a0.positions, a0.moduli)?;
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
        let _guard = self.allocator.prepare(&[
            a0.buffer,
            a1.buffer,
            b0.buffer,
            b1.buffer,
            &*d0.buffer,
            &*d1.buffer,
            &*d2.buffer,
        ])?;
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

    fn expand_coefficients(&self, compact: &Buffer, gap: usize, out: LimbsMut<'_>) -> Result<()> {
        let _guard = self.allocator.prepare(&[compact, &*out.buffer])?;
        let (xo, map) = self.write_view(&out)?;
        self.expand_raw(&[xo], &[compact], gap, &map)
    }

    fn expand_compact(
        &self,
        compact: &[&Buffer],
        gap: usize,
        out: &mut [LimbsMut<'_>],
    ) -> Result<()> {
        let Some(o0) = out.first() else {
            return same_length(compact.len(), 0);
        };
        same_length(compact.len(), out.len())?;
        let uniform = out
            .iter()
            .all(|o| o.positions == o0.positions && o.moduli == o0.moduli);
        if !uniform {
            return super::expand_by_parts(self, compact, gap, out);
        }
        let map = self.limb_map(o0.positions, o0.moduli)?;
        let batch = launch::ntt::MAX_PARTS;
        for (sources, outs) in compact.chunks(batch).zip(out.chunks(batch)) {
            // Declared before any address is read (streamed diagonals).
            let mut touched: Vec<&Buffer> = sources.to_vec();
            touched.extend(outs.iter().map(|o| &*o.buffer));
            let _guard = self.allocator.prepare(&touched)?;
            let mut addresses = [0u64; launch::ntt::MAX_PARTS];
            for (slot, o) in addresses.iter_mut().zip(outs) {
                *slot = self.write_view(o)?.0;
            }
            let mut words = [0u64; launch::ntt::MAX_PARTS];
            for (slot, c) in words.iter_mut().zip(sources) {
                super::compact_words(c, gap, self.degree)?;
                *slot = address(c)?;
            }
            let dst = first_u64(&addresses, outs.len())?;
            // The expansion happens as the transform loads its points: the
            // coefficient form is never written.
            self.ntt_forward_raw(
                (dst, &map),
                ForwardSource::Compact {
                    src: first_u64(&words, sources.len())?,
                    log_gap: gap.trailing_zeros(),
                },
                ForwardEpilogue::Store,
            )?;
        }
        Ok(())
    }
}

impl GpuBackend {
    /// Queues the expansion of `compact[z]` into the limbs `map` of the
    /// buffer at `dst[z]` (coefficient form); the caller holds the
    /// residency guard of every buffer.
    fn expand_raw(
        &self,
        dst: &[u64],
        compact: &[&Buffer],
        gap: usize,
        map: &LimbMap,
    ) -> Result<()> {
        let mut sources = [0u64; launch::encode::MAX_EXPAND_PARTS];
        for (slot, c) in sources.iter_mut().zip(compact) {
            super::compact_words(c, gap, self.degree)?;
            *slot = address(c)?;
        }
        same_length(dst.len(), compact.len())?;
        // SAFETY: each destination address holds `map`'s limbs (a checked
        // view) and each source at least N/gap words (checked above), all
        // on the compute stream; destinations are distinct buffers (mutable
        // views) and never a source (shared borrows); the constants cover
        // every modulus index.
        unsafe {
            launch::encode::expand_compact_async(
                &self.kernels,
                StreamId::Compute,
                dst,
                first_u64(&sources, compact.len())?,
                map,
                self.consts()?,
                self.n(),
                gap.trailing_zeros(),
            )
        }?;
        Ok(())
    }
}
