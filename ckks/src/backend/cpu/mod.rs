//! The CPU backend: concrete-ntt for the transforms, rayon across limbs.

mod convert;
mod slices;
mod sum;

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use hemem_memory::{Allocator, Buffer};
use rayon::prelude::*;

use self::slices::{host_compact_words, read_limbs, write_limbs};
use self::sum::{Factors, sum_limb};
use super::{Backend, BinaryOp, Device, Limbs, LimbsMut, PeriodicLimbs};
use crate::ntt::{GaloisElement, NttPlan, automorphism_permutation};
use crate::rns::BaseConverter;
use crate::sampling::{SeededUniform, UniformSeed};
use crate::zq::Modulus;
use crate::{Error, Result};

/// Tables for one ModDown (or one ModUp) between two sets of moduli.
#[derive(Debug)]
struct ConversionTables {
    converter: BaseConverter,
    /// `P^{-1} mod q_i` for each target modulus (ModDown only).
    p_inv: Vec<crate::zq::ShoupConstant>,
}

/// Source and target moduli (global indices) of a conversion.
type ConversionKey = (Vec<usize>, Vec<usize>);

/// The CPU implementation of [`Backend`]. Thread-safe; operations run on the
/// rayon pool (set `RAYON_NUM_THREADS` to bound it).
#[derive(Debug)]
pub struct CpuBackend {
    degree: usize,
    moduli: Vec<Modulus>,
    plans: Vec<NttPlan>,
    allocator: Allocator,
    conversions: RwLock<HashMap<ConversionKey, Arc<ConversionTables>>>,
    permutations: RwLock<HashMap<u64, Arc<Vec<usize>>>>,
}

impl CpuBackend {
    /// A backend for the global modulus table `moduli` at degree `n`, with a
    /// host allocator.
    ///
    /// # Errors
    /// [`Error::NttUnsupported`] if a modulus has no NTT of degree `n`.
    pub fn new(n: usize, moduli: &[Modulus]) -> Result<Self> {
        Self::with_allocator(n, moduli, Allocator::host())
    }

    /// As [`CpuBackend::new`], with the given allocator.
    ///
    /// # Errors
    /// [`Error::NttUnsupported`] if a modulus has no NTT of degree `n`.
    pub fn with_allocator(n: usize, moduli: &[Modulus], allocator: Allocator) -> Result<Self> {
        let plans = moduli
            .par_iter()
            .map(|&m| NttPlan::new(n, m))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            degree: n,
            moduli: moduli.to_vec(),
            plans,
            allocator,
            conversions: RwLock::new(HashMap::new()),
            permutations: RwLock::new(HashMap::new()),
        })
    }

    /// The NTT plans, by global modulus index.
    pub fn plans(&self) -> &[NttPlan] {
        &self.plans
    }

    fn plan(&self, index: usize) -> Result<&NttPlan> {
        self.plans.get(index).ok_or(Error::LengthMismatch {
            expected: self.plans.len(),
            actual: index.saturating_add(1),
        })
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

    fn moduli_of(&self, indices: &[usize]) -> Result<Vec<Modulus>> {
        indices.iter().map(|&i| self.modulus(i)).collect()
    }

    /// Each modulus of `indices` with its NTT's `psi`: what
    /// [`subring_values`] needs per limb.
    fn subring_targets(&self, indices: &[usize]) -> Result<Vec<(Modulus, u64)>> {
        indices
            .iter()
            .map(|&i| Ok((self.modulus(i)?, self.plan(i)?.psi())))
            .collect()
    }

    /// Cached conversion tables from `from` to `to` (global indices); with
    /// `mod_down`, also `P^{-1}` modulo each target.
    fn conversion(&self, from: &[usize], to: &[usize]) -> Result<Arc<ConversionTables>> {
        let key = (from.to_vec(), to.to_vec());
        if let Some(t) = self
            .conversions
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
        {
            return Ok(Arc::clone(t));
        }
        let from_m = self.moduli_of(from)?;
        let to_m = self.moduli_of(to)?;
        let converter = BaseConverter::new(&from_m, &to_m)?;
        let p_inv = to_m
            .iter()
            .zip(converter.q_mod())
            .map(|(m, &p_mod)| {
                m.inv(p_mod)
                    .map(|inv| m.shoup(inv))
                    .ok_or(Error::NotCoprime {
                        first: m.value(),
                        second: p_mod,
                    })
            })
            .collect::<Result<Vec<_>>>()?;
        let tables = Arc::new(ConversionTables { converter, p_inv });
        self.conversions
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, Arc::clone(&tables));
        Ok(tables)
    }

    fn permutation(&self, g: GaloisElement) -> Result<Arc<Vec<usize>>> {
        let g = g.reduced(self.degree)?;
        if let Some(p) = self
            .permutations
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&g.0)
        {
            return Ok(Arc::clone(p));
        }
        let perm = Arc::new(automorphism_permutation(self.degree, g));
        self.permutations
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(g.0, Arc::clone(&perm));
        Ok(perm)
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
}

#[inline]
/// The transform at `words.len()` points of the polynomial in
/// `X^{n/words.len()}` whose coefficients are `words` (`f64` bits), reduced
/// modulo `m` ([`crate::ntt::forward_subring`]).
fn subring_values(words: &[u64], m: &Modulus, psi: u64, n: usize) -> Result<Vec<u64>> {
    let mut values = words
        .iter()
        .map(|&bits| {
            m.reduce_f64(f64::from_bits(bits))
                .ok_or(crate::OperandError::NonFiniteValue.into())
        })
        .collect::<Result<Vec<u64>>>()?;
    crate::ntt::forward_subring(&mut values, psi, n, m)?;
    Ok(values)
}

fn apply(m: &Modulus, op: BinaryOp, a: u64, b: u64) -> u64 {
    match op {
        BinaryOp::Add => m.add(a, b),
        BinaryOp::Sub => m.sub(a, b),
        BinaryOp::Mul => m.mul(a, b),
    }
}

impl Backend for CpuBackend {
    fn device(&self) -> Device {
        Device::Cpu
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

    fn write(&self, dst: LimbsMut<'_>, src: &[u64]) -> Result<()> {
        let n = self.degree;
        Self::same_length(dst.len() * n, src.len())?;
        let out = write_limbs(dst, n)?;
        for (o, s) in out.into_iter().zip(src.chunks_exact(n)) {
            o.copy_from_slice(s);
        }
        Ok(())
    }

    fn read(&self, src: Limbs<'_>, dst: &mut [u64]) -> Result<()> {
        let n = self.degree;
        Self::same_length(src.len() * n, dst.len())?;
        for (s, d) in read_limbs(&src, n)?
            .into_iter()
            .zip(dst.chunks_exact_mut(n))
        {
            d.copy_from_slice(s);
        }
        Ok(())
    }

    fn copy(&self, src: Limbs<'_>, dst: LimbsMut<'_>) -> Result<()> {
        let n = self.degree;
        Self::same_length(src.len(), dst.len())?;
        let s = read_limbs(&src, n)?;
        let d = write_limbs(dst, n)?;
        d.into_par_iter()
            .zip(s)
            .for_each(|(d, s)| d.copy_from_slice(s));
        Ok(())
    }

    fn ntt_forward(&self, x: LimbsMut<'_>) -> Result<()> {
        let n = self.degree;
        let plans = x
            .moduli
            .iter()
            .map(|&i| self.plan(i))
            .collect::<Result<Vec<_>>>()?;
        let limbs = write_limbs(x, n)?;
        limbs
            .into_par_iter()
            .zip(plans)
            .try_for_each(|(l, p)| p.forward(l))
    }

    fn ntt_inverse(&self, x: LimbsMut<'_>) -> Result<()> {
        let n = self.degree;
        let plans = x
            .moduli
            .iter()
            .map(|&i| self.plan(i))
            .collect::<Result<Vec<_>>>()?;
        let limbs = write_limbs(x, n)?;
        limbs
            .into_par_iter()
            .zip(plans)
            .try_for_each(|(l, p)| p.inverse(l))
    }

    fn binary(&self, op: BinaryOp, a: Limbs<'_>, b: Limbs<'_>, out: LimbsMut<'_>) -> Result<()> {
        let n = self.degree;
        Self::same_length(a.len(), b.len())?;
        Self::same_length(a.len(), out.len())?;
        let moduli = self.moduli_of(out.moduli)?;
        let (a, b) = (read_limbs(&a, n)?, read_limbs(&b, n)?);
        let out = write_limbs(out, n)?;
        out.into_par_iter()
            .zip(a)
            .zip(b)
            .zip(moduli)
            .for_each(|(((o, a), b), m)| {
                for ((o, &x), &y) in o.iter_mut().zip(a).zip(b) {
                    *o = apply(&m, op, x, y);
                }
            });
        Ok(())
    }

    fn binary_assign(&self, op: BinaryOp, acc: LimbsMut<'_>, b: Limbs<'_>) -> Result<()> {
        let n = self.degree;
        Self::same_length(acc.len(), b.len())?;
        let moduli = self.moduli_of(acc.moduli)?;
        let b = read_limbs(&b, n)?;
        let acc = write_limbs(acc, n)?;
        acc.into_par_iter()
            .zip(b)
            .zip(moduli)
            .for_each(|((o, b), m)| {
                for (o, &y) in o.iter_mut().zip(b) {
                    *o = apply(&m, op, *o, y);
                }
            });
        Ok(())
    }

    /// Up to eight terms' products summed exactly in 128 bits (each below
    /// `q² < 2^124`, with the running value below `2^128`) and reduced once,
    /// as the GPU's `mul_sum` kernel does: the residue of the sequential
    /// modular sum, with `acc` read and written once per eight terms
    /// instead of once per term.
    /// As [`Backend::mul_sum`]; a periodic operand's values are spread
    /// over each block of coefficients as it is summed.
    fn mul_sum_periodic(
        &self,
        acc: LimbsMut<'_>,
        terms: &[(Limbs<'_>, PeriodicLimbs<'_>)],
        accumulate: bool,
    ) -> Result<()> {
        if terms.is_empty() {
            return super::empty_sum(accumulate);
        }
        let n = self.degree;
        for (a, b) in terms {
            Self::same_length(acc.len(), a.len())?;
            Self::same_length(acc.len(), b.len())?;
            b.check(n)?;
        }
        let moduli = self.moduli_of(acc.moduli)?;
        let operands = terms
            .iter()
            .map(|(a, b)| {
                Ok((
                    read_limbs(a, n)?,
                    read_limbs(&b.limbs, n >> b.log_gap)?,
                    b.log_gap,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        let acc = write_limbs(acc, n)?;
        acc.into_par_iter()
            .zip(moduli)
            .enumerate()
            .for_each(|(limb, (o, m))| {
                let limbs: Vec<Factors<'_>> = operands
                    .iter()
                    .map(|(a, b, g)| {
                        (
                            a.get(limb).copied().unwrap_or_default(),
                            b.get(limb).copied().unwrap_or_default(),
                            *g,
                        )
                    })
                    .collect();
                sum_limb(o, &limbs, accumulate, &m);
            });
        Ok(())
    }

    fn mul_add_assign(&self, acc: LimbsMut<'_>, a: Limbs<'_>, b: Limbs<'_>) -> Result<()> {
        let n = self.degree;
        Self::same_length(acc.len(), a.len())?;
        Self::same_length(acc.len(), b.len())?;
        let moduli = self.moduli_of(acc.moduli)?;
        let (a, b) = (read_limbs(&a, n)?, read_limbs(&b, n)?);
        let acc = write_limbs(acc, n)?;
        acc.into_par_iter()
            .zip(a)
            .zip(b)
            .zip(moduli)
            .for_each(|(((o, a), b), m)| {
                // One reduction of x·y + acc (below q·2^64).
                for ((o, &x), &y) in o.iter_mut().zip(a).zip(b) {
                    *o = m.reduce_u128(u128::from(x) * u128::from(y) + u128::from(*o));
                }
            });
        Ok(())
    }

    fn negate(&self, x: LimbsMut<'_>) -> Result<()> {
        let n = self.degree;
        let moduli = self.moduli_of(x.moduli)?;
        let x = write_limbs(x, n)?;
        x.into_par_iter().zip(moduli).for_each(|(l, m)| {
            for v in l.iter_mut() {
                *v = m.neg(*v);
            }
        });
        Ok(())
    }

    fn scalar_assign(&self, op: BinaryOp, x: LimbsMut<'_>, scalars: &[u64]) -> Result<()> {
        let n = self.degree;
        Self::same_length(x.len(), scalars.len())?;
        let moduli = self.moduli_of(x.moduli)?;
        let x = write_limbs(x, n)?;
        x.into_par_iter()
            .zip(moduli)
            .zip(scalars)
            .for_each(|((l, m), &s)| match op {
                BinaryOp::Mul => {
                    let w = m.shoup(s);
                    for v in l.iter_mut() {
                        *v = m.mul_shoup(*v, &w);
                    }
                }
                _ => {
                    let s = m.reduce(s);
                    for v in l.iter_mut() {
                        *v = apply(&m, op, *v, s);
                    }
                }
            });
        Ok(())
    }

    fn scalar_mul_add_assign(
        &self,
        acc: LimbsMut<'_>,
        x: Limbs<'_>,
        scalars: &[u64],
    ) -> Result<()> {
        let n = self.degree;
        Self::same_length(x.len(), scalars.len())?;
        Self::same_length(x.len(), acc.len())?;
        let moduli = self.moduli_of(acc.moduli)?;
        let x = read_limbs(&x, n)?;
        let acc = write_limbs(acc, n)?;
        acc.into_par_iter()
            .zip(x)
            .zip(moduli)
            .zip(scalars)
            .for_each(|(((o, x), m), &s)| {
                let w = m.shoup(s);
                for (o, &v) in o.iter_mut().zip(x) {
                    *o = m.add(*o, m.mul_shoup(v, &w));
                }
            });
        Ok(())
    }

    fn spread_centered(&self, src: Limbs<'_>, out: LimbsMut<'_>) -> Result<()> {
        let n = self.degree;
        Self::same_length(1, src.len())?;
        let p = self.modulus(*src.moduli.first().ok_or(Error::EmptyBasis)?)?;
        let source = read_limbs(&src, n)?;
        let source = source.first().ok_or(Error::EmptyBasis)?;
        let moduli = self.moduli_of(out.moduli)?;
        let out = write_limbs(out, n)?;
        out.into_par_iter().zip(moduli).for_each(|(o, m)| {
            for (o, &v) in o.iter_mut().zip(source.iter()) {
                *o = m.reduce_i64(p.center(v));
            }
        });
        Ok(())
    }

    fn rescale(&self, x: Limbs<'_>, out: LimbsMut<'_>) -> Result<()> {
        convert::rescale(self, x, out)
    }

    fn mod_down(&self, x: Limbs<'_>, p_count: usize, out: LimbsMut<'_>) -> Result<()> {
        convert::mod_down(self, x, p_count, out)
    }

    fn mod_up(
        &self,
        digit: Limbs<'_>,
        digit_ntt: Option<Limbs<'_>>,
        out: LimbsMut<'_>,
    ) -> Result<()> {
        convert::mod_up(self, digit, digit_ntt, out)
    }

    fn automorphism(&self, x: Limbs<'_>, g: GaloisElement, out: LimbsMut<'_>) -> Result<()> {
        let n = self.degree;
        Self::same_length(x.len(), out.len())?;
        let perm = self.permutation(g)?;
        let x = read_limbs(&x, n)?;
        let out = write_limbs(out, n)?;
        out.into_par_iter().zip(x).for_each(|(o, x)| {
            for (o, &p) in o.iter_mut().zip(perm.iter()) {
                *o = x.get(p).copied().unwrap_or(0);
            }
        });
        Ok(())
    }

    fn add_automorphism_assign(
        &self,
        out: LimbsMut<'_>,
        x: Limbs<'_>,
        g: GaloisElement,
    ) -> Result<()> {
        let n = self.degree;
        Self::same_length(x.len(), out.len())?;
        let perm = self.permutation(g)?;
        let moduli = self.moduli_of(out.moduli)?;
        let x = read_limbs(&x, n)?;
        let out = write_limbs(out, n)?;
        out.into_par_iter()
            .zip(x)
            .zip(moduli)
            .for_each(|((o, x), m)| {
                for (o, &p) in o.iter_mut().zip(perm.iter()) {
                    *o = apply(&m, BinaryOp::Add, *o, x.get(p).copied().unwrap_or(0));
                }
            });
        Ok(())
    }

    /// In place, limbs and blocks of coefficients in parallel.
    fn uniform_from_seed(&self, seed: &UniformSeed, digit: usize, out: LimbsMut<'_>) -> Result<()> {
        let moduli = out.moduli;
        let limbs = write_limbs(out, self.degree)?;
        SeededUniform::new(seed).fill_limbs(digit, &self.moduli, moduli, limbs)
    }

    fn expand_coefficients(&self, compact: &Buffer, gap: usize, out: LimbsMut<'_>) -> Result<()> {
        let n = self.degree;
        let words = host_compact_words(compact, gap, n)?;
        let moduli = self.moduli_of(out.moduli)?;
        let out = write_limbs(out, n)?;
        out.into_par_iter().zip(moduli).try_for_each(|(limb, m)| {
            limb.fill(0);
            for (slot, &bits) in limb.iter_mut().step_by(gap).zip(words) {
                *slot = m
                    .reduce_f64(f64::from_bits(bits))
                    .ok_or(crate::OperandError::NonFiniteValue)?;
            }
            Ok(())
        })
    }

    /// For `gap > 1` the words are the coefficients of a polynomial in
    /// `X^gap`, whose transform is `N/gap` values each repeated `gap`
    /// times ([`crate::ntt::forward_subring`]): each limb is reduced and
    /// transformed at `N/gap` points and spread, instead of expanded and
    /// transformed at `N` — the same limbs, bit for bit.
    fn expand_compact(
        &self,
        compact: &[&Buffer],
        gap: usize,
        out: &mut [LimbsMut<'_>],
    ) -> Result<()> {
        if gap <= 1 {
            return super::expand_by_parts(self, compact, gap, out);
        }
        if compact.len() != out.len() {
            return Err(Error::LengthMismatch {
                expected: compact.len(),
                actual: out.len(),
            });
        }
        let n = self.degree;
        for (c, o) in compact.iter().zip(out.iter_mut()) {
            let words = host_compact_words(c, gap, n)?;
            let targets = self.subring_targets(o.moduli)?;
            let limbs = write_limbs(o.reborrow(), n)?;
            limbs
                .into_par_iter()
                .zip(targets)
                .try_for_each(|(limb, (m, psi))| -> Result<()> {
                    let values = subring_values(words, &m, psi, n)?;
                    for (run, &v) in limb.chunks_exact_mut(gap).zip(&values) {
                        run.fill(v);
                    }
                    Ok(())
                })?;
        }
        Ok(())
    }

    /// The transform of [`Backend::expand_compact`] at `N/gap` points,
    /// kept unspread.
    fn expand_periodic(
        &self,
        compact: &[&Buffer],
        gap: usize,
        moduli: &[usize],
        out: &mut [&mut Buffer],
    ) -> Result<()> {
        let n = self.degree;
        let points = super::periodic_shape(compact, gap, moduli, out, n)?;
        // Every part shares `moduli`: their targets are looked up once.
        let targets = self.subring_targets(moduli)?;
        for (c, o) in compact.iter().zip(out.iter_mut()) {
            let words = host_compact_words(c, gap, n)?;
            o.host_words_mut()?
                .par_chunks_exact_mut(points)
                .zip(&targets)
                .try_for_each(|(limb, (m, psi))| -> Result<()> {
                    limb.copy_from_slice(&subring_values(words, m, *psi, n)?);
                    Ok(())
                })?;
        }
        Ok(())
    }

    /// Fused over the digits: the products of a block of coefficients are
    /// summed in 128 bits and reduced once (one Barrett reduction when
    /// `dnum · q < 2^64`, as for every preset).
    fn key_switch_inner_product(
        &self,
        digits: &[Limbs<'_>],
        b: &[Limbs<'_>],
        a: &[Limbs<'_>],
        out0: LimbsMut<'_>,
        out1: LimbsMut<'_>,
    ) -> Result<()> {
        self.inner_product(digits, None, b, a, out0, out1)
    }

    /// The digits read through the permutation as the sums are formed,
    /// block by block (no rotated copy of every digit).
    fn key_switch_inner_product_galois(
        &self,
        digits: &[Limbs<'_>],
        g: GaloisElement,
        b: &[Limbs<'_>],
        a: &[Limbs<'_>],
        out0: LimbsMut<'_>,
        out1: LimbsMut<'_>,
    ) -> Result<()> {
        let perm = self.permutation(g)?;
        self.inner_product(digits, Some(&perm), b, a, out0, out1)
    }
}

impl CpuBackend {
    /// The key-switching inner product, the digits read through `perm`
    /// where given (`digit[perm[j]]` for output word `j`).
    fn inner_product(
        &self,
        digits: &[Limbs<'_>],
        perm: Option<&[usize]>,
        b: &[Limbs<'_>],
        a: &[Limbs<'_>],
        out0: LimbsMut<'_>,
        out1: LimbsMut<'_>,
    ) -> Result<()> {
        let n = self.degree;
        if digits.is_empty() || digits.len() != b.len() || digits.len() != a.len() {
            return Err(Error::LengthMismatch {
                expected: digits.len(),
                actual: b.len().min(a.len()),
            });
        }
        for view in digits.iter().chain(b).chain(a) {
            if view.moduli != out0.moduli {
                return Err(Error::LengthMismatch {
                    expected: out0.len(),
                    actual: view.len(),
                });
            }
        }
        Self::same_length(out0.len(), out1.len())?;
        let moduli = self.moduli_of(out0.moduli)?;
        fn read<'a>(views: &[Limbs<'a>], n: usize) -> Result<Vec<Vec<&'a [u64]>>> {
            views.iter().map(|v| read_limbs(v, n)).collect()
        }
        let (d, kb, ka) = (read(digits, n)?, read(b, n)?, read(a, n)?);
        let out0 = write_limbs(out0, n)?;
        let out1 = write_limbs(out1, n)?;
        out0.into_par_iter()
            .zip(out1)
            .zip(moduli)
            .enumerate()
            .for_each(|(limb, ((o0, o1), m))| {
                fn pick<'a>(v: &[Vec<&'a [u64]>], limb: usize) -> Vec<&'a [u64]> {
                    v.iter()
                        .map(|limbs| limbs.get(limb).copied().unwrap_or_default())
                        .collect()
                }
                let (dl, bl, al) = (pick(&d, limb), pick(&kb, limb), pick(&ka, limb));
                // Passes of two digits between two reductions of the sums:
                // `2·passes` products below `(q − 1)²` and a reduced running
                // value below `q` stay below 2^128 (32 passes at a 61-bit
                // prime, 8 at a 62-bit one; capped where `q` is tiny).
                let q1 = u128::from(m.value() - 1).max(1);
                let passes = ((u128::MAX - q1) / (q1 * q1) / 2).clamp(1, 1 << 16) as usize;
                const BLOCK: usize = 512;
                let mut acc0 = [0u128; BLOCK];
                let mut acc1 = [0u128; BLOCK];
                // Zeroed when dropped: the rotated words of a sensitive
                // digit are as sensitive (docs/SECURITY.md).
                let mut gathered =
                    zeroize::Zeroizing::new(vec![
                        [0u64; BLOCK];
                        if perm.is_some() { dl.len() } else { 0 }
                    ]);
                for (start, (o0, o1)) in o0
                    .chunks_mut(BLOCK)
                    .zip(o1.chunks_mut(BLOCK))
                    .enumerate()
                    .map(|(i, c)| (i * BLOCK, c))
                {
                    let len = o0.len();
                    let (s0, s1) = (
                        acc0.get_mut(..len).unwrap_or_default(),
                        acc1.get_mut(..len).unwrap_or_default(),
                    );
                    s0.fill(0);
                    s1.fill(0);
                    fn cut<'a>(v: &[&'a [u64]], range: std::ops::Range<usize>) -> Vec<&'a [u64]> {
                        v.iter()
                            .map(|l| l.get(range.clone()).unwrap_or_default())
                            .collect()
                    }
                    let range = start..start + len;
                    // Through the permutation: each digit's words for this
                    // block gathered first.
                    if let Some(perm) = perm {
                        let indices = perm.get(range.clone()).unwrap_or_default();
                        for (buffer, digit) in gathered.iter_mut().zip(&dl) {
                            for (w, &p) in buffer.iter_mut().zip(indices) {
                                *w = digit.get(p).copied().unwrap_or(0);
                            }
                        }
                    }
                    let x = match perm {
                        Some(_) => gathered
                            .iter()
                            .map(|w| w.get(..len).unwrap_or_default())
                            .collect(),
                        None => cut(&dl, range.clone()),
                    };
                    let (y0, y1) = (cut(&bl, range.clone()), cut(&al, range));
                    // Two digits per pass: their products are added in
                    // registers, the running sums read and written once per
                    // pair.
                    for (pass, ((x, y0), y1)) in
                        x.chunks(2).zip(y0.chunks(2)).zip(y1.chunks(2)).enumerate()
                    {
                        if pass > 0 && pass % passes == 0 {
                            for s in s0.iter_mut().chain(s1.iter_mut()) {
                                *s = u128::from(m.reduce_u128(*s));
                            }
                        }
                        match (x, y0, y1) {
                            ([x, u], [y0, v0], [y1, v1]) => {
                                for (((s0, s1), (&x, &u)), ((&y0, &v0), (&y1, &v1))) in s0
                                    .iter_mut()
                                    .zip(s1.iter_mut())
                                    .zip(x.iter().zip(*u))
                                    .zip(y0.iter().zip(*v0).zip(y1.iter().zip(*v1)))
                                {
                                    let (x, u) = (u128::from(x), u128::from(u));
                                    *s0 += x * u128::from(y0) + u * u128::from(v0);
                                    *s1 += x * u128::from(y1) + u * u128::from(v1);
                                }
                            }
                            ([x], [y0], [y1]) => {
                                for ((((s0, s1), &x), &y0), &y1) in
                                    s0.iter_mut().zip(s1.iter_mut()).zip(*x).zip(*y0).zip(*y1)
                                {
                                    let x = u128::from(x);
                                    *s0 += x * u128::from(y0);
                                    *s1 += x * u128::from(y1);
                                }
                            }
                            _ => {}
                        }
                    }
                    for ((o, &s), (p, &t)) in o0.iter_mut().zip(&*s0).zip(o1.iter_mut().zip(&*s1)) {
                        // One Barrett step reduces any 128-bit sum.
                        *o = m.reduce_u128(s);
                        *p = m.reduce_u128(t);
                    }
                }
            });
        Ok(())
    }
}
