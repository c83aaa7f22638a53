//! How a batch is spread over a group's devices: the shares ([`Split`]),
//! and the scheduler that runs them on one host thread per device and puts
//! the results back in input order. Written over plain closures, so that it
//! is tested apart from CKKS.

use std::ops::Range;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::{Error, Result};

/// How [`super::MultiBootstrapper::bootstrap_many`] spreads a batch over
/// its devices.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Split {
    /// Contiguous shares whose sizes differ by at most one, one per device,
    /// each bootstrapped as one batch (the default). Each device then
    /// applies every key and diagonal to its whole share before the next,
    /// so under a budget a streamed key crosses PCIe once per share (issue
    /// 11's batching), and the devices never coordinate. Best when the
    /// devices are alike: the batch takes as long as the largest share.
    #[default]
    Even,
    /// Work stealing: the batch is cut into contiguous chunks of `chunk`
    /// inputs, and whichever device is free takes the next chunk. Balances
    /// unlike devices (a budgeted card beside a free one, two generations
    /// of GPU) at the price of smaller batches: a streamed key serves
    /// `chunk` inputs at a time instead of a whole share.
    Stealing {
        /// Inputs per chunk (at least 1).
        chunk: usize,
    },
}

impl Split {
    /// The ranges of input indices this split cuts `len` inputs into for
    /// `devices` devices, in input order, none empty: with [`Split::Even`]
    /// at most `devices` shares, the first `len % devices` one input longer;
    /// with [`Split::Stealing`] chunks of `chunk` inputs, the last one
    /// shorter when `chunk` does not divide `len`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for no device or a chunk of 0 inputs.
    pub fn ranges(self, len: usize, devices: usize) -> Result<Vec<Range<usize>>> {
        if devices == 0 {
            return Err(Error::InvalidParameter {
                name: "devices",
                reason: "a device group needs at least one device",
            });
        }
        let mut ranges = Vec::new();
        match self {
            Self::Even => {
                let (base, extra) = (len / devices, len % devices);
                let mut start = 0;
                for d in 0..devices {
                    let size = base + usize::from(d < extra);
                    if size > 0 {
                        ranges.push(start..start + size);
                    }
                    start += size;
                }
            }
            Self::Stealing { chunk } => {
                if chunk == 0 {
                    return Err(Error::InvalidParameter {
                        name: "chunk",
                        reason: "a work-stealing chunk holds at least one input",
                    });
                }
                let mut start = 0;
                while start < len {
                    let end = len.min(start + chunk);
                    ranges.push(start..end);
                    start = end;
                }
            }
        }
        Ok(ranges)
    }
}

/// One worker's failure on one range of inputs.
#[derive(Debug)]
pub(crate) struct RangeFailure {
    /// The worker (the device's index in its group).
    pub(crate) worker: usize,
    /// The inputs it was given and did not return.
    pub(crate) inputs: Range<usize>,
    /// Why.
    pub(crate) error: Error,
}

/// What one worker hands back: the outputs of each range it finished, and
/// its failure, if any.
type WorkerResult<U> = (Vec<(Range<usize>, Vec<U>)>, Option<RangeFailure>);

/// Runs `run(worker, range)` over the ranges `split` cuts `len` inputs into,
/// on one scoped host thread per worker (`workers` of them; workers without
/// a range are not started), and returns the outputs in input order.
///
/// With [`Split::Even`] worker `i` runs the `i`-th share; with
/// [`Split::Stealing`] each worker takes the next untaken range until none
/// is left. After every range `done(finished inputs so far)` is called,
/// under a lock, so the counts arrive in increasing order. A range whose
/// `run` fails (or panics, or returns a number of outputs other than the
/// range's length) is a [`RangeFailure`] of that worker, which then stops;
/// with [`Split::Stealing`], once any worker has failed the others take no
/// new range (they finish the one they hold), while even shares all run, so
/// that each failing one is reported. Every failure is returned, ordered by
/// input.
///
/// # Errors
/// The ranges' failures, or a one-element list holding the split's own
/// error ([`Split::ranges`]) attributed to worker 0 with no inputs.
pub(crate) fn run_split<U: Send>(
    len: usize,
    workers: usize,
    split: Split,
    run: impl Fn(usize, Range<usize>) -> Result<Vec<U>> + Sync,
    done: impl Fn(usize) + Sync,
) -> std::result::Result<Vec<U>, Vec<RangeFailure>> {
    let ranges = split.ranges(len, workers).map_err(|error| {
        vec![RangeFailure {
            worker: 0,
            inputs: 0..0,
            error,
        }]
    })?;
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let finished = Mutex::new(0usize);
    let work = |worker: usize| -> WorkerResult<U> {
        let mut outputs = Vec::new();
        let mut first = true;
        loop {
            // Stealing workers take no new chunk once one failed; an even
            // share always runs, so that every failing share is reported.
            if matches!(split, Split::Stealing { .. }) && failed.load(Ordering::Acquire) {
                break;
            }
            let range = match split {
                Split::Even if first => ranges.get(worker).cloned(),
                Split::Even => None,
                Split::Stealing { .. } => ranges.get(next.fetch_add(1, Ordering::Relaxed)).cloned(),
            };
            first = false;
            let Some(range) = range else { break };
            let result = catch_unwind(AssertUnwindSafe(|| run(worker, range.clone())))
                .unwrap_or(Err(Error::WorkerPanicked { worker }));
            let result = result.and_then(|out| {
                if out.len() == range.len() {
                    Ok(out)
                } else {
                    Err(Error::LengthMismatch {
                        expected: range.len(),
                        actual: out.len(),
                    })
                }
            });
            match result {
                Ok(out) => {
                    let mut count = finished.lock().unwrap_or_else(PoisonError::into_inner);
                    *count += out.len();
                    done(*count);
                    drop(count);
                    outputs.push((range, out));
                }
                Err(error) => {
                    failed.store(true, Ordering::Release);
                    return (
                        outputs,
                        Some(RangeFailure {
                            worker,
                            inputs: range,
                            error,
                        }),
                    );
                }
            }
        }
        (outputs, None)
    };
    let started = match split {
        Split::Even => ranges.len(),
        Split::Stealing { .. } => workers.min(ranges.len()),
    };
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..started)
            .map(|worker| (worker, s.spawn(move || work(worker))))
            .collect();
        handles
            .into_iter()
            .map(|(worker, h)| {
                // `work` catches the panics of `run`; one of its own is a
                // failure of the worker with no inputs named.
                h.join().unwrap_or_else(|_| {
                    (
                        Vec::new(),
                        Some(RangeFailure {
                            worker,
                            inputs: 0..0,
                            error: Error::WorkerPanicked { worker },
                        }),
                    )
                })
            })
            .collect()
    });
    let mut slots: Vec<Option<U>> = (0..len).map(|_| None).collect();
    let mut failures = Vec::new();
    for (outputs, failure) in results {
        for (range, out) in outputs {
            for (slot, o) in slots.iter_mut().skip(range.start).zip(out) {
                *slot = Some(o);
            }
        }
        failures.extend(failure);
    }
    if !failures.is_empty() {
        failures.sort_by_key(|f| (f.inputs.start, f.worker));
        return Err(failures);
    }
    slots
        .into_iter()
        .collect::<Option<Vec<U>>>()
        .ok_or_else(|| {
            vec![RangeFailure {
                worker: 0,
                inputs: 0..len,
                error: Error::InvalidParameter {
                    name: "inputs",
                    reason: "an input was assigned to no device",
                },
            }]
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]

    use std::collections::BTreeSet;

    use hemem_ckks::testing::seeded_rng;
    use rand_core::Rng;

    use super::*;

    /// Every split covers `0..len` with contiguous, non-empty ranges in
    /// order; even shares differ by at most one input and there are
    /// `min(len, devices)` of them; chunks are `chunk` long but the last.
    #[test]
    fn ranges_cover_the_batch_in_order() {
        for len in 0..40 {
            for devices in 1..9 {
                for split in [
                    Split::Even,
                    Split::Stealing { chunk: 1 },
                    Split::Stealing { chunk: 3 },
                    Split::Stealing { chunk: 64 },
                ] {
                    let ranges = split.ranges(len, devices).unwrap();
                    let mut next = 0;
                    for r in &ranges {
                        assert_eq!(r.start, next, "{split:?} {len} {devices}: {ranges:?}");
                        assert!(r.end > r.start);
                        next = r.end;
                    }
                    assert_eq!(next, len);
                    let sizes: Vec<usize> = ranges.iter().map(Range::len).collect();
                    match split {
                        Split::Even => {
                            assert_eq!(ranges.len(), len.min(devices));
                            let (lo, hi) = (sizes.iter().min(), sizes.iter().max());
                            if let (Some(lo), Some(hi)) = (lo, hi) {
                                assert!(hi - lo <= 1, "{sizes:?}");
                            }
                            // Longer shares first.
                            assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "{sizes:?}");
                        }
                        Split::Stealing { chunk } => {
                            assert_eq!(ranges.len(), len.div_ceil(chunk));
                            let (last, rest) = sizes.split_last().unwrap_or((&0, &[]));
                            assert!(rest.iter().all(|&s| s == chunk));
                            assert!(*last <= chunk);
                        }
                    }
                }
            }
        }
        assert_eq!(
            Split::Even.ranges(7, 3).unwrap(),
            vec![0..3, 3..5, 5..7],
            "7 over 3: 3, 2, 2"
        );
        assert_eq!(Split::Even.ranges(2, 3).unwrap(), vec![0..1, 1..2]);
        assert!(matches!(
            Split::Even.ranges(3, 0),
            Err(Error::InvalidParameter {
                name: "devices",
                ..
            })
        ));
        assert!(matches!(
            Split::Stealing { chunk: 0 }.ranges(3, 2),
            Err(Error::InvalidParameter { name: "chunk", .. })
        ));
    }

    fn random_inputs(seed: u64, len: usize) -> Vec<u64> {
        let mut rng = seeded_rng(seed);
        (0..len).map(|_| rng.next_u64() >> 1).collect()
    }

    /// The outputs come back in input order whatever the split, the device
    /// count and the order in which the workers finish (each sleeps a
    /// random time); even shares go to the worker of their index; every
    /// range runs exactly once; progress counts increase to the total.
    #[test]
    fn outputs_keep_the_input_order() {
        let mut rng = seeded_rng(71);
        for (len, workers) in [(0, 2), (1, 3), (2, 3), (5, 3), (7, 2), (16, 4), (9, 1)] {
            let inputs = random_inputs(len as u64, len);
            for split in [
                Split::Even,
                Split::Stealing { chunk: 1 },
                Split::Stealing { chunk: 2 },
            ] {
                let delays: Vec<u64> = (0..len).map(|_| rng.next_u64() % 3).collect();
                let calls = Mutex::new(Vec::new());
                let progress = Mutex::new(Vec::new());
                let out = run_split(
                    len,
                    workers,
                    split,
                    |w, r: Range<usize>| {
                        calls.lock().unwrap().push((w, r.clone()));
                        std::thread::sleep(std::time::Duration::from_millis(delays[r.start]));
                        Ok(inputs[r].iter().map(|x| x.wrapping_mul(3) ^ 5).collect())
                    },
                    |done| progress.lock().unwrap().push(done),
                )
                .unwrap();
                let expected: Vec<u64> = inputs.iter().map(|x| x.wrapping_mul(3) ^ 5).collect();
                assert_eq!(out, expected, "{split:?} {len} over {workers}");
                let calls = calls.into_inner().unwrap();
                let ranges: BTreeSet<(usize, usize)> =
                    calls.iter().map(|(_, r)| (r.start, r.end)).collect();
                let want: BTreeSet<(usize, usize)> = split
                    .ranges(len, workers)
                    .unwrap()
                    .into_iter()
                    .map(|r| (r.start, r.end))
                    .collect();
                assert_eq!(ranges, want);
                assert_eq!(calls.len(), want.len(), "every range exactly once");
                if split == Split::Even {
                    let shares = split.ranges(len, workers).unwrap();
                    for (w, r) in &calls {
                        assert_eq!(&shares[*w], r);
                    }
                }
                assert!(calls.iter().all(|(w, _)| *w < workers));
                let progress = progress.into_inner().unwrap();
                assert!(progress.windows(2).all(|p| p[0] < p[1]), "{progress:?}");
                assert_eq!(progress.last().copied().unwrap_or(0), len);
            }
        }
    }

    /// A failing worker is reported with the inputs it held, every failure
    /// is kept (two workers failing give two), panics and short outputs are
    /// failures too, and no result is returned.
    #[test]
    fn failures_name_the_worker_and_its_inputs() {
        let inputs = random_inputs(3, 6);
        let ok = |r: Range<usize>| -> Result<Vec<u64>> { Ok(inputs[r].to_vec()) };
        // Even over 3: 0..2, 2..4, 4..6; worker 2 fails.
        let failures = run_split(
            6,
            3,
            Split::Even,
            |w, r| if w == 2 { Err(Error::NonFinite) } else { ok(r) },
            |_| {},
        )
        .unwrap_err();
        assert_eq!(failures.len(), 1);
        assert_eq!((failures[0].worker, failures[0].inputs.clone()), (2, 4..6));
        assert_eq!(failures[0].error, Error::NonFinite);
        // Workers 0 and 2 fail: both are reported, in input order.
        let failures = run_split(
            6,
            3,
            Split::Even,
            |w, r| {
                if w == 1 {
                    ok(r)
                } else {
                    Err(Error::InvalidDegree { degree: w })
                }
            },
            |_| {},
        )
        .unwrap_err();
        let seen: Vec<_> = failures
            .iter()
            .map(|f| (f.worker, f.inputs.clone(), f.error.clone()))
            .collect();
        assert_eq!(
            seen,
            vec![
                (0, 0..2, Error::InvalidDegree { degree: 0 }),
                (2, 4..6, Error::InvalidDegree { degree: 2 })
            ]
        );
        // A panic and a short output.
        let failures = run_split(
            6,
            3,
            Split::Even,
            |w, r: Range<usize>| match w {
                0 => panic!("a bug in worker 0"),
                1 => Ok(inputs[r.start..r.start + 1].to_vec()),
                _ => ok(r),
            },
            |_| {},
        )
        .unwrap_err();
        assert_eq!(failures.len(), 2);
        assert_eq!(failures[0].error, Error::WorkerPanicked { worker: 0 });
        assert_eq!(failures[0].inputs, 0..2);
        assert_eq!(
            failures[1].error,
            Error::LengthMismatch {
                expected: 2,
                actual: 1
            }
        );
        // Stealing: the failing chunk is reported; the others stop taking
        // chunks once it failed, so fewer than all chunks run after it.
        let ran = AtomicUsize::new(0);
        let failures = run_split(
            6,
            2,
            Split::Stealing { chunk: 1 },
            |_, r: Range<usize>| {
                ran.fetch_add(1, Ordering::Relaxed);
                if r.start == 0 {
                    Err(Error::NonFinite)
                } else {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    ok(r)
                }
            },
            |_| {},
        )
        .unwrap_err();
        assert_eq!(failures.len(), 1);
        assert_eq!(failures[0].inputs, 0..1);
        assert!(ran.load(Ordering::Relaxed) < 6, "the others stopped");
        // No worker: the split's own error.
        let failures = run_split(3, 0, Split::Even, |_, r| ok(r), |_| {}).unwrap_err();
        assert!(matches!(
            failures[0].error,
            Error::InvalidParameter {
                name: "devices",
                ..
            }
        ));
    }
}
