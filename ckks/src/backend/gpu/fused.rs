//! The fused paths of key switching and rescaling: the key-switch inner
//! products (with an expanded or a seeded key, after an optional Galois
//! automorphism), and ModDown, rescale and decomposition of one or two
//! parts in one launch per kernel. Those that need their views to line up
//! return `Ok(false)` where they do not, and the trait methods in `ops`
//! fall back to the generic launches.

use hemem_gpu_kernels::launch::ckks as launch;
use hemem_gpu_kernels::launch::ckks::ntt::{ForwardEpilogue, ForwardSource};
use hemem_memory::{Buffer, MemoryClass, StreamId};

use super::GpuBackend;
use super::args::{address, first, launch_seed};
use crate::backend::{Addend, Backend, Limbs, LimbsMut, contiguous, inner_product_by_parts};
use crate::ntt::GaloisElement;
use crate::sampling::UniformSeed;
use crate::{Error, Result};

impl GpuBackend {
    /// The fused inner product, over the digits after `galois` (1: none).
    pub(super) fn inner_product(
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

    /// ModDown of several parts (the same views but for their buffers; at
    /// most [`launch::ntt::MAX_PARTS`], and `parts · p_count` at most
    /// [`launch::MAX_LIMBS`]), each with the addition after it in the
    /// epilogue where `addend` has one (a rotated addend read through its
    /// automorphism): one launch per kernel for every part. `Ok(false)`
    /// when the views differ or there are too many parts (the caller falls
    /// back to one part at a time).
    pub(super) fn mod_down_parts(
        &self,
        x: &[Limbs<'_>],
        p_count: usize,
        addend: &[Option<Addend<'_>>],
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
        let first_add = addend.iter().flatten().map(|e| e.limbs).next();
        if let Some(e) = addend
            .iter()
            .flatten()
            .map(|e| e.limbs)
            .find(|e| e.moduli != o0.moduli)
        {
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
                .all(|e| first_add.is_some_and(|f| f.positions == e.limbs.positions))
            && x.len() == out.len()
            && x.len() == addend.len()
            && x.len() <= launch::ntt::MAX_PARTS
            && x.len() * p_count <= launch::MAX_LIMBS;
        if !uniform {
            return Ok(false);
        }
        let parts = x.len();
        let mut xs = [0u64; launch::ntt::MAX_PARTS];
        let mut outs = [0u64; launch::ntt::MAX_PARTS];
        let mut adds = [0u64; launch::ntt::MAX_PARTS];
        let mut galois = [0u32; launch::ntt::MAX_PARTS];
        for (((v, o), e), (xa, (oa, (ea, ga)))) in x.iter().zip(out).zip(addend).zip(
            xs.iter_mut()
                .zip(outs.iter_mut().zip(adds.iter_mut().zip(galois.iter_mut()))),
        ) {
            *xa = self.read_view(v)?.0;
            *oa = self.write_view(o)?.0;
            if let Some(e) = e {
                *ea = self.read_view(&e.limbs)?.0;
                if let Some(g) = e.galois {
                    // Below 2N once reduced; the launch checks it again.
                    *ga = u32::try_from(g.reduced(self.degree)?.0).unwrap_or(u32::MAX);
                }
            }
        }
        // The parts' addends and their elements (0: none), or none at all.
        let (xs, outs) = (first(&xs, parts)?, first(&outs, parts)?);
        let (adds, add_galois) = match first_add {
            Some(_) => (first(&adds, parts)?, first(&galois, parts)?),
            None => (&[][..], &[][..]),
        };
        let tables = self.conversion(p_moduli, q_moduli)?;
        let p_part = self.scratch(
            parts * p_count,
            x.iter().any(Limbs::is_sensitive)
                || addend.iter().flatten().any(|e| e.limbs.is_sensitive()),
        )?;
        let mut touched: Vec<&Buffer> = x.iter().map(|v| v.buffer).collect();
        touched.extend(out.iter().map(|o| &*o.buffer));
        touched.extend(addend.iter().flatten().map(|e| e.limbs.buffer));
        touched.extend([&p_part, &tables.table, &tables.scale, &tables.y_scale]);
        let _guard = self.allocator.prepare(&touched)?;
        let p_addr = address(&p_part)?;
        let limb_bytes = (p_count * self.degree * 8) as u64;
        let mut p_parts = [0u64; launch::ntt::MAX_PARTS];
        for (z, slot) in p_parts.iter_mut().enumerate().take(parts) {
            *slot = p_addr + z as u64 * limb_bytes;
        }
        let p_map = self.limb_map(contiguous(0, p_count)?, p_moduli)?;
        // The P limbs to coefficients, out of place (no copy), times
        // N^{-1}·P̂_i^{-1}: the conversion's y_i, once per coefficient.
        self.ntt_inverse_raw(
            (first(&p_parts, parts)?, &p_map),
            (xs, &self.limb_map(p_positions, p_moduli)?),
            Some(address(&tables.y_scale)?),
        )?;
        // out = (x_i − NTT(convert(y))) · P^{-1} (+ addend): the
        // conversion is computed as the transform loads its points, the
        // subtraction, scaling and addition as it stores them.
        let mut all_p = [0usize; launch::MAX_LIMBS];
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
                tables: first(&[table; launch::ntt::MAX_PARTS], parts)?,
                exact: true,
                prescaled: true,
                own: None,
            },
            ForwardEpilogue::SubScale {
                aux: xs,
                aux_map: &self.limb_map(q_positions, q_moduli)?,
                scale: address(&tables.scale)?,
                add: adds,
                add_map: &add_map,
                add_galois,
            },
        )?;
        Ok(true)
    }

    /// ModDown of one part: [`GpuBackend::mod_down_parts`], whose single
    /// part always fits its launch but where `p_count` exceeds the limb
    /// map ([`launch::MAX_LIMBS`]), a typed error.
    pub(super) fn mod_down_one(
        &self,
        x: Limbs<'_>,
        p_count: usize,
        addend: Option<Addend<'_>>,
        out: LimbsMut<'_>,
    ) -> Result<()> {
        if self.mod_down_parts(&[x], p_count, &[addend], &[out])? {
            Ok(())
        } else {
            Err(Error::LengthMismatch {
                expected: launch::MAX_LIMBS,
                actual: p_count,
            })
        }
    }

    /// Rescale of one or two parts (the same views but for their
    /// buffers): one launch per kernel for every part; `Ok(false)` when the
    /// views differ.
    pub(super) fn rescale_parts(&self, x: &[Limbs<'_>], out: &[LimbsMut<'_>]) -> Result<bool> {
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
        let (xs, outs) = (first(&xs, parts)?, first(&outs, parts)?);
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
            (first(&tops, parts)?, &self.limb_map(&[0], &[last])?),
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
                add_galois: &[],
            },
        )?;
        Ok(true)
    }

    /// The fused decomposition (see [`Backend::decompose_mod_up`]);
    /// `Ok(false)` when the views do not fit its kernels.
    pub(super) fn decompose_fused(
        &self,
        c: Limbs<'_>,
        alpha: usize,
        out: &[LimbsMut<'_>],
    ) -> Result<bool> {
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
                first(&outs, parts)?,
                &self.limb_map(o0.positions, o0.moduli)?,
            ),
            ForwardSource::Convert {
                input: ya,
                map: &y_map,
                per: alpha,
                tables: first(&table_addresses, parts)?,
                exact: true,
                prescaled: true,
                own: Some((ca, &cm)),
            },
            ForwardEpilogue::Store,
        )?;
        Ok(true)
    }

    /// The inner product with a compressed key in one kernel, over the
    /// digits after `galois` (1: none); `Ok(false)` when the views do not
    /// fit it (the caller expands `a` instead).
    #[allow(
        clippy::too_many_arguments,
        reason = "the trait method's operands and the Galois element"
    )]
    pub(super) fn seeded_inner_product(
        &self,
        digits: &[Limbs<'_>],
        galois: u64,
        b: &[Limbs<'_>],
        seed: &UniformSeed,
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
            && self
                .degree
                .is_multiple_of(launch::prf::SEEDED_DEGREE_MULTIPLE)
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
                &launch_seed(seed),
                count as u32,
                self.consts()?,
                self.n(),
                galois,
            )
        }?;
        Ok(true)
    }
}
