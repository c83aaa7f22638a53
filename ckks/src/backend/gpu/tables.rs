//! The per-context constants the GPU kernels read: the modulus table, the
//! twiddle tables (built from the CPU plans' ψ, so both backends share one
//! root and one output order), and base-conversion tables by source and
//! target moduli. All `Constant`-class buffers.

use hemem_gpu_kernels::launch::ckks::{ModConst, Scalars};
use hemem_memory::{Allocator, Buffer, MemoryClass};

use crate::ntt::{NttPlan, TwiddleTables};
use crate::rns::BaseConverter;
use crate::zq::Modulus;
use crate::{Error, Result};

/// Uploads `words` into a new `Constant` buffer.
pub(super) fn upload_constant(allocator: &Allocator, words: &[u64]) -> Result<Buffer> {
    let mut buffer = allocator.allocate(MemoryClass::Constant, words.len().max(1) * 8)?;
    allocator.upload(&mut buffer, 0, words)?;
    Ok(buffer)
}

/// The modulus table as words (five per modulus, the layout of `ModConst`).
pub(super) fn modulus_table(moduli: &[Modulus]) -> Vec<u64> {
    moduli
        .iter()
        .flat_map(|m| {
            let c = ModConst::new(m.value());
            [c.q, c.mu, c.ratio_lo, c.ratio_hi, u64::from(c.bits)]
        })
        .collect()
}

/// Twiddles of every modulus: `[forward, forward shoup, inverse, inverse
/// shoup]` × N words each, moduli in global order; and `(N^{-1}, shoup)`
/// pairs.
pub(super) fn twiddle_tables(plans: &[NttPlan]) -> (Vec<u64>, Vec<u64>) {
    let mut twiddles = Vec::new();
    let mut n_inv = Vec::new();
    for plan in plans {
        let t = TwiddleTables::new(plan);
        twiddles.extend(t.forward.iter().map(|w| w.value()));
        twiddles.extend(t.forward.iter().map(|w| w.quotient()));
        twiddles.extend(t.inverse.iter().map(|w| w.value()));
        twiddles.extend(t.inverse.iter().map(|w| w.quotient()));
        n_inv.extend([t.n_inv.value(), t.n_inv.quotient()]);
    }
    (twiddles, n_inv)
}

/// A base conversion on the device: the kernel's table and, for ModDown,
/// `P^{-1} mod q_i` per target.
#[derive(Debug)]
pub(super) struct DeviceConversion {
    pub(super) table: Buffer,
    pub(super) p_inv: Scalars,
}

/// Builds the tables of the conversion from `from` to `to` (the same
/// [`BaseConverter`] the CPU uses) and uploads them.
pub(super) fn conversion(
    allocator: &Allocator,
    from: &[Modulus],
    to: &[Modulus],
) -> Result<DeviceConversion> {
    let converter = BaseConverter::new(from, to)?;
    let mut words = Vec::new();
    words.extend(converter.q_hat_inv().iter().map(|w| w.value()));
    words.extend(converter.q_hat_inv().iter().map(|w| w.quotient()));
    words.extend(converter.inv_q().iter().map(|x| x.to_bits()));
    words.extend_from_slice(converter.q_mod());
    for row in converter.q_hat() {
        words.extend_from_slice(row);
    }
    let pairs = to
        .iter()
        .zip(converter.q_mod())
        .map(|(m, &p_mod)| {
            let inv = m.inv(p_mod).ok_or(Error::NotCoprime {
                first: m.value(),
                second: p_mod,
            })?;
            let s = m.shoup(inv);
            Ok((s.value(), s.quotient()))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(DeviceConversion {
        table: upload_constant(allocator, &words)?,
        p_inv: Scalars::new(&pairs)?,
    })
}
