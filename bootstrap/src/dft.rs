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

#![expect(
    clippy::indexing_slicing,
    reason = "butterfly and diagonal index arithmetic is modulo n by construction"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::f64::consts::PI;

use hemem_ckks::encoding::least_period;
use hemem_ckks::progress::{NoProgress, Progress};
use num_complex::Complex64;

use crate::hoisting::{ExtendedArithmetic, Hoisting};
use crate::linear_transform::{DiagonalStorage, EncodedLinearTransform, LinearTransform};
use crate::{Error, Result};

/// Reverses the low `bits` bits of `x`.
pub fn bit_reverse(x: usize, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        x.reverse_bits() >> (usize::BITS - bits)
    }
}

/// `R·v`: entry `k` of the result is `v[bitrev(k)]` (an involution).
pub fn bit_reversed<T: Copy>(v: &[T]) -> Vec<T> {
    let bits = v.len().trailing_zeros();
    (0..v.len()).map(|k| v[bit_reverse(k, bits)]).collect()
}

fn check_slots(n: usize) -> Result<()> {
    if n == 0 || !n.is_power_of_two() {
        return Err(Error::InvalidSlots {
            slots: n,
            max: 1 << (usize::BITS - 1),
        });
    }
    Ok(())
}

/// A square `n × n` complex matrix on slot vectors, stored by its nonzero
/// diagonals: `diagonal[d][j] = M[j][(j + d) mod n]`, so that
/// `M·z = Σ_d diagonal[d] ⊙ rot_d(z)` with `rot_d` the left rotation by `d`.
#[derive(Clone, Debug, PartialEq)]
pub struct DiagonalMatrix {
    n: usize,
    diagonals: BTreeMap<usize, Vec<Complex64>>,
}

impl DiagonalMatrix {
    /// The zero matrix on `n` slots.
    ///
    /// # Errors
    /// [`Error::InvalidSlots`] unless `n` is a power of two.
    pub fn zero(n: usize) -> Result<Self> {
        check_slots(n)?;
        Ok(Self {
            n,
            diagonals: BTreeMap::new(),
        })
    }

    /// The identity on `n` slots.
    ///
    /// # Errors
    /// [`Error::InvalidSlots`] unless `n` is a power of two.
    pub fn identity(n: usize) -> Result<Self> {
        let mut m = Self::zero(n)?;
        m.diagonals.insert(0, vec![Complex64::new(1.0, 0.0); n]);
        Ok(m)
    }

    /// The matrix with the given diagonals (indices taken modulo `n`,
    /// repeated indices added).
    ///
    /// # Errors
    /// [`Error::InvalidSlots`], [`Error::LengthMismatch`] for a diagonal
    /// whose length is not `n`.
    pub fn from_diagonals<I>(n: usize, diagonals: I) -> Result<Self>
    where
        I: IntoIterator<Item = (i64, Vec<Complex64>)>,
    {
        let mut m = Self::zero(n)?;
        for (index, values) in diagonals {
            m.add_to_diagonal(index, &values)?;
        }
        Ok(m)
    }

    /// The matrix of a dense row-major `n × n` array (exact zero diagonals
    /// are left out).
    ///
    /// # Errors
    /// [`Error::InvalidSlots`], [`Error::LengthMismatch`] for ragged rows.
    pub fn from_dense(rows: &[Vec<Complex64>]) -> Result<Self> {
        let n = rows.len();
        let mut m = Self::zero(n)?;
        for row in rows {
            if row.len() != n {
                return Err(Error::LengthMismatch {
                    expected: n,
                    actual: row.len(),
                });
            }
        }
        for d in 0..n {
            let diag: Vec<Complex64> = (0..n).map(|j| rows[j][(j + d) % n]).collect();
            if diag.iter().any(|z| *z != Complex64::default()) {
                m.diagonals.insert(d, diag);
            }
        }
        Ok(m)
    }

    /// The slot count `n`.
    pub fn slots(&self) -> usize {
        self.n
    }

    /// The nonzero diagonals by index in `0..n`.
    pub fn diagonals(&self) -> &BTreeMap<usize, Vec<Complex64>> {
        &self.diagonals
    }

    /// The indices of the nonzero diagonals, ascending in `0..n`.
    pub fn indices(&self) -> Vec<usize> {
        self.diagonals.keys().copied().collect()
    }

    /// Adds `values` to diagonal `index` (taken modulo `n`).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] unless `values` has `n` entries.
    pub fn add_to_diagonal(&mut self, index: i64, values: &[Complex64]) -> Result<()> {
        if values.len() != self.n {
            return Err(Error::LengthMismatch {
                expected: self.n,
                actual: values.len(),
            });
        }
        let d = index.rem_euclid(self.n as i64) as usize;
        let entry = self
            .diagonals
            .entry(d)
            .or_insert_with(|| vec![Complex64::default(); values.len()]);
        for (a, b) in entry.iter_mut().zip(values) {
            *a += b;
        }
        Ok(())
    }

    /// Multiplies every entry by `c`.
    pub fn scale(&mut self, c: Complex64) {
        for diag in self.diagonals.values_mut() {
            for z in diag.iter_mut() {
                *z *= c;
            }
        }
    }

    /// `M·z`, computed diagonal by diagonal.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] unless `z` has `n` entries.
    pub fn apply(&self, z: &[Complex64]) -> Result<Vec<Complex64>> {
        let n = self.n;
        if z.len() != n {
            return Err(Error::LengthMismatch {
                expected: n,
                actual: z.len(),
            });
        }
        let mut out = vec![Complex64::default(); n];
        for (&d, diag) in &self.diagonals {
            for (j, o) in out.iter_mut().enumerate() {
                *o += diag[j] * z[(j + d) % n];
            }
        }
        Ok(out)
    }

    /// The product `self · first` (apply `first`, then `self`):
    /// `diag_{d1+d2}[j] += self.diag_{d1}[j] · first.diag_{d2}[j + d1]`.
    ///
    /// # Errors
    /// [`Error::SlotMismatch`] for matrices of different sizes.
    pub fn compose(&self, first: &Self) -> Result<Self> {
        if self.n != first.n {
            return Err(Error::SlotMismatch {
                left: self.n,
                right: first.n,
            });
        }
        let n = self.n;
        let mut out = Self::zero(n)?;
        for (&d1, a) in &self.diagonals {
            for (&d2, b) in &first.diagonals {
                let d = (d1 + d2) % n;
                let entry = out
                    .diagonals
                    .entry(d)
                    .or_insert_with(|| vec![Complex64::default(); n]);
                for (j, e) in entry.iter_mut().enumerate() {
                    *e += a[j] * b[(j + d1) % n];
                }
            }
        }
        out.diagonals
            .retain(|_, diag| diag.iter().any(|z| *z != Complex64::default()));
        Ok(out)
    }

    /// The dense row-major form (for tests and small sizes).
    pub fn to_dense(&self) -> Vec<Vec<Complex64>> {
        let n = self.n;
        let mut rows = vec![vec![Complex64::default(); n]; n];
        for (&d, diag) in &self.diagonals {
            for (j, row) in rows.iter_mut().enumerate() {
                row[(j + d) % n] += diag[j];
            }
        }
        rows
    }
}

/// Which homomorphic DFT.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DftKind {
    /// SlotToCoeff: `E·R`, slots `w` to a plaintext with coefficients
    /// `R·w` (real parts at `k`, imaginary parts at `k + n`).
    SlotToCoeff,
    /// CoeffToSlot: `(E·R)^{-1}`, slots `E·u` to `R·u`.
    CoeffToSlot,
}

/// The twiddle of stage `s` (block size `m = 2^s`): `ω_m^{5^i}`, `ω_m =
/// e^{iπ/(2m)}`, for `i < m/2`.
fn stage_twiddles(s: u32) -> Vec<Complex64> {
    let m = 1usize << s;
    let four_m = 4 * m as u64;
    let mut power = 1u64;
    (0..m / 2)
        .map(|_| {
            let t = Complex64::from_polar(1.0, PI * power as f64 / (2 * m) as f64);
            power = power * 5 % four_m;
            t
        })
        .collect()
}

/// Stage `S_s = I_{n/2^s} ⊗ B_{2^s}` of `E·R` (or its inverse).
fn stage(n: usize, s: u32, inverse: bool) -> Result<DiagonalMatrix> {
    let m = 1usize << s;
    let h = m / 2;
    let zeta = stage_twiddles(s);
    let zero = Complex64::default();
    let mut main = vec![zero; n];
    let mut up = vec![zero; n];
    let mut down = vec![zero; n];
    let half = Complex64::new(0.5, 0.0);
    for block in (0..n).step_by(m) {
        for (i, &z) in zeta.iter().enumerate() {
            let top = block + i;
            let bottom = top + h;
            if inverse {
                // out_top = (x_top + x_bottom)/2,
                // out_bottom = ζ̄(x_top − x_bottom)/2.
                main[top] = half;
                up[top] = half;
                down[bottom] = half * z.conj();
                main[bottom] = -half * z.conj();
            } else {
                // out_top = x_top + ζ x_bottom, out_bottom = x_top − ζ x_bottom.
                main[top] = Complex64::new(1.0, 0.0);
                up[top] = z;
                down[bottom] = Complex64::new(1.0, 0.0);
                main[bottom] = -z;
            }
        }
    }
    DiagonalMatrix::from_diagonals(n, [(0, main), (h as i64, up), (-(h as i64), down)])
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
        let sum: u32 = log_radices.iter().sum();
        if sum != log_n {
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
        self.linear_transforms(log_bsgs_ratio)
            .iter()
            .flat_map(LinearTransform::rotations)
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

/// A [`HomomorphicDft`] whose factors are encoded (one
/// [`EncodedLinearTransform`] per level): what the bootstrapper keeps as
/// `BootstrapConstant` memory, as encoded plaintexts `P` or compact
/// encodings `C`.
#[derive(Clone, Debug)]
pub struct EncodedDft<P, C = P> {
    kind: DftKind,
    transforms: Vec<EncodedLinearTransform<P, C>>,
}

impl<P, C> EncodedDft<P, C> {
    /// Which DFT.
    pub fn kind(&self) -> DftKind {
        self.kind
    }

    /// The encoded factors in application order.
    pub fn transforms(&self) -> &[EncodedLinearTransform<P, C>] {
        &self.transforms
    }

    /// The number of encoded diagonals.
    pub fn plaintext_count(&self) -> usize {
        self.transforms
            .iter()
            .map(EncodedLinearTransform::plaintext_count)
            .sum()
    }

    /// Evaluates the factors in order, one rescale each.
    ///
    /// # Errors
    /// As [`EncodedLinearTransform::evaluate`].
    pub fn evaluate<A: ExtendedArithmetic<Plain = P, Compact = C>>(
        &self,
        ops: &A,
        x: &A::Value,
    ) -> Result<A::Value> {
        crate::error::only_output(self.evaluate_many(ops, &[x])?, "dft")
    }

    /// [`EncodedDft::evaluate`] on each of `xs`, factor by factor: every
    /// value passes through a factor before the next factor starts, so the
    /// factor's keys and diagonals serve the whole batch while they are
    /// resident. Each output is the very one `evaluate` gives.
    ///
    /// # Errors
    /// As [`EncodedDft::evaluate`].
    pub fn evaluate_many<A: ExtendedArithmetic<Plain = P, Compact = C>>(
        &self,
        ops: &A,
        xs: &[&A::Value],
    ) -> Result<Vec<A::Value>> {
        self.evaluate_shared(ops, xs, 1)
    }

    /// [`EncodedDft::evaluate_many`], where a factor keeps compact
    /// diagonals, with `together` inputs at a time sharing each diagonal's
    /// expansion ([`EncodedLinearTransform::evaluate_many`]): `together`
    /// times fewer expansions for `together` inputs' baby steps held at
    /// once. Each output is still the very one `evaluate` gives.
    ///
    /// # Errors
    /// As [`EncodedDft::evaluate`].
    pub fn evaluate_shared<A: ExtendedArithmetic<Plain = P, Compact = C>>(
        &self,
        ops: &A,
        xs: &[&A::Value],
        together: usize,
    ) -> Result<Vec<A::Value>> {
        if self.transforms.is_empty() {
            return Err(Error::InvalidParameter {
                name: "dft",
                reason: "no factors",
            });
        }
        let mut vs: Vec<A::Value> = Vec::new();
        for (k, t) in self.transforms.iter().enumerate() {
            let inputs: Vec<&A::Value> = if k == 0 {
                xs.to_vec()
            } else {
                vs.iter().collect()
            };
            let group = if t.has_compact_diagonals() {
                together.max(1)
            } else {
                1
            };
            let mut out = Vec::with_capacity(inputs.len());
            for chunk in inputs.chunks(group) {
                out.extend(t.evaluate_many(ops, chunk)?);
            }
            vs = out;
        }
        Ok(vs)
    }
}

/// The rotation keys (nonzero steps in `0..n`) a set of DFTs needs
/// together.
pub fn rotation_keys(dfts: &[&HomomorphicDft], log_bsgs_ratio: i32) -> BTreeSet<usize> {
    dfts.iter()
        .flat_map(|d| d.rotation_indices(log_bsgs_ratio))
        .collect()
}

/// The dense decoding matrix `E` on `n` slots, `E[j][k] = ω^{5^j·k}`
/// (reference for tests; `O(n²)`).
pub fn decoding_matrix(n: usize) -> Vec<Vec<Complex64>> {
    let four_n = 4 * n as u64;
    let mut power = 1u64;
    (0..n)
        .map(|_| {
            let e = power;
            power = power * 5 % four_n;
            (0..n as u64)
                .map(|k| Complex64::from_polar(1.0, PI * (e * k % four_n) as f64 / (2 * n) as f64))
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hemem_ckks::encoding::SpecialFft;
    use hemem_ckks::testing::{max_abs_error, seeded_rng, unit_disk};

    fn dense_mul(a: &[Vec<Complex64>], b: &[Vec<Complex64>]) -> Vec<Vec<Complex64>> {
        let n = a.len();
        (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| (0..n).map(|k| a[i][k] * b[k][j]).sum())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn product_of_slot_to_coeff_factors_is_e_times_bit_reversal() {
        for log_n in 1..=7u32 {
            let n = 1usize << log_n;
            let e = decoding_matrix(n);
            // E·R: column k of E·R is column bitrev(k) of E.
            let er: Vec<Vec<Complex64>> = e
                .iter()
                .map(|row| (0..n).map(|k| row[bit_reverse(k, log_n)]).collect())
                .collect();
            for levels in [1usize, 2, 3, 4] {
                let dft = HomomorphicDft::with_levels(DftKind::SlotToCoeff, n, levels).unwrap();
                let mut product = DiagonalMatrix::identity(n).unwrap().to_dense();
                for f in dft.factors() {
                    product = dense_mul(&f.to_dense(), &product);
                }
                let err = product
                    .iter()
                    .flatten()
                    .zip(er.iter().flatten())
                    .map(|(a, b)| (a - b).norm())
                    .fold(0.0, f64::max);
                assert!(err < 1e-12, "n = {n}, levels = {levels}: {err}");
                let cts = HomomorphicDft::with_levels(DftKind::CoeffToSlot, n, levels).unwrap();
                let mut inverse = DiagonalMatrix::identity(n).unwrap().to_dense();
                for f in cts.factors() {
                    inverse = dense_mul(&f.to_dense(), &inverse);
                }
                let id = dense_mul(&inverse, &product);
                for (i, row) in id.iter().enumerate() {
                    for (j, z) in row.iter().enumerate() {
                        let expected = if i == j { 1.0 } else { 0.0 };
                        assert!((z - expected).norm() < 1e-12, "n = {n}");
                    }
                }
            }
        }
    }

    #[test]
    fn slot_to_coeff_outputs_bit_reversed_coefficients_and_coeff_to_slot_undoes_it() {
        let mut rng = seeded_rng(21);
        for log_n in [4u32, 9, 12, 15] {
            let n = 1usize << log_n;
            let fft = SpecialFft::new(n);
            let w = unit_disk(&mut rng, n);
            let stc = HomomorphicDft::with_levels(DftKind::SlotToCoeff, n, 3).unwrap();
            let cts = HomomorphicDft::with_levels(DftKind::CoeffToSlot, n, 3).unwrap();
            // The slots after StC decode (special FFT inverse) to R·w.
            let slots = stc.apply(&w).unwrap();
            let coeffs = fft.inverse(&slots);
            let err = max_abs_error(&coeffs, &bit_reversed(&w));
            assert!(err < 1e-11 * (n as f64).sqrt(), "n = {n}: {err}");
            // CtS of the slots of a plaintext u gives R·u.
            let u = unit_disk(&mut rng, n);
            let back = cts.apply(&fft.forward(&u)).unwrap();
            assert!(max_abs_error(&back, &bit_reversed(&u)) < 1e-12 * n as f64);
            // And the composition is the identity.
            let id = cts.apply(&slots).unwrap();
            assert!(max_abs_error(&id, &w) < 1e-12 * n as f64, "n = {n}");
        }
    }

    #[test]
    fn diagonal_counts_match_the_notes() {
        // BOOTSTRAP-NOTES §2: at 2^15 slots the CtS levels have 32/63/63
        // diagonals and baby steps 4096/256/8.
        let cts = HomomorphicDft::with_levels(DftKind::CoeffToSlot, 1 << 15, 3).unwrap();
        let counts: Vec<usize> = cts.factors().iter().map(|f| f.diagonals().len()).collect();
        assert_eq!(counts, [32, 63, 63]);
        let n1: Vec<usize> = cts.linear_transforms(0).iter().map(|l| l.n1()).collect();
        assert_eq!(n1, [4096, 256, 8]);
        assert_eq!(cts.log_radices(), [5, 5, 5]);
        let stc = HomomorphicDft::with_levels(DftKind::SlotToCoeff, 1 << 16, 3).unwrap();
        assert_eq!(stc.log_radices(), [5, 5, 6]);
        let counts: Vec<usize> = stc.factors().iter().map(|f| f.diagonals().len()).collect();
        assert_eq!(counts, [63, 63, 64]);
    }

    #[test]
    fn rotation_key_counts_match_heaan() {
        // HEaaN: 38 keys for FG (2^15 slots), 42 for FV (2^16), 34 for FT
        // (2^14) with each giant step its own key; the BSGS ratio (log 0..2)
        // does not change them. Horner's giant steps need 23, 27 and 19.
        for (log_n, direct, horner) in [(15u32, 38usize, 23usize), (16, 42, 27), (14, 34, 19)] {
            let n = 1usize << log_n;
            let cts = HomomorphicDft::with_levels(DftKind::CoeffToSlot, n, 3).unwrap();
            let stc = HomomorphicDft::with_levels(DftKind::SlotToCoeff, n, 3).unwrap();
            for ratio in 0..=2 {
                let classic: BTreeSet<usize> = [&cts, &stc]
                    .iter()
                    .flat_map(|d| d.linear_transforms(ratio))
                    .flat_map(|t| t.index().direct_rotations())
                    .collect();
                assert_eq!(classic.len(), direct, "2^{log_n} slots, log ratio {ratio}");
                let keys = rotation_keys(&[&cts, &stc], ratio);
                if ratio == 0 {
                    assert_eq!(keys.len(), horner, "2^{log_n} slots");
                }
                assert!(
                    keys.len() < classic.len(),
                    "2^{log_n} slots, log ratio {ratio}"
                );
                assert_eq!(cts.rotation_indices(ratio), stc.rotation_indices(ratio));
            }
        }
    }

    #[test]
    fn other_splits_give_the_notes_key_counts() {
        // BOOTSTRAP-NOTES §2 at 2^15 slots: CtS 4 + StC 3 → 47, 4 + 4 → 32,
        // 2 + 2 → 60.
        let n = 1 << 15;
        for (c, s, expected) in [(4usize, 3usize, 47usize), (4, 4, 32), (2, 2, 60)] {
            let cts = HomomorphicDft::with_levels(DftKind::CoeffToSlot, n, c).unwrap();
            let stc = HomomorphicDft::with_levels(DftKind::SlotToCoeff, n, s).unwrap();
            let classic: BTreeSet<usize> = [&cts, &stc]
                .iter()
                .flat_map(|d| d.linear_transforms(0))
                .flat_map(|t| t.index().direct_rotations())
                .collect();
            assert_eq!(classic.len(), expected, "CtS {c} + StC {s}");
            assert!(rotation_keys(&[&cts, &stc], 0).len() < expected);
        }
    }

    #[test]
    fn scaling_and_bad_input() {
        let n = 64;
        let mut dft = HomomorphicDft::with_levels(DftKind::CoeffToSlot, n, 3).unwrap();
        let plain = dft.clone();
        dft.scale_evenly(1.0 / 64.0).unwrap();
        dft.scale_factor(1, Complex64::new(0.0, 2.0)).unwrap();
        let mut rng = seeded_rng(5);
        let z = unit_disk(&mut rng, n);
        let a = dft.apply(&z).unwrap();
        let b: Vec<Complex64> = plain
            .apply(&z)
            .unwrap()
            .iter()
            .map(|v| v * Complex64::new(0.0, 2.0 / 64.0))
            .collect();
        assert!(max_abs_error(&a, &b) < 1e-14);
        assert!(dft.scale_factor(3, Complex64::new(1.0, 0.0)).is_err());
        assert!(matches!(
            HomomorphicDft::new(DftKind::SlotToCoeff, n, &[3, 2]),
            Err(Error::InvalidRadices { .. })
        ));
        assert!(matches!(
            HomomorphicDft::new(DftKind::SlotToCoeff, 48, &[3, 2]),
            Err(Error::InvalidSlots { .. })
        ));
        // More levels than stages: identity factors keep the level count.
        let tiny = HomomorphicDft::with_levels(DftKind::SlotToCoeff, 2, 3).unwrap();
        assert_eq!(tiny.levels(), 3);
        assert_eq!(tiny.log_radices(), [0, 0, 1]);
    }

    #[test]
    fn diagonal_matrix_matches_dense_products() {
        let mut rng = seeded_rng(8);
        let n = 16;
        let a: Vec<Vec<Complex64>> = (0..n).map(|_| unit_disk(&mut rng, n)).collect();
        let b: Vec<Vec<Complex64>> = (0..n).map(|_| unit_disk(&mut rng, n)).collect();
        let da = DiagonalMatrix::from_dense(&a).unwrap();
        let db = DiagonalMatrix::from_dense(&b).unwrap();
        let prod = da.compose(&db).unwrap().to_dense();
        let expected = dense_mul(&a, &b);
        for (x, y) in prod.iter().flatten().zip(expected.iter().flatten()) {
            assert!((x - y).norm() < 1e-12);
        }
        let z = unit_disk(&mut rng, n);
        let dense: Vec<Complex64> = a
            .iter()
            .map(|row| row.iter().zip(&z).map(|(x, y)| x * y).sum())
            .collect();
        assert!(max_abs_error(&da.apply(&z).unwrap(), &dense) < 1e-12);
    }
}
