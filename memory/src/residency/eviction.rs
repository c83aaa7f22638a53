//! Which resident managed buffer leaves the device first.
//!
//! # The problem with least recently used
//!
//! A bootstrap touches its evaluation keys and encoded DFT diagonals in the
//! same order every time (FGb: 42 keys of 157 MB and 2.2 GB of diagonals,
//! about 8.8 GB). Under a budget smaller than that cyclic working set, least
//! recently used evicts exactly the buffer that the cycle needs soonest, so
//! every buffer misses every cycle: measured on the H200 with the `static`
//! policy, a bootstrap took 392–438 ms under 2 GiB and 354–454 ms under
//! 6 GiB — a larger budget bought nothing — against 57 ms with no budget.
//! The optimum for such a loop (Belady's: evict the buffer whose next use is
//! farthest) keeps a fixed part of the cycle resident and streams the rest
//! through what is left, so the traffic per cycle is about the working set
//! minus the budget.
//!
//! # The options weighed
//!
//! * **MRU when the tracked managed bytes exceed the budget.** Right for the
//!   loop, wrong for what is reused at once: the conversion tables and
//!   constants that every operation declares are always the most recently
//!   used, so they would leave first and come back on the next operation; so
//!   would a fresh ciphertext that the next operation reads.
//! * **LRU-K (K = 2).** Orders by the time of the K-th last use. In a loop
//!   every buffer's second-to-last use is one period before its last, so the
//!   order is least recently used again: no help on loops (LRU-K resists
//!   one-off scans, not cycles).
//! * **ARC, 2Q.** They protect buffers seen twice from buffers seen once,
//!   which resists one-off scans; but once every buffer of the loop has been
//!   seen twice they are all in the frequent list, which is ordered by
//!   recency: a loop larger than the budget still misses on every buffer.
//! * **LIRS, CLOCK-Pro.** Handle loops (they rank by the distance between
//!   uses), but carry ghost entries, two lists or a clock hand with three
//!   kinds of pages and a self-tuning target size; more state and more cases
//!   than a few hundred buffers of very different sizes justify.
//! * **A detector** that switches from LRU to MRU-among-evictable when a
//!   buffer evicted within the last cycle comes back. It must define "the
//!   last cycle", it flips the whole order at once (hot constants included),
//!   and it needs a rule for switching back.
//!
//! # The alternative implemented: predicted next use
//!
//! [`Eviction::PredictedNextUse`] approximates Belady with what a repeating
//! workload makes predictable, each buffer's **reuse intervals**: the clock
//! ticks (one per declared buffer) between its successive uses. It predicts
//! the next interval from the last few, and evicts the buffer whose
//! predicted next use is farthest away.
//!
//! * A bootstrap repeats exactly, so a buffer's intervals repeat with a
//!   period of as many uses as it has per bootstrap: one for a diagonal,
//!   two for a rotation key that SlotToCoeff and CoeffToSlot share (their
//!   gaps alternate, short then long), more for a key two factors share.
//!   The last [`HISTORY`] intervals are searched for the shortest period up
//!   to [`MAX_PERIOD`] that they repeat with, and the interval one period
//!   back is the prediction. Without a period (bursts, irregular use) the
//!   shorter of the last two intervals is taken: a buffer used in bursts is
//!   judged by its spacing within a burst.
//! * When a buffer has no interval yet (it was used once), or its predicted
//!   use has passed without it, the wait ahead is taken to be as long as
//!   the time since its last use — the assumption under which least
//!   recently used is Belady's choice.
//!
//! So in a loop of period `P` every buffer's wait is `P − age` and the most
//! recently used leaves first (MRU within the loop): the buffers the loop
//! reached before the budget ran out stay, the others take turns in the room
//! left, and the traffic per cycle is about the working set minus the
//! budget. A buffer reused every few operations (conversion tables, the
//! ciphertext being worked on) has a short wait and stays, while loop
//! buffers with waits of a whole period go. A buffer used once, or one whose
//! reuse failed to come, is ranked by its age, so a workload without a loop,
//! or the first cycle of one, is evicted as least recently used would.
//!
//! Ties go to the least recently used, then to the lower id: decisions are
//! deterministic. Recording a use is `O(1)`; choosing a victim scans the
//! unpinned resident buffers, `O(n)` for `n` tracked buffers (a few hundred
//! in a bootstrap). The simulations in this module's tests (synthetic
//! loops, bootstrap-shaped cycles, hot sets beside scans, sliding windows
//! and phase changes, through the real manager and a recording driver)
//! put it within a few per cent of Belady's optimum on the loops and never
//! above least recently used elsewhere.
//!
//! # What the GPU measured: bytes are not time
//!
//! On the H200 (2026-11-21, FGb, `static` policy, `hemem bootstrap --budget
//! B --eviction E --iterations 3`, steady-state bootstraps), predicted next
//! use moved fewer bytes, as simulated, but took **longer**:
//!
//! | budget | LRU ms | LRU GB to device | next-use ms | next-use GB to device |
//! |---|---|---|---|---|
//! | 2 GiB | 329–339 | 9.55 | 828–1161 | 9.19–9.26 |
//! | 4 GiB | 291–367 | 8.91 | 654–941 | 7.14–8.64 |
//! | 6 GiB | 374–480 | 8.39 | 501–661 | 4.08–5.30 |
//!
//! Eviction and pool-trim counts per bootstrap are alike (600–950 buffers,
//! 110–250 trims), so what differs is *which* buffers go. The manager's
//! [`super::DriverTime`] (host time in each kind of driver call, reported per
//! bootstrap as `driver_ms`) shows where the time goes: a bootstrap under a
//! budget is bound by **host-blocking `cudaMemAdvise` calls**, not by PCIe.
//! Under LRU at 2 GiB, of 346–352 ms per bootstrap, setting read-mostly on
//! returning buffers took 91–93 ms, unsetting it before evictions 99–121 ms,
//! and the "asynchronous" prefetches blocked the host 36–57 ms each way.
//! Under next use at 4 GiB (800–1015 ms) the same calls took 287–526,
//! 171–176, 127–140 and 135–136 ms: advice on a buffer that was just used, or
//! whose migration is still queued, waits for the GPU (`cudaMemAdvise` is
//! ordered with no stream, so the driver settles the range first). Keeping the last 256 uses out of the
//! candidates brought next use down to LRU's time (310–369 ms at 4 GiB) but
//! also up to LRU's traffic; 1024 uses gave 609–642 ms. So least recently
//! used is the **default** for every policy, and predicted next use stays a
//! setting (`--eviction next-use`, `HEMEM_EVICTION=next-use`) for further
//! work. What would make either order faster is to take the advice calls off
//! the critical path: for read-only data (keys, diagonals), a device copy
//! backed by pinned host memory instead of managed memory with read-mostly
//! toggling — eviction frees the device copy (the host copy stays valid),
//! a return is a stream-ordered copy at ~50 GB/s that can be issued ahead of
//! use on the copy stream; about 9 GB per FGb bootstrap would then cost
//! ~190 ms of PCIe, overlappable with compute, against ~300 ms of blocked
//! host now.
//!
//! The `managed` policy evicts least recently used as well, like the Unified
//! Memory driver it stands for.

use std::fmt;
use std::str::FromStr;

use crate::{ConfigError, Error, Result};

/// The order in which the residency manager evicts resident managed buffers
/// that no live [`super::ResidencyGuard`] holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Eviction {
    /// The buffer whose last use is oldest leaves first (`lru`): the
    /// default, the fastest order measured on the GPU (see the module docs).
    #[default]
    LeastRecentlyUsed,
    /// The buffer whose next use, predicted from its reuse interval, is
    /// farthest away leaves first (`next-use`): fewer bytes moved, but slower
    /// on the H200; see the module docs.
    PredictedNextUse,
}

impl Eviction {
    /// Every order.
    pub const ALL: [Self; 2] = [Self::LeastRecentlyUsed, Self::PredictedNextUse];

    /// The name on the command line and in `HEMEM_EVICTION`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::LeastRecentlyUsed => "lru",
            Self::PredictedNextUse => "next-use",
        }
    }
}

impl fmt::Display for Eviction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Eviction {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|e| e.name() == s)
            .ok_or_else(|| ConfigError::UnknownEviction { name: s.to_owned() }.into())
    }
}

/// Reuse intervals kept per buffer.
pub const HISTORY: usize = 6;

/// The longest period (in uses) looked for in a buffer's intervals.
pub const MAX_PERIOD: usize = 3;

/// A buffer's uses on the manager's clock (one tick per declared buffer).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Uses {
    /// The tick of the last use; 0 before the first.
    last: u64,
    /// The last reuse intervals, most recent first; 0 where unknown.
    intervals: [u64; HISTORY],
}

impl Uses {
    /// The tick of the last use (0: never used).
    pub(super) fn last(&self) -> u64 {
        self.last
    }

    /// Records a use at tick `now` (later than every earlier use).
    pub(super) fn record(&mut self, now: u64) {
        if self.last > 0 {
            self.intervals.rotate_right(1);
            if let Some(newest) = self.intervals.first_mut() {
                *newest = now.saturating_sub(self.last).max(1);
            }
        }
        self.last = now;
    }

    /// The next reuse interval as predicted from the known ones: the one a
    /// period back when they repeat with a period up to [`MAX_PERIOD`]
    /// (checked over at most two periods), else the shorter of the last
    /// two; 0 while none is known.
    fn predicted_interval(&self) -> u64 {
        let known = self.intervals.iter().take_while(|&&i| i > 0).count();
        let history = self.intervals.get(..known).unwrap_or_default();
        for period in 1..=MAX_PERIOD {
            let pairs = known.saturating_sub(period).min(2 * period);
            let repeats = pairs > 0
                && history
                    .iter()
                    .zip(history.iter().skip(period))
                    .take(pairs)
                    .all(|(a, b)| a == b);
            if repeats {
                return history.get(period - 1).copied().unwrap_or(0);
            }
        }
        history.iter().take(2).copied().min().unwrap_or(0)
    }

    /// The ticks expected from `now` to the next use, under `eviction`: the
    /// buffer with the longest wait is evicted first.
    pub(super) fn expected_wait(&self, eviction: Eviction, now: u64) -> u64 {
        let age = now.saturating_sub(self.last);
        match eviction {
            Eviction::LeastRecentlyUsed => age,
            Eviction::PredictedNextUse => match self.predicted_interval() {
                interval if interval > age => interval - age,
                _ => age,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uses(ticks: &[u64]) -> Uses {
        let mut u = Uses::default();
        for &t in ticks {
            u.record(t);
        }
        u
    }

    #[test]
    fn names_parse_and_unknown_names_are_typed_errors() {
        for e in Eviction::ALL {
            assert_eq!(e.name().parse::<Eviction>(), Ok(e));
            assert_eq!(e.to_string(), e.name());
        }
        assert_eq!(
            "mru".parse::<Eviction>(),
            Err(ConfigError::UnknownEviction { name: "mru".into() }.into())
        );
        assert_eq!(Eviction::default(), Eviction::LeastRecentlyUsed);
    }

    #[test]
    fn least_recently_used_waits_as_long_as_the_age() {
        let u = uses(&[3, 10, 12]);
        assert_eq!(u.last(), 12);
        assert_eq!(u.expected_wait(Eviction::LeastRecentlyUsed, 20), 8);
    }

    #[test]
    fn predicted_next_use_follows_the_reuse_interval_then_the_age() {
        let wait = |ticks: &[u64], now| uses(ticks).expected_wait(Eviction::PredictedNextUse, now);
        // Used once: ranked by age, as least recently used ranks it.
        assert_eq!(wait(&[90], 100), 10);
        // A loop of period 50 used 10 ticks ago comes back in 40; its most
        // recently used peer waits longest, so it is evicted first.
        assert_eq!(wait(&[40, 90], 100), 40);
        assert_eq!(wait(&[49, 99], 100), 49);
        // A buffer reused every 4 ticks waits little even when older.
        assert_eq!(wait(&[90, 94, 98], 100), 2);
        // A predicted reuse that did not come: ranked by age again.
        assert_eq!(wait(&[10, 14, 18], 100), 82);
        // The first use of a burst after a long gap: the shorter of the
        // last two intervals (the spacing of the last burst) counts.
        assert_eq!(wait(&[5, 9, 95], 97), 2);
    }

    #[test]
    fn alternating_intervals_are_predicted_one_period_back() {
        // Gaps 10, 90, 10, 90, 10 (a key SlotToCoeff and CoeffToSlot share):
        // after a short gap the long one comes, and the other way round.
        let after_short = uses(&[1, 11, 101, 111, 201, 211]);
        assert_eq!(after_short.predicted_interval(), 90);
        assert_eq!(
            after_short.expected_wait(Eviction::PredictedNextUse, 215),
            86
        );
        let after_long = uses(&[1, 11, 101, 111, 201]);
        assert_eq!(after_long.predicted_interval(), 10);
        // Period three: 5, 20, 75 repeating.
        let three = uses(&[1, 6, 26, 101, 106, 126, 201]);
        assert_eq!(three.predicted_interval(), 5);
        let three = uses(&[1, 6, 26, 101, 106, 126, 201, 206]);
        assert_eq!(three.predicted_interval(), 20);
        // No period: the shorter of the last two.
        let irregular = uses(&[1, 8, 30, 33, 70]);
        assert_eq!(irregular.predicted_interval(), 3);
        // The history is bounded; a constant interval is period one.
        let steady = uses(&(1..=20).map(|i| 7 * i).collect::<Vec<_>>());
        assert_eq!(steady.predicted_interval(), 7);
        assert_eq!(Uses::default().predicted_interval(), 0);
    }
}
