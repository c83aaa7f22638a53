//! A linear transform's diagonals encoded for evaluation, in full or
//! compact, and how the bootstrapper chooses between the forms.

use hemem_ckks::encoding::{CompactPlaintext, Plaintext};

use crate::hoisting::Hoisting;
use crate::{Error, Result};

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

/// A [`LinearTransform`](super::LinearTransform) with its diagonals encoded at one level and scale,
/// kept as encoded plaintexts `P` or compact encodings `C`
/// ([`DiagonalStorage`]).
#[derive(Clone, Debug)]
pub struct EncodedLinearTransform<P, C = P> {
    pub(super) n: usize,
    pub(super) n1: usize,
    pub(super) level: usize,
    pub(super) scale: f64,
    pub(super) storage: DiagonalStorage,
    pub(super) hoisting: Hoisting,
    pub(super) babies: Vec<usize>,
    pub(super) forward: usize,
    pub(super) backward: usize,
    pub(super) direct: Vec<usize>,
    pub(super) groups: Vec<GiantGroup<P, C>>,
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
