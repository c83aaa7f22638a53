//! Evaluating an [`EncodedLinearTransform`]: the BSGS sum with single or
//! double hoisting ([`Hoisting`]), written once over [`Step`], the handful
//! of operations the two differ in.
//!
//! Single hoisting (Halevi–Shoup, ePrint 2018/244 §4) works on ordinary
//! values: every baby-step rotation ends in a ModDown pair, and so does
//! every giant-step rotation. Double hoisting (Bossuat et al., Eurocrypt
//! 2021, Algorithm 6) works on values in the extended basis `Q_l ∪ P`:
//! baby steps end without ModDown, each giant step divides one part by
//! `P`, and one ModDown pair ends the transform ([`crate::hoisting`]).

use super::{Diagonal, EXPAND_BATCH, EncodedLinearTransform};
use crate::arith::{at_level, sum_term_by_term};
use crate::hoisting::{ExtendedArithmetic, Hoisting};
use crate::{Error, Result};

/// The operations of one BSGS evaluation on values `V` with plaintexts `P`
/// expanded from compact encodings `C`.
trait Step<P, C> {
    /// The value the sums are taken over.
    type V;
    /// Expands compact diagonals into plaintexts that multiply `V`.
    fn expand(&self, compact: &[&C]) -> Result<Vec<P>>;
    /// `a·p`.
    fn mul(&self, a: &Self::V, p: &P) -> Result<Self::V>;
    /// `acc += a·p`.
    fn mul_add(&self, acc: &mut Self::V, a: &Self::V, p: &P) -> Result<()>;
    /// `Σ_t a_t·p_t`, added into `acc` when it holds a value.
    fn mul_sum(&self, acc: &mut Option<Self::V>, terms: &[(&Self::V, &P)]) -> Result<()> {
        sum_term_by_term(
            acc,
            terms,
            |a, p| self.mul(a, p),
            |sum, a, p| self.mul_add(sum, a, p),
        )
    }
    /// Rotation by `steps`.
    fn rotate(&self, a: &Self::V, steps: i64) -> Result<Self::V>;
    /// `acc += b`.
    fn add(&self, acc: &mut Self::V, b: &Self::V) -> Result<()>;
}

/// Single hoisting: ordinary values and plaintexts over `Q_l`.
struct Single<'a, A>(&'a A);

impl<A: ExtendedArithmetic> Step<A::Plain, A::Compact> for Single<'_, A> {
    type V = A::Value;
    fn expand(&self, compact: &[&A::Compact]) -> Result<Vec<A::Plain>> {
        self.0.expand(compact)
    }
    fn mul(&self, a: &A::Value, p: &A::Plain) -> Result<A::Value> {
        self.0.mul_plain(a, p)
    }
    fn mul_add(&self, acc: &mut A::Value, a: &A::Value, p: &A::Plain) -> Result<()> {
        self.0.mul_plain_add_assign(acc, a, p)
    }
    fn mul_sum(&self, acc: &mut Option<A::Value>, terms: &[(&A::Value, &A::Plain)]) -> Result<()> {
        self.0.mul_plain_sum(acc, terms)
    }
    fn rotate(&self, a: &A::Value, steps: i64) -> Result<A::Value> {
        self.0.rotate(a, steps)
    }
    fn add(&self, acc: &mut A::Value, b: &A::Value) -> Result<()> {
        self.0.add_assign(acc, b)
    }
}

/// Double hoisting: extended values and plaintexts over `Q_l ∪ P`.
struct Double<'a, A>(&'a A);

impl<A: ExtendedArithmetic> Step<A::Plain, A::Compact> for Double<'_, A> {
    type V = A::Extended;
    fn expand(&self, compact: &[&A::Compact]) -> Result<Vec<A::Plain>> {
        self.0.expand_extended(compact)
    }
    fn mul(&self, a: &A::Extended, p: &A::Plain) -> Result<A::Extended> {
        self.0.mul_plain_extended(a, p)
    }
    fn mul_add(&self, acc: &mut A::Extended, a: &A::Extended, p: &A::Plain) -> Result<()> {
        self.0.mul_plain_extended_add_assign(acc, a, p)
    }
    fn rotate(&self, a: &A::Extended, steps: i64) -> Result<A::Extended> {
        self.0.rotate_extended(a, steps)
    }
    fn add(&self, acc: &mut A::Extended, b: &A::Extended) -> Result<()> {
        self.0.add_extended_assign(acc, b)
    }
}

impl<P, C> EncodedLinearTransform<P, C> {
    /// `M·x` without the final rescale: at the transform's level with scale
    /// `s_x · s_diag`. The input is brought down to the transform's level.
    /// The evaluation follows the transform's [`Hoisting`]; both give the
    /// same message, up to their different rounding noise.
    ///
    /// # Errors
    /// [`Error::LevelTooLow`] for an input below the transform's level,
    /// [`Error::SlotMismatch`], and the errors of `ops`.
    pub fn evaluate_unrescaled<A: ExtendedArithmetic<Plain = P, Compact = C>>(
        &self,
        ops: &A,
        x: &A::Value,
    ) -> Result<A::Value> {
        crate::error::only_output(
            self.evaluate_unrescaled_many(ops, &[x])?,
            "linear transform",
        )
    }

    /// [`EncodedLinearTransform::evaluate_unrescaled`] on each of `xs`
    /// together: every input's baby steps are rotated first, then each
    /// batch of compact diagonals is expanded once and multiplies every
    /// input's baby steps before the next batch is expanded — `xs.len()`
    /// times fewer expansions, for `xs.len()` inputs' baby steps held at
    /// once. Each output is the very one `evaluate_unrescaled` gives for its
    /// input: the same operations on the same values, in another order.
    ///
    /// # Errors
    /// As [`EncodedLinearTransform::evaluate_unrescaled`], for any input.
    pub fn evaluate_unrescaled_many<A: ExtendedArithmetic<Plain = P, Compact = C>>(
        &self,
        ops: &A,
        xs: &[&A::Value],
    ) -> Result<Vec<A::Value>> {
        let mut lowered = Vec::with_capacity(xs.len());
        for &x in xs {
            let slots = ops.slots(x);
            if slots != self.n {
                return Err(Error::SlotMismatch {
                    left: slots,
                    right: self.n,
                });
            }
            let level = ops.level(x);
            if level < self.level {
                return Err(Error::LevelTooLow {
                    operation: "linear transform",
                    needed: self.level,
                    level,
                });
            }
            lowered.push(at_level(ops, x, self.level)?);
        }
        let steps: Vec<i64> = self.babies.iter().map(|&b| b as i64).collect();
        match self.hoisting {
            // (`Auto` is resolved when the transform is encoded.)
            Hoisting::Single | Hoisting::Auto => {
                let rotated = lowered
                    .iter()
                    .map(|x| ops.rotate_hoisted(x, &steps))
                    .collect::<Result<Vec<_>>>()?;
                self.bsgs(&Single(ops), &rotated)
            }
            Hoisting::Double => {
                let rotated = lowered
                    .iter()
                    .map(|x| ops.rotate_hoisted_extended(x, &steps))
                    .collect::<Result<Vec<_>>>()?;
                self.bsgs(&Double(ops), &rotated)?
                    .iter()
                    .map(|sum| ops.mod_down(sum))
                    .collect()
            }
        }
    }

    /// `M·x`, rescaled once: level `level − 1`, scale
    /// `s_x · s_diag / q_level`.
    ///
    /// # Errors
    /// As [`EncodedLinearTransform::evaluate_unrescaled`] and the rescale.
    pub fn evaluate<A: ExtendedArithmetic<Plain = P, Compact = C>>(
        &self,
        ops: &A,
        x: &A::Value,
    ) -> Result<A::Value> {
        let v = self.evaluate_unrescaled(ops, x)?;
        ops.rescale(&v)
    }

    /// [`EncodedLinearTransform::evaluate`] on each of `xs`, sharing each
    /// compact diagonal's expansion (see
    /// [`EncodedLinearTransform::evaluate_unrescaled_many`]).
    ///
    /// # Errors
    /// As [`EncodedLinearTransform::evaluate`], for any input.
    pub fn evaluate_many<A: ExtendedArithmetic<Plain = P, Compact = C>>(
        &self,
        ops: &A,
        xs: &[&A::Value],
    ) -> Result<Vec<A::Value>> {
        self.evaluate_unrescaled_many(ops, xs)?
            .iter()
            .map(|v| ops.rescale(v))
            .collect()
    }

    /// Whether any diagonal is kept compact (expanded when used).
    pub fn has_compact_diagonals(&self) -> bool {
        self.diagonals().any(|d| d.as_compact().is_some())
    }

    /// The BSGS sums over each input's baby-step rotations (`rotated[i]`
    /// in the order of `self.babies`): each giant group's inner sums, then
    /// the giant steps, direct or by Horner's rule, per input.
    fn bsgs<S: Step<P, C>>(&self, ops: &S, rotated: &[Vec<S::V>]) -> Result<Vec<S::V>> {
        let count = rotated.len();
        let missing = Error::InvalidParameter {
            name: "baby step",
            reason: "missing from the hoisted rotations",
        };
        // Where each baby step lies in every input's rotations (found once
        // per diagonal, used for every input).
        let baby_index = |b: usize| self.babies.iter().position(|&x| x == b);
        // Σ_baby rot_baby(x)·diag for one giant step and every input,
        // accumulated in place; compact diagonals are expanded a batch at
        // a time, serve every input, and are dropped once multiplied.
        let inner_sums = |plains: &[(usize, Diagonal<P, C>)]| -> Result<Vec<Option<S::V>>> {
            let mut inner: Vec<Option<S::V>> = (0..count).map(|_| None).collect();
            for batch in plains.chunks(EXPAND_BATCH) {
                let compact: Vec<&C> = batch.iter().filter_map(|(_, d)| d.as_compact()).collect();
                let expanded = if compact.is_empty() {
                    Vec::new()
                } else {
                    ops.expand(&compact)?
                };
                let mut next = expanded.iter();
                let mut plain = Vec::with_capacity(batch.len());
                for (baby, diagonal) in batch {
                    plain.push((
                        baby_index(*baby),
                        match diagonal {
                            Diagonal::Encoded(p) => p,
                            Diagonal::Compact(_) => next.next().ok_or(Error::InvalidParameter {
                                name: "expand",
                                reason: "returned fewer plaintexts than it was given",
                            })?,
                        },
                    ));
                }
                for (input, sum) in rotated.iter().zip(inner.iter_mut()) {
                    let terms = plain
                        .iter()
                        .map(|&(index, p)| {
                            index
                                .and_then(|i| input.get(i))
                                .map(|v| (v, p))
                                .ok_or_else(|| missing.clone())
                        })
                        .collect::<Result<Vec<_>>>()?;
                    // The batch's products in one pass (one launch per
                    // polynomial on the GPU), added into the giant step's sum.
                    ops.mul_sum(sum, &terms)?;
                }
            }
            Ok(inner)
        };
        let group = |giant: usize| -> Result<Vec<Option<S::V>>> {
            match self.groups.iter().find(|(g, _)| *g == giant) {
                Some((_, plains)) => inner_sums(plains),
                None => Ok((0..count).map(|_| None).collect()),
            }
        };
        let add = |acc: &mut Option<S::V>, v: S::V| -> Result<()> {
            match acc.as_mut() {
                None => *acc = Some(v),
                Some(sum) => ops.add(sum, &v)?,
            }
            Ok(())
        };
        let mut acc: Vec<Option<S::V>> = (0..count).map(|_| None).collect();
        for (a, v) in acc.iter_mut().zip(group(0)?) {
            if let Some(v) = v {
                add(a, v)?;
            }
        }
        for &giant in &self.direct {
            for (a, v) in acc.iter_mut().zip(group(giant)?) {
                if let Some(v) = v {
                    add(a, ops.rotate(&v, giant as i64)?)?;
                }
            }
        }
        // Horner runs: y_K, then rot(·) + y_{K−1}, …, then one last rotation.
        let n = self.n;
        for (run, backward) in [(self.forward, false), (self.backward, true)] {
            let step = if backward { n - self.n1 } else { self.n1 };
            let mut chains: Vec<Option<S::V>> = (0..count).map(|_| None).collect();
            for k in (1..=run).rev() {
                // Giant step ±k·N1, as stored (in 0..n).
                let giant = if backward {
                    (n - (k * self.n1) % n) % n
                } else {
                    (k * self.n1) % n
                };
                for (chain, y) in chains.iter_mut().zip(group(giant)?) {
                    let y = y.ok_or(Error::InvalidParameter {
                        name: "giant step",
                        reason: "a Horner run has a gap",
                    })?;
                    *chain = Some(match chain.take() {
                        None => y,
                        Some(c) => {
                            let mut r = ops.rotate(&c, step as i64)?;
                            ops.add(&mut r, &y)?;
                            r
                        }
                    });
                }
            }
            for (a, chain) in acc.iter_mut().zip(chains) {
                if let Some(c) = chain {
                    add(a, ops.rotate(&c, step as i64)?)?;
                }
            }
        }
        acc.into_iter()
            .map(|a| {
                a.ok_or(Error::InvalidParameter {
                    name: "linear transform",
                    reason: "no diagonals",
                })
            })
            .collect()
    }
}
