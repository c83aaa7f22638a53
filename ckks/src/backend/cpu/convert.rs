//! Rescale, ModDown and ModUp on the CPU.

use rayon::prelude::*;

use super::CpuBackend;
use super::slices::{read_limbs, write_limbs};
use crate::backend::{Limbs, LimbsMut};
use crate::{Error, Result};

/// `out_i = q_l^{-1} (x_i − [x_l]_centred) mod q_i`, all in NTT form.
pub(super) fn rescale(backend: &CpuBackend, x: Limbs<'_>, out: LimbsMut<'_>) -> Result<()> {
    let n = backend.degree;
    let (last_index, kept) = x.moduli.split_last().ok_or(Error::LengthMismatch {
        expected: 1,
        actual: 0,
    })?;
    if kept != out.moduli {
        return Err(Error::LengthMismatch {
            expected: kept.len(),
            actual: out.len(),
        });
    }
    let q_last = backend.modulus(*last_index)?;
    let inputs = read_limbs(&x, n)?;
    let (last, kept_inputs) = inputs.split_last().ok_or(Error::LengthMismatch {
        expected: 1,
        actual: 0,
    })?;
    let mut top = last.to_vec();
    backend.plan(*last_index)?.inverse(&mut top)?;
    let centered: Vec<i64> = top.iter().map(|&v| q_last.center(v)).collect();
    let plans = kept
        .iter()
        .map(|&i| backend.plan(i))
        .collect::<Result<Vec<_>>>()?;
    let outputs = write_limbs(out, n)?;
    outputs
        .into_par_iter()
        .zip(kept_inputs.par_iter())
        .zip(plans)
        .try_for_each(|((o, x), plan)| {
            let m = *plan.modulus();
            for (o, &c) in o.iter_mut().zip(&centered) {
                *o = m.reduce_i64(c);
            }
            plan.forward(o)?;
            let inv = m.inv(q_last.value()).ok_or(Error::NotCoprime {
                first: m.value(),
                second: q_last.value(),
            })?;
            let inv = m.shoup(inv);
            for (o, &xv) in o.iter_mut().zip(x.iter()) {
                *o = m.mul_shoup(m.sub(xv, *o), &inv);
            }
            Ok(())
        })
}

/// `out = round(x / P)`: the last `p_count` limbs of `x` are the P part.
pub(super) fn mod_down(
    backend: &CpuBackend,
    x: Limbs<'_>,
    p_count: usize,
    out: LimbsMut<'_>,
) -> Result<()> {
    let n = backend.degree;
    let q_count =
        x.len()
            .checked_sub(p_count)
            .filter(|_| p_count > 0)
            .ok_or(Error::LengthMismatch {
                expected: p_count + 1,
                actual: x.len(),
            })?;
    let (q_moduli, p_moduli) = x.moduli.split_at(q_count);
    if q_moduli != out.moduli {
        return Err(Error::LengthMismatch {
            expected: q_count,
            actual: out.len(),
        });
    }
    let tables = backend.conversion(p_moduli, q_moduli)?;
    let inputs = read_limbs(&x, n)?;
    let (q_inputs, p_inputs) = inputs.split_at(q_count);
    let p_plans = p_moduli
        .iter()
        .map(|&i| backend.plan(i))
        .collect::<Result<Vec<_>>>()?;
    let p_coeff = p_inputs
        .par_iter()
        .zip(p_plans)
        .map(|(limb, plan)| {
            let mut c = limb.to_vec();
            plan.inverse(&mut c)?;
            Ok(c)
        })
        .collect::<Result<Vec<_>>>()?;
    let p_refs: Vec<&[u64]> = p_coeff.iter().map(Vec::as_slice).collect();
    let mut outputs = write_limbs(out, n)?;
    tables.converter.convert_centered(&p_refs, &mut outputs)?;
    let q_plans = q_moduli
        .iter()
        .map(|&i| backend.plan(i))
        .collect::<Result<Vec<_>>>()?;
    outputs
        .into_par_iter()
        .zip(q_inputs.par_iter())
        .zip(q_plans)
        .zip(tables.p_inv.par_iter())
        .try_for_each(|(((o, x), plan), p_inv)| {
            plan.forward(o)?;
            let m = *plan.modulus();
            for (o, &xv) in o.iter_mut().zip(x.iter()) {
                *o = m.mul_shoup(m.sub(xv, *o), p_inv);
            }
            Ok(())
        })
}

/// ModUp of one digit to every modulus of `out` (NTT form).
pub(super) fn mod_up(
    backend: &CpuBackend,
    digit: Limbs<'_>,
    digit_ntt: Option<Limbs<'_>>,
    out: LimbsMut<'_>,
) -> Result<()> {
    let n = backend.degree;
    if let Some(d) = &digit_ntt
        && d.moduli != digit.moduli
    {
        return Err(Error::LengthMismatch {
            expected: digit.len(),
            actual: d.len(),
        });
    }
    let digit_coeff = read_limbs(&digit, n)?;
    let digit_eval = digit_ntt.as_ref().map(|d| read_limbs(d, n)).transpose()?;
    let targets: Vec<usize> = out
        .moduli
        .iter()
        .copied()
        .filter(|m| !digit.moduli.contains(m))
        .collect();
    let out_moduli = out.moduli;
    let mut outputs: Vec<Option<&mut [u64]>> = write_limbs(out, n)?.into_iter().map(Some).collect();

    // The digit's own limbs: copied (already in NTT form, or transformed here).
    for (slot, &modulus) in outputs.iter_mut().zip(out_moduli) {
        if let Some(pos) = digit.moduli.iter().position(|&m| m == modulus) {
            let o = slot.take().ok_or(Error::LengthMismatch {
                expected: 1,
                actual: 0,
            })?;
            match digit_eval.as_ref().and_then(|e| e.get(pos)) {
                Some(eval) => o.copy_from_slice(eval),
                None => {
                    let src = digit_coeff.get(pos).ok_or(Error::LengthMismatch {
                        expected: pos + 1,
                        actual: 0,
                    })?;
                    o.copy_from_slice(src);
                    backend.plan(modulus)?.forward(o)?;
                }
            }
        }
    }
    if targets.is_empty() {
        return Ok(());
    }
    let mut converted: Vec<&mut [u64]> = outputs.into_iter().flatten().collect();
    let tables = backend.conversion(digit.moduli, &targets)?;
    // The centred, exact conversion: the digit is lifted as its centred
    // representative. The approximate one lifts `d + u·Q_D` with `d` in
    // `[0, Q_D)` and `u` in `[0, α)`, a DC offset of about `α·Q_D/2` that
    // the key's noise turns into a low-frequency error — concentrated on the
    // slots whose roots lie nearest 1 (measured: 20× the typical key-switch
    // noise in slot 0, which cost FGb bootstrapping 2 bits).
    tables
        .converter
        .convert_centered(&digit_coeff, &mut converted)?;
    let plans = targets
        .iter()
        .map(|&i| backend.plan(i))
        .collect::<Result<Vec<_>>>()?;
    converted
        .into_par_iter()
        .zip(plans)
        .try_for_each(|(o, plan)| plan.forward(o))
}
