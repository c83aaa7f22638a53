//! A homomorphic DFT with its factors encoded, and their evaluation.

use super::DftKind;
use crate::hoisting::ExtendedArithmetic;
use crate::linear_transform::EncodedLinearTransform;
use crate::{Error, Result};

/// A [`HomomorphicDft`](super::HomomorphicDft) whose factors are encoded (one
/// [`EncodedLinearTransform`] per level): what the bootstrapper keeps as
/// `BootstrapConstant` memory, as encoded plaintexts `P` or compact
/// encodings `C`.
#[derive(Clone, Debug)]
pub struct EncodedDft<P, C = P> {
    pub(super) kind: DftKind,
    pub(super) transforms: Vec<EncodedLinearTransform<P, C>>,
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
