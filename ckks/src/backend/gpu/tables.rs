//! The per-context constants the GPU kernels read: the modulus table, the
//! twiddle tables (built from the CPU plans' ψ, so both backends share one
//! root and one output order), and base-conversion tables by source and
//! target moduli. All `Constant`-class buffers.

use hemem_gpu_kernels::launch::ckks::ModConst;
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

/// Twiddles of every modulus: N forward `(W, W shoup)` pairs then N
/// inverse pairs (4N words), moduli in global order; and `(N^{-1}, shoup)`
/// pairs. One 16-byte load fetches a twiddle with its quotient.
pub(super) fn twiddle_tables(plans: &[NttPlan]) -> (Vec<u64>, Vec<u64>) {
    let mut twiddles = Vec::new();
    let mut n_inv = Vec::new();
    for plan in plans {
        let t = TwiddleTables::new(plan);
        twiddles.extend(t.forward.iter().flat_map(|w| [w.value(), w.quotient()]));
        twiddles.extend(t.inverse.iter().flat_map(|w| [w.value(), w.quotient()]));
        n_inv.extend([t.n_inv.value(), t.n_inv.quotient()]);
    }
    (twiddles, n_inv)
}

/// A base conversion on the device: the kernel's table, for ModDown
/// `(P^{-1} mod q_i, shoup)` per target (the fused NTT epilogue's scales),
/// and `(N^{-1}·q_hat_inv_i mod q_i, shoup)` per source (the inverse NTT's
/// last multiplication when it yields the conversion's `y_i` directly).
#[derive(Debug)]
pub(super) struct DeviceConversion {
    pub(super) table: Buffer,
    pub(super) scale: Buffer,
    pub(super) y_scale: Buffer,
}

/// `(s_i, s_i shoup)` pairs of reduced scalars, one per modulus.
pub(super) fn scale_pairs(moduli: &[Modulus], values: &[u64]) -> Vec<u64> {
    moduli
        .iter()
        .zip(values)
        .flat_map(|(m, &v)| {
            let s = m.shoup(v);
            [s.value(), s.quotient()]
        })
        .collect()
}

/// Builds the tables of the conversion from `from` to `to` at degree `n`
/// (the same [`BaseConverter`] the CPU uses) and uploads them.
pub(super) fn conversion(
    allocator: &Allocator,
    n: usize,
    from: &[Modulus],
    to: &[Modulus],
) -> Result<DeviceConversion> {
    let (table, scale) = conversion_words(from, to)?;
    let y_scale = y_scale_words(n, from)?;
    Ok(DeviceConversion {
        table: upload_constant(allocator, &table)?,
        scale: upload_constant(allocator, &scale)?,
        y_scale: upload_constant(allocator, &y_scale)?,
    })
}

/// `(N^{-1}·q_hat_inv_i mod q_i, shoup)` for each source `q_i` of the
/// conversion from `from`: an inverse NTT that multiplies by these instead
/// of `N^{-1}` leaves `y_i = [x_i·q_hat_inv_i]_{q_i}`, the first step of the
/// conversion, computed once per coefficient instead of once per target.
pub(super) fn y_scale_words(n: usize, from: &[Modulus]) -> Result<Vec<u64>> {
    // Any target will do: q_hat_inv depends on the sources only.
    let converter = BaseConverter::new(from, from)?;
    let values = from
        .iter()
        .zip(converter.q_hat_inv())
        .map(|(m, w)| {
            let n_inv = m.inv(m.reduce(n as u64)).ok_or(Error::NotCoprime {
                first: m.value(),
                second: n as u64,
            })?;
            Ok(m.mul(n_inv, w.value()))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(scale_pairs(from, &values))
}

/// The words of a conversion's kernel table (`3k + m + m·k + m`: q_hat_inv,
/// its Shoup quotients, 1/q_i as f64 bits, −Q mod p_j, q_hat row by target,
/// then −p_j^{-1} mod 2^64) and of its `(P^{-1} mod p_j, shoup)` pairs.
/// Where the sources' primes sum below 2^64, −Q mod p_j and the q_hat rows
/// are in Montgomery form and the kernels finish each sum with one
/// Montgomery reduction; elsewhere the last words are 0 (never a valid
/// −p_j^{-1}, which is odd) and the kernels take a Barrett step.
pub(super) fn conversion_words(from: &[Modulus], to: &[Modulus]) -> Result<(Vec<u64>, Vec<u64>)> {
    let converter = BaseConverter::new(from, to)?;
    let mut words = Vec::new();
    words.extend(converter.q_hat_inv().iter().map(|w| w.value()));
    words.extend(converter.q_hat_inv().iter().map(|w| w.quotient()));
    words.extend(converter.inv_q().iter().map(|x| x.to_bits()));
    let (neg_q_mod, q_hat, p_inv_neg) = match converter.montgomery_form() {
        Some(form) => (form.neg_q_mod, form.q_hat, Some(form.p_inv_neg)),
        None => (converter.neg_q_mod(), converter.q_hat(), None),
    };
    words.extend_from_slice(neg_q_mod);
    words.extend(q_hat.iter().flatten());
    match p_inv_neg {
        Some(p_inv_neg) => words.extend_from_slice(p_inv_neg),
        None => words.extend(std::iter::repeat_n(0, to.len())),
    }
    let inverses = to
        .iter()
        .zip(converter.q_mod())
        .map(|(m, &p_mod)| {
            m.inv(p_mod).ok_or(Error::NotCoprime {
                first: m.value(),
                second: p_mod,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((words, scale_pairs(to, &inverses)))
}
