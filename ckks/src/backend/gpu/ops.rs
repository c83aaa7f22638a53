//! [`Backend`] for [`GpuBackend`]: each trait operation checks its views,
//! declares its buffers to the allocator, and queues its launches (a fused
//! path where one applies, the generic launches otherwise).

use hemem_gpu_kernels::launch::ckks::convert::CopyRows;
use hemem_gpu_kernels::launch::ckks::ntt::{ForwardEpilogue, ForwardSource, NttRows};
use hemem_gpu_kernels::launch::ckks::{self as launch, ElementOp};
use hemem_memory::{Allocator, Buffer, StreamId};

use super::GpuBackend;
use super::args::{address, first, launch_seed, same_length};
use crate::backend::{
    Addend, Backend, BinaryOp, Device, Limbs, LimbsMut, PeriodicLimbs, decompose_by_parts,
    empty_sum, mod_down_by_parts, seeded_inner_product_by_parts, tensor_by_parts,
};
use crate::ntt::GaloisElement;
use crate::sampling::UniformSeed;
use crate::zq::Modulus;
use crate::{Error, Result};

fn op_code(op: BinaryOp) -> ElementOp {
    match op {
        BinaryOp::Add => ElementOp::Add,
        BinaryOp::Sub => ElementOp::Sub,
        BinaryOp::Mul => ElementOp::Mul,
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
        self.rows16.store(
            rows == NttRows::Radix16,
            std::sync::atomic::Ordering::Relaxed,
        );
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

    fn mul_sum_periodic(
        &self,
        acc: LimbsMut<'_>,
        terms: &[(Limbs<'_>, PeriodicLimbs<'_>)],
        accumulate: bool,
    ) -> Result<()> {
        let max = launch::arith::MAX_SUM_TERMS;
        let Some((a0, b0)) = terms.first() else {
            return empty_sum(accumulate);
        };
        // One launch takes up to MAX_SUM_TERMS pairs laid out alike (every
        // `a_t` as `a0`, every `b_t`'s stored limbs as `b0`'s), the later
        // launches added in; anything else a launch per term.
        let alike = terms.iter().all(|(a, b)| {
            a.positions == a0.positions
                && a.moduli == a0.moduli
                && b.limbs.positions == b0.limbs.positions
                && b.limbs.moduli == b0.limbs.moduli
        });
        let per_launch = if alike { max } else { 1 };
        if terms.len() > per_launch {
            let mut acc = acc;
            for (i, chunk) in terms.chunks(per_launch).enumerate() {
                self.mul_sum_periodic(acc.reborrow(), chunk, accumulate || i > 0)?;
            }
            return Ok(());
        }
        same_length(acc.len(), a0.len())?;
        same_length(acc.len(), b0.len())?;
        let mut touched: Vec<&Buffer> = Vec::with_capacity(2 * terms.len() + 1);
        touched.push(&*acc.buffer);
        for (a, b) in terms {
            touched.push(a.buffer);
            touched.push(b.limbs.buffer);
        }
        let _guard = self.allocator.prepare(&touched)?;
        let (_, ma) = self.read_view(a0)?;
        let mb = self.limb_map(b0.limbs.positions, b0.limbs.moduli)?;
        let a = terms
            .iter()
            .map(|(a, _)| self.read_view(a).map(|v| v.0))
            .collect::<Result<Vec<u64>>>()?;
        let b = terms
            .iter()
            .map(|(_, b)| {
                b.check(self.degree)?;
                address(b.limbs.buffer)
            })
            .collect::<Result<Vec<u64>>>()?;
        let gaps: Vec<u32> = terms.iter().map(|(_, b)| b.log_gap).collect();
        let (xo, mo) = self.write_view(&acc)?;
        // SAFETY: as `binary`; `acc` is none of the operands (it is borrowed
        // mutably, they are not), and every operand holds its map's limbs
        // (`b_t`'s of N >> gap words, checked above).
        unsafe {
            launch::arith::mul_sum_async(
                &self.kernels,
                StreamId::Compute,
                (xo, &mo),
                (&a, &ma),
                (&b, &mb, &gaps),
                accumulate,
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
                (xo, &mo),
                &s,
                self.consts()?,
                self.n(),
            )
        }?;
        Ok(())
    }

    fn scalar_mul_add_assign(
        &self,
        acc: LimbsMut<'_>,
        x: Limbs<'_>,
        scalars: &[u64],
    ) -> Result<()> {
        same_length(x.len(), scalars.len())?;
        same_length(x.len(), acc.len())?;
        let _guard = self.allocator.prepare(&[x.buffer, acc.buffer])?;
        let (xa, xm) = self.read_view(&x)?;
        let (oa, om) = self.write_view(&acc)?;
        let s = self.scalars(acc.moduli, scalars)?;
        // SAFETY: as `binary_assign`; `x` is another buffer than `acc`
        // (a shared and a mutable borrow); the scalars are reduced by
        // `shoup`.
        unsafe {
            launch::arith::scalar_mul_add_async(
                &self.kernels,
                StreamId::Compute,
                (oa, &om),
                (xa, &xm),
                &s,
                self.consts()?,
                self.n(),
            )
        }?;
        Ok(())
    }

    fn scalar(&self, op: BinaryOp, x: Limbs<'_>, scalars: &[u64], out: LimbsMut<'_>) -> Result<()> {
        same_length(x.len(), scalars.len())?;
        same_length(x.len(), out.len())?;
        let _guard = self.allocator.prepare(&[x.buffer, out.buffer])?;
        let (xa, xm) = self.read_view(&x)?;
        let (oa, om) = self.write_view(&out)?;
        let s = self.scalars(out.moduli, scalars)?;
        // SAFETY: as `binary`; each output limb is written from the input
        // limb of the same index only.
        unsafe {
            launch::arith::scalar_async(
                &self.kernels,
                StreamId::Compute,
                op_code(op),
                (oa, &om),
                (xa, &xm),
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
        self.mod_down_one(x, p_count, None, out)
    }

    fn mod_down_add(
        &self,
        x: Limbs<'_>,
        p_count: usize,
        addend: Addend<'_>,
        out: LimbsMut<'_>,
    ) -> Result<()> {
        self.mod_down_one(x, p_count, Some(addend), out)
    }

    fn mod_down_pair(
        &self,
        x: [Limbs<'_>; 2],
        p_count: usize,
        addend: [Option<Addend<'_>>; 2],
        out: [LimbsMut<'_>; 2],
    ) -> Result<()> {
        if self.mod_down_parts(&x, p_count, &addend, &out)? {
            return Ok(());
        }
        for ((x, addend), out) in x.into_iter().zip(addend).zip(out) {
            self.mod_down_one(x, p_count, addend, out)?;
        }
        Ok(())
    }

    fn mod_down_many(
        &self,
        x: &[Limbs<'_>],
        p_count: usize,
        addend: &[Option<Addend<'_>>],
        out: &mut [LimbsMut<'_>],
    ) -> Result<()> {
        if addend.len() != x.len() || out.len() != x.len() || p_count == 0 {
            return mod_down_by_parts(self, x, p_count, addend, out);
        }
        // As many parts per launch as the conversion's limb map holds.
        let per = (launch::MAX_LIMBS / p_count).clamp(1, launch::ntt::MAX_PARTS);
        for ((xs, adds), outs) in x
            .chunks(per)
            .zip(addend.chunks(per))
            .zip(out.chunks_mut(per))
        {
            if !self.mod_down_parts(xs, p_count, adds, outs)? {
                mod_down_by_parts(self, xs, p_count, adds, outs)?;
            }
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
        let g = g.reduced(self.degree)?;
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

    /// Stand-alone `out += σ_g(x)`: rotated into scratch, then added (a
    /// ModDown reads a rotated addend in its epilogue instead).
    fn add_automorphism_assign(
        &self,
        out: LimbsMut<'_>,
        x: Limbs<'_>,
        g: GaloisElement,
    ) -> Result<()> {
        same_length(x.len(), out.len())?;
        let moduli = out.moduli;
        let mut rotated = self.scratch(out.len(), x.is_sensitive())?;
        self.automorphism(x, g, LimbsMut::whole(&mut rotated, moduli)?)?;
        self.binary_assign(BinaryOp::Add, out, Limbs::whole(&rotated, moduli)?)
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

    /// On the device: one thread per ChaCha block of eight coefficients.
    fn uniform_from_seed(&self, seed: &UniformSeed, digit: usize, out: LimbsMut<'_>) -> Result<()> {
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
                &launch_seed(seed),
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
        seed: &UniformSeed,
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
            return crate::backend::expand_by_parts(self, compact, gap, out);
        }
        let map = self.limb_map(o0.positions, o0.moduli)?;
        // A polynomial in X^gap with few points: a transform of N/gap points,
        // its values repeated (`ntt::forward_subring`), for a diagonal of
        // period 32 at FGb 64 points a limb instead of 2^16.
        let points = self.degree / gap.max(1);
        let periodic = gap > 1 && points <= launch::encode::MAX_PERIODIC_POINTS as usize;
        let batch = launch::ntt::MAX_PARTS.min(launch::encode::MAX_EXPAND_PARTS);
        for (sources, outs) in compact.chunks(batch).zip(out.chunks(batch)) {
            // Declared before any address is read (streamed diagonals).
            let mut touched: Vec<&Buffer> = sources.to_vec();
            touched.extend(outs.iter().map(|o| &*o.buffer));
            let _guard = self.allocator.prepare(&touched)?;
            let addresses = outs
                .iter()
                .map(|o| Ok(self.write_view(o)?.0))
                .collect::<Result<Vec<u64>>>()?;
            if periodic {
                self.expand_periodic_raw(&addresses, sources, gap, &map, true)?;
                continue;
            }
            let words = self.compact_sources(&addresses, sources, gap)?;
            // The expansion happens as the transform loads its points: the
            // coefficient form is never written.
            self.ntt_forward_raw(
                (&addresses, &map),
                ForwardSource::Compact {
                    src: first(&words, sources.len())?,
                    log_gap: gap.trailing_zeros(),
                },
                ForwardEpilogue::Store,
            )?;
        }
        Ok(())
    }

    fn expand_periodic(
        &self,
        compact: &[&Buffer],
        gap: usize,
        moduli: &[usize],
        out: &mut [&mut Buffer],
    ) -> Result<()> {
        super::super::periodic_shape(compact, gap, moduli, out, self.degree)?;
        let map = self.limb_map(crate::backend::contiguous(0, moduli.len())?, moduli)?;
        let batch = launch::encode::MAX_EXPAND_PARTS;
        for (sources, outs) in compact.chunks(batch).zip(out.chunks(batch)) {
            let mut touched: Vec<&Buffer> = sources.to_vec();
            touched.extend(outs.iter().map(|o| &**o));
            let _guard = self.allocator.prepare(&touched)?;
            let addresses = outs
                .iter()
                .map(|o| address(o))
                .collect::<Result<Vec<u64>>>()?;
            self.expand_periodic_raw(&addresses, sources, gap, &map, false)?;
        }
        Ok(())
    }
}
