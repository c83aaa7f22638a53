//! Many bootstraps run together, stage by stage, so that each key and
//! diagonal serves the whole batch; a batch the device budget refuses is
//! run again in halves.

use std::sync::atomic::{AtomicUsize, Ordering};

use hemem_ckks::eval::Ciphertext;

use super::Bootstrapper;
use crate::ckks_ops::CkksOps;
use crate::slot_to_coeff::slot_to_coeff_many;
use crate::{Error, Result};

/// Ciphertexts of a batch that share each expansion of a compact diagonal
/// by default ([`Bootstrapper::shared_expansions`]): a pair halves the
/// expansions for one more ciphertext's baby steps held at once (at FGb's
/// top level with single hoisting, the rotations of one input: a few
/// hundred MB).
pub const SHARED_EXPANSIONS: usize = 2;

impl Bootstrapper {
    /// Bootstraps a batch of ciphertexts of complex slot values, stage by
    /// stage: each SlotToCoeff and CoeffToSlot factor, each SSE key and each
    /// SubSum rotation is applied to the whole batch before the next, so the
    /// keys and diagonals it needs serve all of it while they are on the
    /// device — under a small budget, their transfers are paid once per
    /// batch instead of once per ciphertext (issue 11). The outputs, in
    /// input order, are the very ciphertexts [`Bootstrapper::bootstrap`]
    /// gives one by one. Inputs at different scales are grouped by scale for
    /// SlotToCoeff (its diagonals absorb the input scale).
    ///
    /// A batch's ciphertexts and key-switch temporaries are on the device
    /// together, so a large batch may not fit a small budget beside one
    /// key (FVb at 2 GiB: four ciphertexts need 1.5 GB of temporaries).
    /// A batch the budget refuses is run again as two halves, and the
    /// bootstrapper remembers the size that fit
    /// ([`Bootstrapper::batch_limit`]): the results are the same, only the
    /// transfers are shared by fewer ciphertexts.
    ///
    /// # Errors
    /// As [`Bootstrapper::bootstrap`], for any input; `OverBudget` only when
    /// a single ciphertext does not fit.
    pub fn bootstrap_many(&self, inputs: &[Ciphertext]) -> Result<Vec<Ciphertext>> {
        self.run_many(inputs, false)
    }

    /// [`Bootstrapper::bootstrap_many`] for real slot values
    /// ([`Bootstrapper::bootstrap_real`]).
    ///
    /// # Errors
    /// As [`Bootstrapper::bootstrap`], for any input.
    pub fn bootstrap_real_many(&self, inputs: &[Ciphertext]) -> Result<Vec<Ciphertext>> {
        self.run_many(inputs, true)
    }

    /// The most ciphertexts [`Bootstrapper::bootstrap_many`] runs together
    /// on this bootstrapper's budget: `usize::MAX` until a batch was
    /// refused, then the size that fit.
    pub fn batch_limit(&self) -> usize {
        self.batch_limit.load(Ordering::Relaxed)
    }

    fn run_many(&self, inputs: &[Ciphertext], real_only: bool) -> Result<Vec<Ciphertext>> {
        for input in inputs {
            self.check_input(input)?;
        }
        in_sub_batches(
            inputs,
            &self.batch_limit,
            &self.shared_expansions,
            |batch| self.run_batch(batch, real_only),
        )
    }

    /// One batch of [`Bootstrapper::run_many`], stage by stage, as one
    /// phase of the memory system's look-ahead; a batch the budget refuses
    /// abandons its phase (it will run again smaller: what it recorded and
    /// the peak it reached are not the next runs').
    fn run_batch(&self, inputs: &[Ciphertext], real_only: bool) -> Result<Vec<Ciphertext>> {
        let scales: Vec<f64> = inputs.iter().map(|c| c.scale().get()).collect();
        let phase = self.phase(real_only, &scales);
        let result = self.run_stages(inputs, real_only);
        if result.as_ref().is_err_and(is_over_budget) {
            phase.abandon();
        }
        result
    }

    /// The stages of [`Bootstrapper::run_batch`].
    fn run_stages(&self, inputs: &[Ciphertext], real_only: bool) -> Result<Vec<Ciphertext>> {
        let ops = CkksOps::new(&self.evaluator);
        // SlotToCoeff, one group of equal input scales at a time.
        let mut groups: Vec<(u64, Vec<usize>)> = Vec::new();
        for (i, input) in inputs.iter().enumerate() {
            let bits = input.scale().get().to_bits();
            match groups.iter_mut().find(|(b, _)| *b == bits) {
                Some((_, members)) => members.push(i),
                None => groups.push((bits, vec![i])),
            }
        }
        let mut coeffs: Vec<Option<Ciphertext>> = inputs.iter().map(|_| None).collect();
        for (bits, members) in &groups {
            let stc = self.stc_for(f64::from_bits(*bits))?;
            let batch: Vec<&Ciphertext> = members.iter().filter_map(|&i| inputs.get(i)).collect();
            for (&i, c) in members.iter().zip(slot_to_coeff_many(
                &ops,
                &batch,
                &stc,
                self.shared_expansions(),
            )?) {
                if let Some(slot) = coeffs.get_mut(i) {
                    *slot = Some(c);
                }
            }
        }
        let coeffs =
            coeffs
                .into_iter()
                .collect::<Option<Vec<_>>>()
                .ok_or(Error::InvalidParameter {
                    name: "inputs",
                    reason: "lost in SlotToCoeff",
                })?;
        let deltas: Vec<f64> = coeffs.iter().map(|c| c.scale().get()).collect();
        let raised = self.mod_raise_all(coeffs)?;
        let raised = if self.subsum.is_empty() {
            raised
        } else {
            self.subsum_all(raised)?
        };
        let vs = self.cts.evaluate_shared(
            &ops,
            &raised.iter().collect::<Vec<_>>(),
            self.shared_expansions(),
        )?;
        vs.iter()
            .zip(deltas)
            .map(|(v, delta0)| self.finish(&ops, v, delta0, real_only, &mut |_, _| {}))
            .collect()
    }
}

/// Runs `inputs` through `run` in batches of at most `limit`, running a
/// batch of more than one input again whenever the device budget refuses
/// it: first with half as many inputs sharing each expansion (`shared`,
/// which `run` reads; sharing holds more baby steps at once and saves
/// less than the batch's shared transfers), then, once none share, with
/// `limit` halved. The outputs in input order.
fn in_sub_batches<T, U>(
    inputs: &[T],
    limit: &AtomicUsize,
    shared: &AtomicUsize,
    mut run: impl FnMut(&[T]) -> Result<Vec<U>>,
) -> Result<Vec<U>> {
    let mut outputs = Vec::with_capacity(inputs.len());
    let mut rest = inputs;
    while !rest.is_empty() {
        let take = rest.len().min(limit.load(Ordering::Relaxed).max(1));
        let (batch, after) = rest.split_at(take);
        match run(batch) {
            Ok(done) => {
                outputs.extend(done);
                rest = after;
            }
            Err(e) if take > 1 && is_over_budget(&e) => {
                let sharing = shared.load(Ordering::Relaxed);
                if sharing > 1 {
                    shared.store(sharing / 2, Ordering::Relaxed);
                } else {
                    limit.store(take / 2, Ordering::Relaxed);
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(outputs)
}

/// Whether `e` is the memory system's refusal to go over the device budget.
pub(super) fn is_over_budget(e: &Error) -> bool {
    matches!(
        e,
        Error::Ckks(hemem_ckks::Error::Memory(
            hemem_memory::Error::OverBudget { .. }
        ))
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;

    /// A batch the budget refuses is run again with fewer inputs sharing
    /// each expansion, then as halves, until one fits; the outputs keep
    /// the input order, the sharing and size that fit are kept, and other
    /// errors (or a refused single input) are returned.
    #[test]
    fn a_refused_batch_is_halved_until_it_fits_and_keeps_the_input_order() {
        use hemem_memory::{Error as MemoryError, InUse};
        let over = || -> Error {
            hemem_ckks::Error::Memory(MemoryError::OverBudget {
                requested: 1 << 30,
                placing: None,
                budget: 2 << 30,
                in_use: Box::new(InUse::default()),
            })
            .into()
        };
        let inputs: Vec<u64> = (0..11).map(|i| 1000 + 37 * i).collect();
        // A batch sharing by four runs once shared by two, then alone.
        for fits_sharing in [4usize, 2, 1] {
            let limit = AtomicUsize::new(usize::MAX);
            let shared = AtomicUsize::new(4);
            let mut tries = Vec::new();
            let out = in_sub_batches(&inputs, &limit, &shared, |batch| {
                let sharing = shared.load(Ordering::Relaxed);
                tries.push((batch.len(), sharing));
                if sharing > fits_sharing {
                    return Err(over());
                }
                Ok(batch.iter().map(|x| x * 3).collect())
            })
            .expect("fits unshared");
            assert_eq!(out, inputs.iter().map(|x| x * 3).collect::<Vec<_>>());
            let wanted: Vec<(usize, usize)> = [4, 2, 1]
                .into_iter()
                .filter(|&s| s >= fits_sharing)
                .map(|s| (inputs.len(), s))
                .collect();
            assert_eq!(tries, wanted);
            assert_eq!(limit.load(Ordering::Relaxed), usize::MAX);
            assert_eq!(shared.load(Ordering::Relaxed), fits_sharing);
        }
        for fits in [1usize, 2, 3, 8, 11] {
            let limit = AtomicUsize::new(usize::MAX);
            let shared = AtomicUsize::new(1);
            let mut sizes = Vec::new();
            let out = in_sub_batches(&inputs, &limit, &shared, |batch| {
                sizes.push(batch.len());
                if batch.len() > fits {
                    return Err(over());
                }
                Ok(batch.iter().map(|x| x * 3).collect())
            })
            .expect("a single input fits");
            assert_eq!(out, inputs.iter().map(|x| x * 3).collect::<Vec<_>>());
            let settled = limit.load(Ordering::Relaxed);
            if fits >= inputs.len() {
                assert_eq!((settled, sizes), (usize::MAX, vec![inputs.len()]));
            } else {
                // Halving from 11: 11, 5, 2, 1; the size that fit is kept.
                assert!(sizes.iter().skip(1).all(|&n| n <= 5), "{fits}: {sizes:?}");
                assert_eq!(
                    settled,
                    [5usize, 2, 1].into_iter().find(|&s| s <= fits).unwrap()
                );
            }
        }
        // Other errors, and a refusal of a single input, are returned.
        let limit = AtomicUsize::new(usize::MAX);
        let shared = AtomicUsize::new(2);
        let e = in_sub_batches(&inputs, &limit, &shared, |_| -> Result<Vec<u64>> {
            Err(over())
        });
        assert!(e.is_err_and(|e| is_over_budget(&e)));
        assert_eq!(limit.load(Ordering::Relaxed), 1);
        assert_eq!(shared.load(Ordering::Relaxed), 1);
        let limit = AtomicUsize::new(usize::MAX);
        let e = in_sub_batches(&inputs, &limit, &shared, |_| -> Result<Vec<u64>> {
            Err(Error::NonFinite)
        });
        assert_eq!(e, Err(Error::NonFinite));
        assert_eq!(limit.load(Ordering::Relaxed), usize::MAX);
    }
}
