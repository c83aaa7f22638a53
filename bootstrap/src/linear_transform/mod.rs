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

use std::collections::BTreeSet;

use hemem_ckks::encoding::{is_short_period, least_period};
use num_complex::Complex64;

use crate::dft::DiagonalMatrix;
use crate::hoisting::ExtendedArithmetic;
pub use crate::hoisting::Hoisting;
use crate::{Error, Result};

mod bsgs;
mod encoded;
mod evaluate;
#[cfg(test)]
mod tests;

pub use bsgs::{BsgsIndex, find_best_bsgs_ratio};
pub use encoded::{Diagonal, DiagonalStorage, EXPAND_BATCH, EncodedLinearTransform, GiantGroup};

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
        let index = BsgsIndex::with_ratio(&matrix.indices(), matrix.slots(), log_bsgs_ratio);
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
