//! Homomorphic linear transforms by their diagonals, evaluated with the
//! baby-step giant-step (BSGS) algorithm and hoisted baby-step rotations
//! (Halevi–Shoup, ePrint 2018/244 §4; Chen–Chillotti–Song, ePrint
//! 2018/1043 §3).
//!
//! A matrix with diagonals `diag_d` acts as `M·z = Σ_d diag_d ⊙ rot_d(z)`.
//! Writing each index as `d = g + b` with `g` a multiple of the baby-step
//! size `N1` (giant step) and `b < N1` (baby step),
//!
//! `M·z = Σ_g rot_g( Σ_b rot_{−g}(diag_{g+b}) ⊙ rot_b(z) )`,
//!
//! so the input is rotated once per baby step (all from one key-switch
//! decomposition), each inner sum once per giant step, and the diagonals are
//! stored pre-rotated by `−g`. Everything is multiplied at one level and
//! rescaled once: the diagonals' scale decides the output scale,
//! `s_out = s_in · s_diag / q_level` ([`LinearTransform::diagonal_scale`]).
//!
//! The split follows Lattigo (`circuits/common/lintrans/lintrans.go`,
//! `BSGSIndex` and `FindBestBSGSRatio`). The giant steps, though, are
//! combined by Horner's rule where they form an unbroken run of multiples
//! of `N1` in either direction:
//!
//! `Σ_{k=1..K} rot_{k·N1}(y_k) = rot_{N1}(y_1 + rot_{N1}(y_2 + … rot_{N1}(y_K)))`,
//!
//! the same `K` rotations as rotating each inner sum by its own giant step,
//! and the same key-switching noise (one key switch per giant step), but
//! with **one** key (two with the run of negative steps) instead of one per
//! giant step. Bootstrapping's DFTs at 2^15 slots then need 23 rotation
//! keys instead of HEaaN's and Lattigo's 38 ([`BsgsIndex::direct_rotations`]
//! gives that count): at FGb's top level, 15 fewer keys of 75 MiB each.
//!
//! The baby steps and giant steps can further be kept in the extended
//! basis `Q_l ∪ P` (**double hoisting**, Bossuat et al., Eurocrypt 2021,
//! Algorithm 6): [`Hoisting`] and [`crate::hoisting`]. The Horner runs work
//! there too: every rotation of the chain stays in `Q_l ∪ P`.

use std::collections::{BTreeMap, BTreeSet};

use hemem_ckks::encoding::{CompactPlaintext, Plaintext, is_short_period, least_period};
use num_complex::Complex64;

use crate::dft::DiagonalMatrix;
use crate::hoisting::ExtendedArithmetic;
pub use crate::hoisting::Hoisting;
use crate::{Error, Result};

mod evaluate;

/// The baby-step giant-step split of a set of diagonal indices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BsgsIndex {
    /// The baby-step size `N1` (a power of two).
    pub n1: usize,
    /// For each giant step `g` (multiple of `N1`, in `0..n`), the baby steps
    /// `b < N1` with a diagonal at `g + b`.
    pub groups: BTreeMap<usize, Vec<usize>>,
    /// The giant steps, ascending (0 included when present).
    pub giants: Vec<usize>,
    /// The baby steps, ascending (0 included when present).
    pub babies: Vec<usize>,
    /// `K₊`: the giant steps `N1, 2·N1, …, K₊·N1` are taken by Horner's
    /// rule with the one rotation by `N1` (0: none).
    pub forward: usize,
    /// `K₋`: likewise `−N1, …, −K₋·N1` with the rotation by `−N1`.
    pub backward: usize,
    /// Giant steps rotated directly (those in a run with gaps).
    pub direct: Vec<usize>,
    /// The slot count.
    pub n: usize,
}

impl BsgsIndex {
    /// Splits `diagonals` (indices, taken modulo the power of two `n`) with
    /// baby-step size `n1` (a power of two): giant `(d / n1)·n1`, baby
    /// `d mod n1`.
    pub fn new(diagonals: &[usize], n: usize, n1: usize) -> Self {
        let n1 = n1.max(1);
        let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        let mut babies = BTreeSet::new();
        for &d in diagonals {
            let d = d & (n - 1);
            let giant = ((d / n1) * n1) & (n - 1);
            let baby = d & (n1 - 1);
            groups.entry(giant).or_default().push(baby);
            babies.insert(baby);
        }
        for list in groups.values_mut() {
            list.sort_unstable();
            list.dedup();
        }
        let giants: Vec<usize> = groups.keys().copied().collect();
        // Each nonzero giant as a signed multiple of N1 (ties go forward).
        let steps = n / n1;
        let (mut plus, mut minus) = (Vec::new(), Vec::new());
        for &g in &giants {
            let k = g / n1;
            if k == 0 {
                continue;
            }
            if 2 * k <= steps {
                plus.push((k, g));
            } else {
                minus.push((steps - k, g));
            }
        }
        let mut direct = Vec::new();
        let mut run = |mut side: Vec<(usize, usize)>| -> usize {
            side.sort_unstable();
            let unbroken = side.iter().enumerate().all(|(i, &(k, _))| k == i + 1);
            if unbroken {
                side.len()
            } else {
                direct.extend(side.iter().map(|&(_, g)| g));
                0
            }
        };
        let forward = run(plus);
        let backward = run(minus);
        direct.sort_unstable();
        Self {
            n1,
            groups,
            giants,
            babies: babies.into_iter().collect(),
            forward,
            backward,
            direct,
            n,
        }
    }

    /// The nonzero rotation steps (in `0..n`) of the evaluation, hence the
    /// keys it needs: the baby steps, `N1` and `n − N1` for the Horner runs,
    /// and the giant steps taken directly.
    pub fn rotations(&self) -> BTreeSet<usize> {
        let forward = (self.forward > 0).then_some(self.n1 % self.n);
        let backward = (self.backward > 0).then_some(self.n - self.n1 % self.n);
        self.babies
            .iter()
            .chain(&self.direct)
            .copied()
            .chain(forward)
            .chain(backward)
            .filter(|&r| r != 0 && r < self.n)
            .collect()
    }

    /// The rotation steps of the classic evaluation that rotates each inner
    /// sum by its own giant step (the key sets HEaaN and Lattigo publish).
    pub fn direct_rotations(&self) -> BTreeSet<usize> {
        self.giants
            .iter()
            .chain(&self.babies)
            .copied()
            .filter(|&r| r != 0)
            .collect()
    }
}

/// The baby-step size Lattigo picks: the largest power of two `N1 < n`
/// whose ratio (baby rotations)/(giant rotations) stays at or below
/// `2^log_max_ratio` (`FindBestBSGSRatio`). A matrix with fewer than three
/// diagonals gets `N1 = n`: every diagonal a baby step, no giant steps.
pub fn find_best_bsgs_ratio(diagonals: &[usize], n: usize, log_max_ratio: i32) -> usize {
    if diagonals.len() < 3 {
        return n;
    }
    let max_ratio = 2f64.powi(log_max_ratio);
    let mut n1 = 1;
    while n1 < n {
        let index = BsgsIndex::new(diagonals, n, n1);
        let giants = index.giants.len() as f64 - 1.0;
        let babies = index.babies.len() as f64 - 1.0;
        let ratio = babies / giants;
        if ratio == max_ratio {
            return n1;
        }
        if ratio > max_ratio {
            return (n1 / 2).max(1);
        }
        n1 <<= 1;
    }
    1
}

/// A linear transform on slot vectors given by its diagonals, with its BSGS
/// split. Public API in its own right: the DFTs of bootstrapping are built
/// from it, and any diagonal-sparse matrix can use it.
#[derive(Clone, Debug, PartialEq)]
pub struct LinearTransform {
    matrix: DiagonalMatrix,
    index: BsgsIndex,
}

impl LinearTransform {
    /// The transform of `matrix` with Lattigo's baby-step choice for
    /// `log_bsgs_ratio` (see [`find_best_bsgs_ratio`]; 0 minimises the key
    /// count, larger values trade keys for fewer rotations).
    pub fn new(matrix: DiagonalMatrix, log_bsgs_ratio: i32) -> Self {
        let n = matrix.slots();
        let indices = matrix.indices();
        let n1 = find_best_bsgs_ratio(&indices, n, log_bsgs_ratio);
        let index = BsgsIndex::new(&indices, n, n1);
        Self { matrix, index }
    }

    /// The transform of `matrix` with baby-step size `n1`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] unless `n1` is a power of two at most `n`.
    pub fn with_n1(matrix: DiagonalMatrix, n1: usize) -> Result<Self> {
        let n = matrix.slots();
        if n1 == 0 || !n1.is_power_of_two() || n1 > n {
            return Err(Error::InvalidParameter {
                name: "n1",
                reason: "the baby-step size must be a power of two at most n",
            });
        }
        let index = BsgsIndex::new(&matrix.indices(), n, n1);
        Ok(Self { matrix, index })
    }

    /// The matrix.
    pub fn matrix(&self) -> &DiagonalMatrix {
        &self.matrix
    }

    /// The baby-step size `N1`.
    pub fn n1(&self) -> usize {
        self.index.n1
    }

    /// The BSGS split.
    pub fn index(&self) -> &BsgsIndex {
        &self.index
    }

    /// The nonzero rotation steps (in `0..n`) the evaluation needs.
    pub fn rotations(&self) -> BTreeSet<usize> {
        self.index.rotations()
    }

    /// The hoisting the transform is evaluated with at `level` with
    /// `special_primes` limbs in `P`: `hoisting` with [`Hoisting::Auto`]
    /// resolved by [`Hoisting::resolve`] from this split's rotation and
    /// diagonal counts, as if every diagonal were expanded from compact
    /// form. The choice depends on the transform's shape only, so compact,
    /// encoded and mixed diagonals give bit-identical results.
    pub fn hoisting_at(&self, hoisting: Hoisting, level: usize, special_primes: usize) -> Hoisting {
        let babies = self.index.babies.iter().filter(|&&b| b != 0).count();
        let giants = self.index.forward + self.index.backward + self.index.direct.len();
        let diagonals = self.matrix.diagonals().len();
        hoisting.resolve(level, special_primes, babies, giants, diagonals)
    }

    /// Bytes of one diagonal of least period `period` (in slots) encoded at
    /// `level` for evaluation with `hoisting` (resolved), limbs of
    /// `limb_bytes` and `special_primes` special primes: every limb of
    /// `Q_level`, and of `P` too with double hoisting; of each limb, all `N`
    /// words, or the `2·period` distinct values of a diagonal kept periodic
    /// ([`is_short_period`]). What [`LinearTransform::encode_hoisted`]
    /// allocates per encoded diagonal, and what
    /// [`crate::dft::HomomorphicDft::encoded_sizes`] predicts.
    pub(crate) fn encoded_diagonal_bytes(
        level: usize,
        hoisting: Hoisting,
        limb_bytes: u64,
        special_primes: usize,
        period: usize,
    ) -> u64 {
        let special = match hoisting {
            Hoisting::Double => special_primes as u64,
            Hoisting::Single | Hoisting::Auto => 0,
        };
        let n = limb_bytes / 8;
        let limb = if is_short_period(n as usize, period) {
            2 * period as u64 * 8
        } else {
            limb_bytes
        };
        (level as u64 + 1 + special) * limb
    }

    /// The diagonal scale that takes an input at `input_scale` to
    /// `target_scale` after the one rescale by `prime` (the prime of the
    /// level the transform is evaluated at): `target · prime / input`.
    pub fn diagonal_scale(input_scale: f64, target_scale: f64, prime: u64) -> f64 {
        target_scale * prime as f64 / input_scale
    }

    /// Pre-rotates and encodes the diagonals at `level` and `scale`
    /// (`rot_{−g}(diag_{g+b})` for each giant `g` and baby `b`), keeping
    /// them as encoded plaintexts ([`DiagonalStorage::Encoded`]), for the
    /// default [`Hoisting`].
    ///
    /// # Errors
    /// Encoding errors of `ops`.
    pub fn encode<A: ExtendedArithmetic>(
        &self,
        ops: &A,
        level: usize,
        scale: f64,
    ) -> Result<EncodedLinearTransform<A::Plain, A::Compact>> {
        self.encode_with(ops, level, scale, DiagonalStorage::Encoded)
    }

    /// As [`LinearTransform::encode`], keeping the diagonals as `storage`
    /// says.
    ///
    /// # Errors
    /// Encoding errors of `ops`.
    pub fn encode_with<A: ExtendedArithmetic>(
        &self,
        ops: &A,
        level: usize,
        scale: f64,
        storage: DiagonalStorage,
    ) -> Result<EncodedLinearTransform<A::Plain, A::Compact>> {
        self.encode_hoisted(ops, level, scale, storage, Hoisting::default())
    }

    /// As [`LinearTransform::encode_with`], for evaluation with `hoisting`
    /// ([`Hoisting::Auto`] resolved here, [`LinearTransform::hoisting_at`]):
    /// with [`Hoisting::Double`], diagonals kept encoded are encoded over
    /// `Q_l ∪ P` (`K/(l+1)` more bytes); compact ones are the same either
    /// way and are expanded to the basis the evaluation needs.
    ///
    /// # Errors
    /// Encoding errors of `ops`.
    pub fn encode_hoisted<A: ExtendedArithmetic>(
        &self,
        ops: &A,
        level: usize,
        scale: f64,
        storage: DiagonalStorage,
        hoisting: Hoisting,
    ) -> Result<EncodedLinearTransform<A::Plain, A::Compact>> {
        let hoisting = self.hoisting_at(hoisting, level, ops.special_primes());
        let n = self.matrix.slots();
        let diagonals = self.matrix.diagonals();
        // Mixed: diagonals kept encoded, in evaluation order, while their
        // encoded bytes fit.
        let encoded_size = |diag: &[Complex64]| {
            Self::encoded_diagonal_bytes(
                level,
                hoisting,
                ops.limb_bytes(),
                ops.special_primes(),
                least_period(diag),
            )
        };
        let room = std::cell::Cell::new(match storage {
            DiagonalStorage::Mixed { encoded_bytes } => encoded_bytes,
            _ => 0,
        });
        // Diagonals kept encoded, and their bytes.
        let kept = std::cell::Cell::new((0usize, 0u64));
        let keep_encoded = |size: u64| match storage {
            DiagonalStorage::Encoded => true,
            DiagonalStorage::Mixed { .. } if size <= room.get() => {
                room.set(room.get() - size);
                true
            }
            _ => false,
        };
        let groups = self
            .index
            .groups
            .iter()
            .map(|(&giant, babies)| {
                let plains = babies
                    .iter()
                    .filter_map(|&baby| {
                        diagonals
                            .get(&((giant + baby) % n))
                            .map(|diag| (baby, diag))
                    })
                    .map(|(baby, diag)| {
                        // rot_{−g}(v)[j] = v[j − g].
                        let mut rotated: Vec<Complex64> = diag.clone();
                        rotated.rotate_right(giant % n);
                        let size = encoded_size(diag);
                        let stored = if keep_encoded(size) {
                            Diagonal::Encoded(match hoisting {
                                Hoisting::Double => ops.encode_extended(&rotated, level, scale)?,
                                Hoisting::Single | Hoisting::Auto => {
                                    ops.encode(&rotated, level, scale)?
                                }
                            })
                        } else {
                            Diagonal::Compact(ops.encode_compact(&rotated, level, scale)?)
                        };
                        if stored.as_encoded().is_some() {
                            kept.set((kept.get().0 + 1, kept.get().1 + size));
                        }
                        Ok((baby, stored))
                    })
                    .collect::<Result<Vec<_>>>()?;
                Ok((giant, plains))
            })
            .collect::<Result<Vec<_>>>()?;
        // What was kept, not what was asked: all encoded, none, or how many
        // bytes of them.
        let total: usize = groups.iter().map(|(_, g)| g.len()).sum();
        let storage = match kept.get() {
            (0, _) => DiagonalStorage::Compact,
            (k, _) if k == total => DiagonalStorage::Encoded,
            (_, encoded_bytes) => DiagonalStorage::Mixed { encoded_bytes },
        };
        Ok(EncodedLinearTransform {
            n,
            n1: self.index.n1,
            level,
            scale,
            storage,
            hoisting,
            babies: self.index.babies.clone(),
            forward: self.index.forward,
            backward: self.index.backward,
            direct: self.index.direct.clone(),
            groups,
        })
    }
}

/// How an encoded linear transform keeps its diagonals between
/// evaluations.
///
/// Every form gives bit-identical results: an encoded diagonal is exactly
/// the expansion of its compact one ([`hemem_ckks::encoding::CompactPlaintext`]),
/// so the choice trades memory for expansion work and nothing else.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DiagonalStorage {
    /// The bootstrapper's choice by the device's budget (the default):
    /// the fastest forms of its diagonals *and keys* that the budget holds
    /// beside one bootstrap's working memory
    /// ([`crate::Bootstrapper::with_options`] resolves it to one of the
    /// others; see `bootstrapper/footprint.rs`). A transform encoded
    /// directly with `Fit` keeps its diagonals compact.
    #[default]
    Fit,
    /// The rounded coefficients only, one word per coefficient
    /// ([`crate::arith::SlotArithmetic::encode_compact`]: `level + 1` times fewer bytes
    /// than encoded at full slots), expanded when the transform is
    /// evaluated, at most [`EXPAND_BATCH`] at a time, into scratch freed
    /// right after their products.
    Compact,
    /// Encoded plaintexts (every limb, NTT form), ready to multiply: no
    /// expansion, at the full size.
    Encoded,
    /// CoeffToSlot's diagonals kept encoded, factor after factor in
    /// evaluation order, while their encoded bytes fit `encoded_bytes`; the
    /// rest (and SlotToCoeff) compact. For a card with room to spare beyond
    /// the compact working set: each byte kept encoded saves the same
    /// expansion work.
    Mixed {
        /// The most bytes kept encoded.
        encoded_bytes: u64,
    },
}

impl DiagonalStorage {
    /// `"fit"`, `"compact"`, `"encoded"` or `"mixed"` (as in JSON reports).
    pub fn name(self) -> &'static str {
        match self {
            Self::Fit => "fit",
            Self::Compact => "compact",
            Self::Encoded => "encoded",
            Self::Mixed { .. } => "mixed",
        }
    }
}

impl std::str::FromStr for DiagonalStorage {
    type Err = Error;

    /// Parses `fit`, `compact`, `encoded` or `mixed:SIZE` (`mixed:1.2GiB`).
    fn from_str(s: &str) -> Result<Self> {
        let invalid = Error::InvalidParameter {
            name: "diagonal storage",
            reason: "expected fit, compact, encoded or mixed:SIZE (for example mixed:1GiB)",
        };
        match s.split_once(':') {
            Some(("mixed", size)) => size
                .parse::<hemem_memory::ByteSize>()
                .map(|b| Self::Mixed { encoded_bytes: b.0 })
                .map_err(|_| invalid),
            _ => match s {
                "fit" => Ok(Self::Fit),
                "compact" => Ok(Self::Compact),
                "encoded" => Ok(Self::Encoded),
                _ => Err(invalid),
            },
        }
    }
}

/// Most compact diagonals expanded at once during an evaluation: a bound on
/// the scratch the expansion holds (at FGb's top level, 8 × 12.6 MiB), and
/// within one batched launch of the GPU backend (16 parts).
pub const EXPAND_BATCH: usize = 8;

/// One stored diagonal of an [`EncodedLinearTransform`].
#[derive(Clone, Debug)]
pub enum Diagonal<P, C> {
    /// An encoded plaintext.
    Encoded(P),
    /// A compact encoding, expanded when used.
    Compact(C),
}

impl<P, C> Diagonal<P, C> {
    /// The compact encoding, if that is how the diagonal is kept.
    pub fn as_compact(&self) -> Option<&C> {
        match self {
            Self::Compact(c) => Some(c),
            Self::Encoded(_) => None,
        }
    }

    /// The encoded plaintext, if that is how the diagonal is kept.
    pub fn as_encoded(&self) -> Option<&P> {
        match self {
            Self::Encoded(p) => Some(p),
            Self::Compact(_) => None,
        }
    }
}

/// A [`LinearTransform`] with its diagonals encoded at one level and scale,
/// kept as encoded plaintexts `P` or compact encodings `C`
/// ([`DiagonalStorage`]).
#[derive(Clone, Debug)]
pub struct EncodedLinearTransform<P, C = P> {
    n: usize,
    n1: usize,
    level: usize,
    scale: f64,
    storage: DiagonalStorage,
    hoisting: Hoisting,
    babies: Vec<usize>,
    forward: usize,
    backward: usize,
    direct: Vec<usize>,
    groups: Vec<GiantGroup<P, C>>,
}

/// One giant step `g` of an [`EncodedLinearTransform`] and its baby steps
/// `b` with the diagonal `rot_{−g}(diag_{g+b})` each.
pub type GiantGroup<P, C> = (usize, Vec<(usize, Diagonal<P, C>)>);

impl<P, C> EncodedLinearTransform<P, C> {
    /// The slot count.
    pub fn slots(&self) -> usize {
        self.n
    }

    /// The baby-step size.
    pub fn n1(&self) -> usize {
        self.n1
    }

    /// The level the diagonals are encoded at (and the input is brought to).
    pub fn level(&self) -> usize {
        self.level
    }

    /// The diagonals' scale.
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// The number of encoded diagonals.
    pub fn plaintext_count(&self) -> usize {
        self.groups.iter().map(|(_, p)| p.len()).sum()
    }

    /// How the diagonals are kept.
    pub fn storage(&self) -> DiagonalStorage {
        self.storage
    }

    /// How the transform is evaluated.
    pub fn hoisting(&self) -> Hoisting {
        self.hoisting
    }

    /// The encoded diagonals: for each giant step, its baby steps and
    /// pre-rotated diagonals.
    pub fn groups(&self) -> &[GiantGroup<P, C>] {
        &self.groups
    }

    /// Every stored diagonal, group after group.
    pub fn diagonals(&self) -> impl Iterator<Item = &Diagonal<P, C>> {
        self.groups
            .iter()
            .flat_map(|(_, g)| g.iter().map(|(_, d)| d))
    }
}

impl<P, C> EncodedLinearTransform<P, C> {
    /// The same transform with every diagonal mapped: encoded plaintexts by
    /// `encoded`, compact ones by `compact`, in storage order; the first
    /// error stops the map. The split, level, scale and hoisting are kept.
    ///
    /// # Errors
    /// The first error of `encoded` or `compact`.
    pub fn try_map<P2, C2, E>(
        &self,
        mut encoded: impl FnMut(&P) -> std::result::Result<P2, E>,
        mut compact: impl FnMut(&C) -> std::result::Result<C2, E>,
    ) -> std::result::Result<EncodedLinearTransform<P2, C2>, E> {
        let groups = self
            .groups
            .iter()
            .map(|(g, diagonals)| {
                let diagonals = diagonals
                    .iter()
                    .map(|(b, d)| {
                        let d = match d {
                            Diagonal::Encoded(p) => Diagonal::Encoded(encoded(p)?),
                            Diagonal::Compact(c) => Diagonal::Compact(compact(c)?),
                        };
                        Ok((*b, d))
                    })
                    .collect::<std::result::Result<Vec<_>, E>>()?;
                Ok((*g, diagonals))
            })
            .collect::<std::result::Result<Vec<_>, E>>()?;
        Ok(EncodedLinearTransform {
            n: self.n,
            n1: self.n1,
            level: self.level,
            scale: self.scale,
            storage: self.storage,
            hoisting: self.hoisting,
            babies: self.babies.clone(),
            forward: self.forward,
            backward: self.backward,
            direct: self.direct.clone(),
            groups,
        })
    }
}

impl EncodedLinearTransform<Plaintext, CompactPlaintext> {
    /// The same transform with its diagonals on the context's device, each
    /// copied synchronously ([`Plaintext::to_device`],
    /// [`CompactPlaintext::to_device`]). A program that keeps a transform in
    /// host memory ([`EncodedLinearTransform::to_host`]) brings it to the
    /// device this way just before evaluating it and drops the copy after:
    /// a hand-written swap of its diagonals. The arithmetic is unchanged:
    /// the copies hold the same words.
    ///
    /// # Errors
    /// Allocation (an `OverBudget` among them) and transfer errors.
    pub fn to_device(&self) -> Result<Self> {
        Ok(self.try_map(Plaintext::to_device, CompactPlaintext::to_device)?)
    }

    /// The same transform with its diagonals in host memory (the context's
    /// host backend), each copied out synchronously.
    ///
    /// # Errors
    /// Allocation and transfer errors.
    pub fn to_host(&self) -> Result<Self> {
        Ok(self.try_map(Plaintext::to_host, CompactPlaintext::to_host)?)
    }

    /// Bytes of the stored diagonals (compact words or encoded limbs).
    pub fn size_bytes(&self) -> usize {
        self.diagonals()
            .map(|d| match d {
                Diagonal::Encoded(p) => p.size_bytes(),
                Diagonal::Compact(c) => c.size_bytes(),
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arith::{OpCounts, PlainSimulator, RescaleRule, SlotArithmetic};
    use hemem_ckks::params::{Parameters, Preset, SecurityCheck};
    use hemem_ckks::testing::{max_abs_error, seeded_rng, unit_disk};

    fn random_sparse(n: usize, indices: &[i64], seed: u64) -> DiagonalMatrix {
        let mut rng = seeded_rng(seed);
        DiagonalMatrix::from_diagonals(n, indices.iter().map(|&d| (d, unit_disk(&mut rng, n))))
            .unwrap()
    }

    #[test]
    fn bsgs_evaluation_matches_dense_products() {
        let params = Parameters::from_preset(Preset::FGb).unwrap();
        let sim = PlainSimulator::new(&params).with_rescale_rule(RescaleRule::Headroom);
        let mut rng = seeded_rng(31);
        let n = 256;
        let indices: Vec<i64> = vec![0, 1, 2, 5, 7, 8, 9, 16, 31, -1, -3, -40, 100, 128];
        let m = random_sparse(n, &indices, 32);
        let dense = m.to_dense();
        for ratio in [-1, 0, 1, 2] {
            let lt = if ratio < 0 {
                LinearTransform::with_n1(m.clone(), 4).unwrap()
            } else {
                LinearTransform::new(m.clone(), ratio)
            };
            let level = 20;
            let z = unit_disk(&mut rng, n);
            let s_in = 2f64.powi(50);
            let x = sim.value(&z, level, s_in).unwrap();
            let q = sim.prime(level).unwrap();
            let target = 2f64.powi(45);
            let d = LinearTransform::diagonal_scale(s_in, target, q);
            let enc = lt.encode(&sim, level, d).unwrap();
            assert_eq!(enc.plaintext_count(), indices.len());
            let y = enc.evaluate(&sim, &x).unwrap();
            assert_eq!(y.level(), level - 1);
            assert!((y.scale() / target - 1.0).abs() < 2f64.powi(-50));
            let expected: Vec<Complex64> = dense
                .iter()
                .map(|row| row.iter().zip(&z).map(|(a, b)| a * b).sum())
                .collect();
            let err = max_abs_error(y.values(), &expected);
            // Diagonals rounded at 2^46 over 14 diagonals.
            assert!(err < 1e-11, "ratio {ratio}: {err}");
        }
    }

    #[test]
    fn the_rotation_count_follows_the_split() {
        let params =
            Parameters::from_preset_with(Preset::TestFGb, SecurityCheck::AllowInsecure).unwrap();
        let sim = PlainSimulator::new(&params).with_rescale_rule(RescaleRule::Headroom);
        let n = 1024;
        let indices: Vec<i64> = (-31..=31).collect();
        let m = random_sparse(n, &indices, 33);
        let lt = LinearTransform::new(m, 0);
        assert_eq!(lt.n1(), 8);
        // Babies 1…7, giants 8, 16, 24 and −8…−32: 14 keys taken directly,
        // 7 + 2 with the Horner runs.
        assert_eq!(lt.index().direct_rotations().len(), 14);
        assert_eq!(
            lt.rotations().into_iter().collect::<Vec<_>>(),
            [1, 2, 3, 4, 5, 6, 7, 8, n - 8]
        );
        assert_eq!((lt.index().forward, lt.index().backward), (3, 4));
        let enc = lt.encode(&sim, 5, 2f64.powi(40)).unwrap();
        let mut rng = seeded_rng(34);
        let x = sim
            .value(&unit_disk(&mut rng, n), 7, 2f64.powi(40))
            .unwrap();
        sim.reset_counts();
        let _ = enc.evaluate(&sim, &x).unwrap();
        let c = sim.counts();
        assert_eq!(c.rotations, 14);
        assert_eq!(c.hoisted_groups, 1);
        assert_eq!(c.mul_plain, 63);
        assert_eq!(c.rescales, 1);
        // An input below the transform's level is refused.
        let low = sim.level_down(&x, 4).unwrap();
        assert!(matches!(
            enc.evaluate(&sim, &low),
            Err(Error::LevelTooLow { .. })
        ));
    }

    #[test]
    fn compact_storage_evaluates_like_encoded() {
        let params =
            Parameters::from_preset_with(Preset::TestFGb, SecurityCheck::AllowInsecure).unwrap();
        let sim = PlainSimulator::new(&params).with_rescale_rule(RescaleRule::Headroom);
        let n = 512;
        // 40 diagonals: groups larger than one expansion batch.
        let indices: Vec<i64> = (-20..20).collect();
        let lt = LinearTransform::with_n1(random_sparse(n, &indices, 35), 64).unwrap();
        let mut rng = seeded_rng(36);
        let x = sim
            .value(&unit_disk(&mut rng, n), 9, 2f64.powi(40))
            .unwrap();
        let encoded = lt.encode(&sim, 8, 2f64.powi(41)).unwrap();
        let compact = lt
            .encode_with(&sim, 8, 2f64.powi(41), DiagonalStorage::Compact)
            .unwrap();
        assert_eq!(encoded.storage(), DiagonalStorage::Encoded);
        assert_eq!(compact.storage(), DiagonalStorage::Compact);
        assert!(compact.diagonals().all(|d| d.as_compact().is_some()));
        assert!(encoded.diagonals().all(|d| d.as_encoded().is_some()));
        assert!(compact.groups().iter().any(|(_, g)| g.len() > EXPAND_BATCH));
        sim.reset_counts();
        let a = encoded.evaluate(&sim, &x).unwrap();
        let counts = sim.counts();
        sim.reset_counts();
        let b = compact.evaluate(&sim, &x).unwrap();
        assert_eq!(a, b);
        // The same work but the expansions' transforms.
        let no_ntt = |c: OpCounts| OpCounts { ntt_limbs: 0, ..c };
        assert_eq!(no_ntt(counts), no_ntt(sim.counts()));
        assert_eq!(
            "compact".parse::<DiagonalStorage>().unwrap(),
            DiagonalStorage::Compact
        );
        assert_eq!(
            DiagonalStorage::Encoded
                .name()
                .parse::<DiagonalStorage>()
                .unwrap(),
            DiagonalStorage::Encoded
        );
        assert!("dense".parse::<DiagonalStorage>().is_err());
    }

    /// Double hoisting gives the very values single hoisting gives (the
    /// simulator without noise makes the same products and sums), with the
    /// same rotations and fewer ModDowns: none per baby step, one per
    /// giant step, a pair at the end.
    #[test]
    fn double_hoisting_matches_single_with_fewer_mod_downs() {
        let params =
            Parameters::from_preset_with(Preset::TestFGb, SecurityCheck::AllowInsecure).unwrap();
        let sim = PlainSimulator::new(&params).with_rescale_rule(RescaleRule::Headroom);
        let n = 1024;
        let indices: Vec<i64> = (-31..=31).collect();
        let lt = LinearTransform::new(random_sparse(n, &indices, 37), 0);
        let mut rng = seeded_rng(38);
        let x = sim
            .value(&unit_disk(&mut rng, n), 7, 2f64.powi(40))
            .unwrap();
        let mut results = Vec::new();
        for hoisting in [Hoisting::Single, Hoisting::Double] {
            for storage in [DiagonalStorage::Compact, DiagonalStorage::Encoded] {
                let enc = lt
                    .encode_hoisted(&sim, 5, 2f64.powi(40), storage, hoisting)
                    .unwrap();
                assert_eq!(enc.hoisting(), hoisting);
                sim.reset_counts();
                let y = enc.evaluate(&sim, &x).unwrap();
                results.push((hoisting, storage, y, sim.counts()));
            }
        }
        let (_, _, single, single_counts) = &results[0];
        // Babies 1…7, giants 8…24 and −8…−32 by Horner (3 + 4 rotations).
        let (babies, giants) = (7, 7);
        assert_eq!(single_counts.rotations, babies + giants);
        assert_eq!(single_counts.mod_downs, 2 * (babies + giants));
        for (hoisting, storage, y, counts) in &results {
            assert_eq!(y, single, "{hoisting:?} {storage:?}");
            assert_eq!(counts.rotations, babies + giants);
            assert_eq!(counts.mul_plain, 63);
            if *hoisting == Hoisting::Double {
                assert_eq!(counts.mod_downs, giants + 2, "{storage:?}");
            }
        }
        // Compact expansions over Q ∪ P: K more limb transforms each.
        let k = params.p_moduli().len();
        let ntt = |i: usize| results[i].3.ntt_limbs;
        // The same decompositions (one for the babies, one per giant).
        let l = 5;
        let saved_mod_downs = (2 * (babies + giants) - (giants + 2)) * (k + l + 1);
        assert_eq!(ntt(0) + 63 * k, ntt(2) + saved_mod_downs);
        // An extended plaintext does not multiply an ordinary value.
        let p = sim
            .encode_extended(&unit_disk(&mut rng, n), 7, 2f64.powi(20))
            .unwrap();
        assert!(sim.mul_plain(&x, &p).is_err());
        // Auto: double where the ModDowns saved outweigh the expansions'
        // extra limbs. Here (K = 5): 7 babies and 7 giants save 19
        // ModDowns of K + l + 1 limbs against 63·5 limbs of expansions.
        assert_eq!(k, 5);
        assert_eq!(lt.hoisting_at(Hoisting::Auto, 5, k), Hoisting::Single);
        assert_eq!(lt.hoisting_at(Hoisting::Auto, 20, k), Hoisting::Double);
        assert_eq!(Hoisting::Auto.resolve(0, 5, 7, 8, 63), Hoisting::Single);
        assert_eq!(Hoisting::Auto.resolve(24, 5, 7, 8, 63), Hoisting::Double);
        assert_eq!(Hoisting::Single.resolve(24, 5, 7, 8, 63), Hoisting::Single);
        assert_eq!("auto".parse::<Hoisting>().unwrap(), Hoisting::Auto);
        assert_eq!("double".parse::<Hoisting>().unwrap(), Hoisting::Double);
        assert_eq!(
            Hoisting::Single.name().parse::<Hoisting>().unwrap(),
            Hoisting::Single
        );
        assert!("triple".parse::<Hoisting>().is_err());
    }

    #[test]
    fn lattigo_ratio_rule() {
        let n = 1 << 15;
        let top: Vec<usize> = (0..32).map(|k| k * 1024).collect();
        assert_eq!(find_best_bsgs_ratio(&top, n, 0), 4096);
        assert_eq!(find_best_bsgs_ratio(&top, n, 1), 4096);
        assert_eq!(find_best_bsgs_ratio(&top, n, 2), 8192);
        let two = [0usize, 5];
        assert_eq!(find_best_bsgs_ratio(&two, n, 0), n);
        let index = BsgsIndex::new(&two, n, n);
        assert_eq!(index.rotations().into_iter().collect::<Vec<_>>(), [5]);
    }
}
