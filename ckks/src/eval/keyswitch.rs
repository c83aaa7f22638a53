//! Hybrid key switching (Han–Ki, ePrint 2019/688, §3; the RNS form of
//! Halevi–Polyakov–Shoup's hybrid method): gadget decomposition into
//! `dnum` digits, ModUp of each digit to `Q_l ∪ P`, inner product with the
//! switching key, ModDown by `P`.
//!
//! The decomposition is a value of its own ([`Decomposition`]) so that many
//! rotations of one ciphertext can share it (hoisting, Halevi–Shoup 2018).

use hemem_memory::MemoryClass;

use crate::backend::{Addend, Limbs};
use crate::keys::SwitchingKey;
use crate::ntt::GaloisElement;
use crate::params::{Level, Parameters};
use crate::poly::{Ntt, RnsPoly};
use crate::{Error, Result};

/// The gadget digits of a polynomial at level `l`, each raised to
/// `Q_l ∪ P` in NTT form (`Temporary` memory).
#[derive(Debug)]
pub struct Decomposition {
    pub(crate) digits: Vec<RnsPoly<Ntt>>,
    pub(crate) level: Level,
}

impl Decomposition {
    /// The level of the decomposed polynomial.
    pub fn level(&self) -> Level {
        self.level
    }

    /// The number of digits, `⌈(l+1)/α⌉`.
    pub fn digits(&self) -> usize {
        self.digits.len()
    }
}

/// Decomposes `c` (NTT form over `Q_l`) and raises each digit to `Q_l ∪ P`.
pub(crate) fn decompose(
    params: &Parameters,
    c: &RnsPoly<Ntt>,
    level: Level,
) -> Result<Decomposition> {
    let backend = c.backend();
    let q_count = level.primes();
    if c.limb_count() != q_count {
        return Err(Error::LengthMismatch {
            expected: q_count,
            actual: c.limb_count(),
        });
    }
    let qp = params.qp_indices(level)?;
    let mut digits = (0..params.digits_at(level))
        .map(|_| RnsPoly::<Ntt>::allocate(backend, &qp, MemoryClass::Temporary, false))
        .collect::<Result<Vec<_>>>()?;
    let mut outs = digits
        .iter_mut()
        .map(RnsPoly::limbs_mut)
        .collect::<Result<Vec<_>>>()?;
    backend.decompose_mod_up(c.limbs()?, params.alpha(), &mut outs)?;
    drop(outs);
    Ok(Decomposition { digits, level })
}

/// The first `count` polynomials' limbs at storage `positions`, moduli `moduli`.
fn select_limbs<'a>(
    polys: &'a [RnsPoly<Ntt>],
    count: usize,
    positions: &'a [usize],
    moduli: &'a [usize],
) -> Vec<Limbs<'a>> {
    polys
        .iter()
        .take(count)
        .map(|p| Limbs {
            buffer: p.buffer(),
            positions,
            moduli,
        })
        .collect()
}

/// The key-switching inner product of a decomposition with `key` (after the
/// automorphism `galois`, for hoisted rotations), **without** the ModDown:
/// `(acc0, acc1)` over `Q_l ∪ P` (NTT form, `Temporary` memory) with
/// `acc0 + acc1·s ≈ P·c·s'` (or `P·σ_g(c)·s'`). Double hoisting keeps this
/// form ([`super::ExtendedCiphertext`]); [`apply_key`] divides it by `P`.
pub(crate) fn inner_product(
    params: &Parameters,
    decomposition: &Decomposition,
    key: &SwitchingKey,
    galois: Option<GaloisElement>,
) -> Result<(RnsPoly<Ntt>, RnsPoly<Ntt>)> {
    let level = decomposition.level;
    let qp = params.qp_indices(level)?;
    let first = decomposition.digits.first().ok_or(Error::EmptyBasis)?;
    let backend = first.backend();
    let count = decomposition.digits.len();
    // The key holds Q_{key level} ∪ P: select Q_l ∪ P by position.
    let (positions, key_digits) = key.positions_at(level)?;
    if key.b.len() < count || key_digits != count {
        return Err(Error::LengthMismatch {
            expected: count,
            actual: key.b.len(),
        });
    }
    let digits: Vec<Limbs<'_>> = decomposition
        .digits
        .iter()
        .map(RnsPoly::limbs)
        .collect::<Result<_>>()?;
    let b = select_limbs(&key.b, count, &positions, &qp);
    let mut acc0 = RnsPoly::<Ntt>::allocate(backend, &qp, MemoryClass::Temporary, false)?;
    let mut acc1 = RnsPoly::<Ntt>::allocate(backend, &qp, MemoryClass::Temporary, false)?;
    match (&key.a, galois) {
        // A compressed key: `a_j` comes from the seed inside the inner
        // product (on the GPU: one kernel, `a_j` never stored).
        (None, galois) => backend.key_switch_inner_product_seeded(
            &digits,
            galois,
            &b,
            &key.seed,
            acc0.limbs_mut()?,
            acc1.limbs_mut()?,
        )?,
        // Hoisted rotation: the automorphism is applied to the digits as the
        // inner product reads them.
        (Some(a), Some(g)) => backend.key_switch_inner_product_galois(
            &digits,
            g,
            &b,
            &select_limbs(a, count, &positions, &qp),
            acc0.limbs_mut()?,
            acc1.limbs_mut()?,
        )?,
        (Some(a), None) => backend.key_switch_inner_product(
            &digits,
            &b,
            &select_limbs(a, count, &positions, &qp),
            acc0.limbs_mut()?,
            acc1.limbs_mut()?,
        )?,
    }
    Ok((acc0, acc1))
}

/// Applies `key` to a decomposition (after the automorphism `galois`, for
/// hoisted rotations): returns `(k0, k1)` over `Q_l`, in `class` memory,
/// with `k0 + k1·s ≈ c·s'` (or `σ_g(c)·s'`), plus `add[0]` and `add[1]`
/// when given, read through the automorphism `add_galois` where given (a
/// rotation's `σ_g(c0)`, never rotated into a temporary of its own; the
/// additions that end relinearisation and rotations, done by
/// [`crate::backend::Backend::mod_down_add`]).
pub(crate) fn apply_key(
    params: &Parameters,
    decomposition: &Decomposition,
    key: &SwitchingKey,
    galois: Option<GaloisElement>,
    class: MemoryClass,
    add: [Option<&RnsPoly<Ntt>>; 2],
    add_galois: Option<GaloisElement>,
) -> Result<(RnsPoly<Ntt>, RnsPoly<Ntt>)> {
    let (acc0, acc1) = inner_product(params, decomposition, key, galois)?;
    let backend = acc0.backend();
    let q = params.q_indices(decomposition.level)?;
    let p_count = params.p_moduli().len();
    let mut k0 = RnsPoly::<Ntt>::allocate(backend, &q, class, false)?;
    let mut k1 = RnsPoly::<Ntt>::allocate(backend, &q, class, false)?;
    let [add0, add1] = add;
    for (k, extra) in [(&k0, add0), (&k1, add1)] {
        if let Some(e) = extra {
            k.check_compatible(e)?;
        }
    }
    backend.mod_down_pair(
        [acc0.limbs()?, acc1.limbs()?],
        p_count,
        [
            add0.map(RnsPoly::limbs)
                .transpose()?
                .map(|l| Addend::through(l, add_galois)),
            add1.map(RnsPoly::limbs)
                .transpose()?
                .map(|l| Addend::through(l, add_galois)),
        ],
        [k0.limbs_mut()?, k1.limbs_mut()?],
    )?;
    Ok((k0, k1))
}
