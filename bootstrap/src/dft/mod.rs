//! The homomorphic DFTs of bootstrapping as level-collapsed linear
//! transforms: SlotToCoeff (the decoding map `E`) and CoeffToSlot (its
//! inverse), factored into radix-2 butterflies over the rotation group and
//! merged into a few sparse factors given by their diagonals.
//!
//! # The factorisation
//!
//! With `n` slots, hemem's encoding ([`hemem_ckks::encoding::SpecialFft`])
//! reads slot `j` as `z_j = Σ_{k<n} u_k ζ_j^k`, `ζ_j = ω^{5^j}`,
//! `ω = e^{iπ/(2n)}`, `u_k = c_k + i·c_{k+n}`: `z = E·u`. Splitting `u` into
//! even and odd halves and using `ζ_{j+n/2} = −ζ_j` (because
//! `5^{n/2} ≡ 1 + 2n mod 4n`) gives
//!
//! `E_n = B_n · (I_2 ⊗ E_{n/2}) · Π_n`, `B_n = [[I, D], [I, −D]]`,
//! `D = diag(ω^{5^j})_{j<n/2}`,
//!
//! with `Π_n` the even/odd split (the recursion of Chen–Chillotti–Song,
//! ePrint 2018/1043, and Han–Hhan–Cheon, ePrint 2018/1073). Unrolled, `E_n·R = S_m ⋯ S_1` where `R` is the bit-reversal
//! permutation (`(R·u)_k = u_{bitrev(k)}`) and stage `S_s = I_{n/2^s} ⊗
//! B_{2^s}` has three nonzero diagonals, `0` and `±2^{s−1}` (two when
//! `2^{s−1} = n/2`). So
//!
//! - **SlotToCoeff** evaluates `E·R = S_m ⋯ S_1` on the slots: its output
//!   plaintext has coefficients `u = R·w`, the input slots in bit-reversed
//!   order, and no permutation is ever evaluated;
//! - **CoeffToSlot** evaluates `(E·R)^{-1} = S_1^{-1} ⋯ S_m^{-1}`
//!   (`B^{-1} = ½[[I, I], [D^{-1}, −D^{-1}]]`, so the `1/n` is built in): fed
//!   the slots `E·u` of a plaintext `u`, it returns `R·u`, which for the
//!   output of SlotToCoeff is `R·R·w = w` in natural order.
//!
//! Merging `r` consecutive stages gives a factor whose diagonals are the
//! multiples of `2^a` in `(−2^{a+r}, 2^{a+r})` (modulo `n`): 63 for a radix
//! of `2^5`, 32 for the top group where `+n/2 ≡ −n/2`. The grouping follows
//! Lattigo's `circuits/ckks/dft` (CoeffToSlot takes the larger radices
//! first, SlotToCoeff the mirror image), so both directions use the same
//! diagonal index sets and the rotation keys are shared.

use std::collections::BTreeSet;

use hemem_ckks::encoding::least_period;
use hemem_ckks::progress::{NoProgress, Progress};
use num_complex::Complex64;

use crate::hoisting::{ExtendedArithmetic, Hoisting};
use crate::linear_transform::{BsgsIndex, DiagonalStorage, LinearTransform};
use crate::{Error, Result};

mod encoded;
mod matrix;
#[cfg(test)]
mod tests;

pub use encoded::EncodedDft;
pub use matrix::{DiagonalMatrix, bit_reverse, bit_reversed, decoding_matrix};
use matrix::{check_slots, stage};

/// Which homomorphic DFT.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DftKind {
    /// SlotToCoeff: `E·R`, slots `w` to a plaintext with coefficients
    /// `R·w` (real parts at `k`, imaginary parts at `k + n`).
    SlotToCoeff,
    /// CoeffToSlot: `(E·R)^{-1}`, slots `E·u` to `R·u`.
    CoeffToSlot,
}

/// One DFT factor's diagonals in bytes, kept compact and kept encoded
/// ([`HomomorphicDft::encoded_sizes`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FactorBytes {
    /// How many diagonals (all of one encoded size).
    pub diagonals: u64,
    /// One word per coefficient of one period
    /// ([`DiagonalStorage::Compact`], [`hemem_ckks::encoding::least_period`]).
    pub compact: u64,
    /// The longest least period of the factor's diagonals, in slots: the
    /// slot count for the factor applied first in CoeffToSlot, less for
    /// the others (a diagonal of `I ⊗ B_{2^s}` stages repeats every `2^s`
    /// slots), whose compact diagonals expand by a transform of `2·period`
    /// points instead of `N` (about a tenth of the time at FGb).
    pub period: u64,
    /// Every limb of the factor's level, in NTT form
    /// ([`DiagonalStorage::Encoded`]): `N` words a limb, or the `2·period`
    /// distinct values of a diagonal kept periodic
    /// ([`hemem_ckks::encoding::CompactPlaintext::expands_periodic`]).
    pub encoded: u64,
}

/// A level-collapsed homomorphic DFT: the factors of `E·R` (SlotToCoeff) or
/// of its inverse (CoeffToSlot), in the order they are applied, one level
/// each.
#[derive(Clone, Debug, PartialEq)]
pub struct HomomorphicDft {
    kind: DftKind,
    n: usize,
    log_radices: Vec<u32>,
    factors: Vec<DiagonalMatrix>,
}

impl HomomorphicDft {
    /// The `log2` radices of each factor, in application order, for
    /// `log_slots` stages collapsed into `levels` factors: Lattigo's rule
    /// (`⌈remaining / factors left⌉`, CoeffToSlot largest first,
    /// SlotToCoeff mirrored), e.g. `6, 5, 5` for CoeffToSlot at `2^16`
    /// slots and `5, 5, 6` for SlotToCoeff. Factors of radix `2^0` (more
    /// levels than stages) are identities that still take a level, so the
    /// level schedule does not depend on the slot count.
    pub fn default_log_radices(kind: DftKind, log_slots: u32, levels: usize) -> Vec<u32> {
        let mut remaining = log_slots;
        let mut out = Vec::with_capacity(levels);
        for i in 0..levels {
            let left = (levels - i) as u32;
            let r = remaining.div_ceil(left);
            out.push(r);
            remaining -= r;
        }
        if kind == DftKind::SlotToCoeff {
            out.reverse();
        }
        out
    }

    /// The DFT of `kind` on `n` slots with the given `log2` radices per
    /// factor (application order; they must add up to `log2 n`).
    ///
    /// # Errors
    /// [`Error::InvalidSlots`], [`Error::InvalidRadices`].
    pub fn new(kind: DftKind, n: usize, log_radices: &[u32]) -> Result<Self> {
        check_slots(n)?;
        let log_n = n.trailing_zeros();
        // In u64: radices near u32::MAX must not wrap to a valid sum.
        let wide: u64 = log_radices.iter().map(|&r| u64::from(r)).sum();
        let sum = u32::try_from(wide).unwrap_or(u32::MAX);
        if wide != u64::from(log_n) {
            return Err(Error::InvalidRadices {
                sum,
                log_slots: log_n,
            });
        }
        // Stages in application order.
        let stages: Vec<(u32, bool)> = match kind {
            DftKind::SlotToCoeff => (1..=log_n).map(|s| (s, false)).collect(),
            DftKind::CoeffToSlot => (1..=log_n).rev().map(|s| (s, true)).collect(),
        };
        let mut factors = Vec::with_capacity(log_radices.len());
        let mut next = stages.iter();
        for &r in log_radices {
            let mut factor = DiagonalMatrix::identity(n)?;
            for _ in 0..r {
                if let Some(&(s, inverse)) = next.next() {
                    factor = stage(n, s, inverse)?.compose(&factor)?;
                }
            }
            factors.push(factor);
        }
        Ok(Self {
            kind,
            n,
            log_radices: log_radices.to_vec(),
            factors,
        })
    }

    /// The DFT of `kind` on `n` slots in `levels` factors with
    /// [`HomomorphicDft::default_log_radices`].
    ///
    /// # Errors
    /// [`Error::InvalidSlots`].
    pub fn with_levels(kind: DftKind, n: usize, levels: usize) -> Result<Self> {
        check_slots(n)?;
        let radices = Self::default_log_radices(kind, n.trailing_zeros(), levels);
        Self::new(kind, n, &radices)
    }

    /// Which DFT.
    pub fn kind(&self) -> DftKind {
        self.kind
    }

    /// The slot count.
    pub fn slots(&self) -> usize {
        self.n
    }

    /// The `log2` radix of each factor (application order).
    pub fn log_radices(&self) -> &[u32] {
        &self.log_radices
    }

    /// The factors, in application order.
    pub fn factors(&self) -> &[DiagonalMatrix] {
        &self.factors
    }

    /// The number of factors (levels consumed).
    pub fn levels(&self) -> usize {
        self.factors.len()
    }

    /// Multiplies factor `index` by `c`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for an index beyond the factors.
    pub fn scale_factor(&mut self, index: usize, c: Complex64) -> Result<()> {
        let factor = self.factors.get_mut(index).ok_or(Error::InvalidParameter {
            name: "index",
            reason: "beyond the DFT's factors",
        })?;
        factor.scale(c);
        Ok(())
    }

    /// Multiplies the whole transform by the positive real `c`, spread
    /// evenly as `c^{1/levels}` per factor (as Lattigo spreads `1/n` and
    /// `1/(2K)`).
    ///
    /// # Errors
    /// [`Error::NonFinite`] unless `c` is finite and positive.
    pub fn scale_evenly(&mut self, c: f64) -> Result<()> {
        if !(c.is_finite() && c > 0.0) || self.factors.is_empty() {
            return Err(Error::NonFinite);
        }
        let per = c.powf(1.0 / self.factors.len() as f64);
        for f in &mut self.factors {
            f.scale(Complex64::new(per, 0.0));
        }
        Ok(())
    }

    /// Applies the factors in f64 (the plaintext reference).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`].
    pub fn apply(&self, z: &[Complex64]) -> Result<Vec<Complex64>> {
        let mut v = z.to_vec();
        for f in &self.factors {
            v = f.apply(&v)?;
        }
        Ok(v)
    }

    /// The BSGS linear transforms of the factors (application order), with
    /// Lattigo's baby-step choice for `log_bsgs_ratio` (see
    /// [`LinearTransform::new`]).
    pub fn linear_transforms(&self, log_bsgs_ratio: i32) -> Vec<LinearTransform> {
        self.factors
            .iter()
            .map(|f| LinearTransform::new(f.clone(), log_bsgs_ratio))
            .collect()
    }

    /// The nonzero rotation steps (in `0..n`) the evaluation needs: baby and
    /// giant steps of every factor.
    pub fn rotation_indices(&self, log_bsgs_ratio: i32) -> BTreeSet<usize> {
        self.factor_rotations(log_bsgs_ratio)
            .into_iter()
            .flatten()
            .collect()
    }

    /// Each factor's rotation steps at `log_bsgs_ratio`, in order: what
    /// [`Self::linear_transforms`] would split, from the diagonals' indices
    /// alone (no matrix is copied: a key request asks this for several
    /// ratios).
    pub fn factor_rotations(&self, log_bsgs_ratio: i32) -> Vec<BTreeSet<usize>> {
        self.factors
            .iter()
            .map(|f| BsgsIndex::with_ratio(&f.indices(), f.slots(), log_bsgs_ratio).rotations())
            .collect()
    }

    /// The bytes of each factor's diagonals encoded from `start_level` down
    /// (factor `i` at level `start_level − i`), kept compact and kept
    /// encoded — over `Q_l ∪ P` where `hoisting` resolves to double
    /// hoisting — for limbs of `limb_bytes` and `special_primes` special
    /// primes: what [`DiagonalStorage::Mixed`] and the bootstrapper's
    /// [`DiagonalStorage::Fit`] weigh before anything is encoded.
    pub fn encoded_sizes(
        &self,
        start_level: usize,
        log_bsgs_ratio: i32,
        hoisting: Hoisting,
        limb_bytes: u64,
        special_primes: usize,
    ) -> Vec<FactorBytes> {
        self.linear_transforms(log_bsgs_ratio)
            .iter()
            .enumerate()
            .map(|(i, lt)| {
                let level = start_level.saturating_sub(i);
                let hoisting = lt.hoisting_at(hoisting, level, special_primes);
                let diagonals = lt.matrix().diagonals().len() as u64;
                // One word per coefficient of one period: 2·period of them
                // (`encode_compact`, one period encoded).
                let periods: Vec<u64> = lt
                    .matrix()
                    .diagonals()
                    .values()
                    .map(|d| least_period(d) as u64)
                    .collect();
                let encoded = periods
                    .iter()
                    .map(|&p| {
                        LinearTransform::encoded_diagonal_bytes(
                            level,
                            hoisting,
                            limb_bytes,
                            special_primes,
                            p as usize,
                        )
                    })
                    .sum();
                FactorBytes {
                    diagonals,
                    compact: periods.iter().map(|p| 2 * p * 8).sum(),
                    period: periods.iter().copied().max().unwrap_or(0),
                    encoded,
                }
            })
            .collect()
    }

    /// Encodes every factor: factor `i` at level `start_level − i` with
    /// diagonal scale `diagonal_scales[i]`, as encoded plaintexts
    /// ([`DiagonalStorage::Encoded`]).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] unless there is one scale per factor,
    /// [`Error::LevelTooLow`] if the levels run below 0, and encoding errors.
    pub fn encode<A: ExtendedArithmetic>(
        &self,
        ops: &A,
        start_level: usize,
        diagonal_scales: &[f64],
        log_bsgs_ratio: i32,
    ) -> Result<EncodedDft<A::Plain, A::Compact>> {
        self.encode_with(
            ops,
            start_level,
            diagonal_scales,
            log_bsgs_ratio,
            DiagonalStorage::Encoded,
        )
    }

    /// As [`HomomorphicDft::encode`], keeping the diagonals as `storage`
    /// says.
    ///
    /// # Errors
    /// As [`HomomorphicDft::encode`].
    pub fn encode_with<A: ExtendedArithmetic>(
        &self,
        ops: &A,
        start_level: usize,
        diagonal_scales: &[f64],
        log_bsgs_ratio: i32,
        storage: DiagonalStorage,
    ) -> Result<EncodedDft<A::Plain, A::Compact>> {
        self.encode_hoisted(
            ops,
            start_level,
            diagonal_scales,
            log_bsgs_ratio,
            storage,
            Hoisting::default(),
        )
    }

    /// As [`HomomorphicDft::encode_with`], every factor evaluated with
    /// `hoisting` ([`LinearTransform::encode_hoisted`]).
    ///
    /// # Errors
    /// As [`HomomorphicDft::encode`].
    pub fn encode_hoisted<A: ExtendedArithmetic>(
        &self,
        ops: &A,
        start_level: usize,
        diagonal_scales: &[f64],
        log_bsgs_ratio: i32,
        storage: DiagonalStorage,
        hoisting: Hoisting,
    ) -> Result<EncodedDft<A::Plain, A::Compact>> {
        self.encode_hoisted_with_progress(
            ops,
            start_level,
            diagonal_scales,
            log_bsgs_ratio,
            storage,
            hoisting,
            &NoProgress,
        )
    }

    /// As [`HomomorphicDft::encode_hoisted`], reporting each factor encoded
    /// to `progress` (one step per factor).
    ///
    /// # Errors
    /// As [`HomomorphicDft::encode`].
    #[allow(clippy::too_many_arguments)]
    pub fn encode_hoisted_with_progress<A: ExtendedArithmetic>(
        &self,
        ops: &A,
        start_level: usize,
        diagonal_scales: &[f64],
        log_bsgs_ratio: i32,
        storage: DiagonalStorage,
        hoisting: Hoisting,
        progress: &dyn Progress,
    ) -> Result<EncodedDft<A::Plain, A::Compact>> {
        if diagonal_scales.len() != self.factors.len() {
            return Err(Error::LengthMismatch {
                expected: self.factors.len(),
                actual: diagonal_scales.len(),
            });
        }
        if start_level + 1 < self.factors.len() {
            return Err(Error::LevelTooLow {
                operation: "DFT encoding",
                needed: self.factors.len() - 1,
                level: start_level,
            });
        }
        // Mixed: diagonals kept encoded, factor after factor, while their
        // bytes fit (each factor gets the room the ones before it left).
        let sizes = self.encoded_sizes(
            start_level,
            log_bsgs_ratio,
            hoisting,
            ops.limb_bytes(),
            ops.special_primes(),
        );
        let mut encoded = 0u64;
        let total = self.factors.len() as u64;
        progress.update(0, total);
        let transforms = self
            .linear_transforms(log_bsgs_ratio)
            .iter()
            .zip(diagonal_scales)
            .zip(&sizes)
            .enumerate()
            .map(|(i, ((lt, &scale), size))| {
                let level = start_level - i;
                let storage = match storage {
                    DiagonalStorage::Mixed { encoded_bytes } => DiagonalStorage::Mixed {
                        encoded_bytes: encoded_bytes.saturating_sub(encoded),
                    },
                    other => other,
                };
                let transform = lt.encode_hoisted(ops, level, scale, storage, hoisting)?;
                // The transform reports what it kept.
                encoded += match transform.storage() {
                    DiagonalStorage::Encoded => size.encoded,
                    DiagonalStorage::Mixed { encoded_bytes } => encoded_bytes,
                    DiagonalStorage::Fit | DiagonalStorage::Compact => 0,
                };
                progress.update(i as u64 + 1, total);
                Ok(transform)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(EncodedDft {
            kind: self.kind,
            transforms,
        })
    }
}

/// The rotation keys (nonzero steps in `0..n`) a set of DFTs needs
/// together.
pub fn rotation_keys(dfts: &[&HomomorphicDft], log_bsgs_ratio: i32) -> BTreeSet<usize> {
    dfts.iter()
        .flat_map(|d| d.rotation_indices(log_bsgs_ratio))
        .collect()
}
