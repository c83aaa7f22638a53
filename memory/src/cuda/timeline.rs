//! Where a run's device time goes between kernels: the intervals CUPTI
//! recorded for kernels (and memsets), host→device copies and the host's
//! driver calls ([`super::cupti::KernelTimeline`]), summed into busy and
//! idle time. An idle stretch during which a copy was in flight is most
//! likely a wait for a fetch; one with no copy running is the device
//! waiting for the host to queue work, and the driver calls that overlap
//! it say whether the host was blocked in one (a synchronisation, an
//! allocation) or busy with its own work.

/// Device intervals, `(start, end)` in nanoseconds of CUPTI's clock.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Timeline {
    /// Kernels, in any order.
    pub kernels: Vec<(u64, u64)>,
    /// The kernels' names, in the order of `kernels` (empty when not
    /// known).
    pub names: Vec<String>,
    /// Host→device copies, in any order.
    pub copies: Vec<(u64, u64)>,
    /// The host's driver calls: `(start, end, CUPTI callback id)`.
    pub calls: Vec<(u64, u64, u32)>,
}

/// How many of the longest idle stretches [`Timeline::summary`] lists.
pub const LONGEST: usize = 8;

/// A [`Timeline`]'s totals, from its first kernel's start to its last
/// kernel's end, in nanoseconds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TimelineSummary {
    /// First kernel start to last kernel end.
    pub span_ns: u64,
    /// Time at least one kernel ran.
    pub busy_ns: u64,
    /// Time no kernel ran (`span_ns - busy_ns`).
    pub idle_ns: u64,
    /// The part of `idle_ns` during which a host→device copy was in flight.
    pub idle_copying_ns: u64,
    /// Kernels counted.
    pub kernels: u64,
    /// The longest idle stretches, longest first.
    pub longest: Vec<Gap>,
    /// The host's time in each driver call over the whole timeline (not
    /// only its idle stretches), most time first, at most [`HOST_CALLS`]:
    /// a host that takes longer to queue a run than the device to run it
    /// shows here whether it is blocked in the driver (a synchronisation,
    /// a pool allocation, a copy) or busy in its own code.
    pub host_calls: Vec<HostCalls>,
}

/// How many driver calls [`TimelineSummary::host_calls`] lists.
pub const HOST_CALLS: usize = 12;

/// One driver call's share of the host's time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostCalls {
    /// The CUPTI callback id.
    pub cbid: u32,
    /// Calls made.
    pub count: u64,
    /// Their summed duration.
    pub ns: u64,
}

/// An idle stretch between two kernels.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gap {
    /// Its length.
    pub ns: u64,
    /// How much of it a host→device copy was in flight.
    pub copying_ns: u64,
    /// The kernel that ended where it starts, and the one that started
    /// where it ends, where their names are known.
    pub before: Option<String>,
    /// See `before`.
    pub after: Option<String>,
    /// How many kernels ran before it.
    pub kernels_before: usize,
    /// The driver calls that overlap it most: callback id and overlap, the
    /// longest first (at most three).
    pub calls: Vec<(u32, u64)>,
}

/// Sorted, merged intervals.
fn union(mut intervals: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    intervals.retain(|&(s, e)| e > s);
    intervals.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(intervals.len());
    for (s, e) in intervals {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
}

/// How much of `[from, to)` the sorted, merged `intervals` cover.
fn covered(intervals: &[(u64, u64)], from: u64, to: u64) -> u64 {
    let first = intervals.partition_point(|&(_, e)| e <= from);
    intervals
        .iter()
        .skip(first)
        .take_while(|&&(s, _)| s < to)
        .map(|&(s, e)| e.min(to).saturating_sub(s.max(from)))
        .sum()
}

/// How many driver calls [`Gap::calls`] names.
const CALLS: usize = 3;

impl Timeline {
    /// The driver calls overlapping `[from, to)` most, longest overlap
    /// first.
    fn calls_within(&self, from: u64, to: u64) -> Vec<(u32, u64)> {
        let mut calls: Vec<(u32, u64)> = self
            .calls
            .iter()
            .filter(|c| c.0 < to && c.1 > from)
            .map(|c| (c.2, c.1.min(to) - c.0.max(from)))
            .collect();
        calls.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        calls.truncate(CALLS);
        calls
    }

    /// The busy and idle time between the first kernel's start and the last
    /// kernel's end (all zero without kernels).
    pub fn summary(&self) -> TimelineSummary {
        let kernels = union(self.kernels.clone());
        let copies = union(self.copies.clone());
        let (Some(first), Some(last)) = (kernels.first(), kernels.last()) else {
            return TimelineSummary::default();
        };
        let span_ns = last.1 - first.0;
        let busy_ns: u64 = kernels.iter().map(|&(s, e)| e - s).sum();
        // (length, copying, end of the kernel before, start of the next).
        let mut gaps: Vec<(u64, u64, u64, u64)> = kernels
            .windows(2)
            .filter_map(|w| match w {
                [a, b] => Some((b.0 - a.1, covered(&copies, a.1, b.0), a.1, b.0)),
                _ => None,
            })
            .collect();
        let mut starts: Vec<u64> = self.kernels.iter().map(|k| k.0).collect();
        starts.sort_unstable();
        let idle_copying_ns = gaps.iter().map(|g| g.1).sum();
        gaps.sort_unstable_by(|a, b| b.cmp(a));
        gaps.truncate(LONGEST);
        let name = |at: &dyn Fn(&(u64, u64)) -> bool| {
            let k = self.kernels.iter().position(at)?;
            self.names.get(k).cloned()
        };
        let gaps = gaps
            .into_iter()
            .map(|(ns, copying_ns, end, start)| Gap {
                ns,
                copying_ns,
                before: name(&|k| k.1 == end),
                after: name(&|k| k.0 == start),
                kernels_before: starts.partition_point(|&s| s < start),
                calls: self.calls_within(end, start),
            })
            .collect();
        TimelineSummary {
            span_ns,
            busy_ns,
            idle_ns: span_ns - busy_ns,
            idle_copying_ns,
            kernels: self.kernels.len() as u64,
            longest: gaps,
            host_calls: self.host_calls(),
        }
    }

    /// Each driver call's count and summed duration, most time first.
    fn host_calls(&self) -> Vec<HostCalls> {
        let mut by_id: fnv::FnvHashMap<u32, HostCalls> = fnv::FnvHashMap::default();
        for &(start, end, cbid) in &self.calls {
            let c = by_id.entry(cbid).or_insert(HostCalls {
                cbid,
                ..HostCalls::default()
            });
            c.count += 1;
            c.ns += end.saturating_sub(start);
        }
        let mut calls: Vec<HostCalls> = by_id.into_values().collect();
        calls.sort_unstable_by(|a, b| b.ns.cmp(&a.ns).then(a.cbid.cmp(&b.cbid)));
        calls.truncate(HOST_CALLS);
        calls
    }
}

#[cfg(test)]
mod tests {
    use rand_chacha::ChaCha8Rng;
    use rand_core::{Rng as _, SeedableRng as _};

    use super::*;

    /// The summary by brute force: every nanosecond of the span asked
    /// whether a kernel, and else a copy, covers it.
    fn by_nanosecond(t: &Timeline) -> (u64, u64, u64) {
        let start = t.kernels.iter().map(|k| k.0).min().unwrap_or(0);
        let end = t.kernels.iter().map(|k| k.1).max().unwrap_or(0);
        let inside = |set: &[(u64, u64)], x: u64| set.iter().any(|&(s, e)| s <= x && x < e);
        let (mut busy, mut copying) = (0, 0);
        for x in start..end {
            if inside(&t.kernels, x) {
                busy += 1;
            } else if inside(&t.copies, x) {
                copying += 1;
            }
        }
        (end - start, busy, copying)
    }

    #[test]
    fn the_summary_matches_a_count_of_every_nanosecond() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for _ in 0..50 {
            let mut interval = |n: usize| -> Vec<(u64, u64)> {
                (0..n)
                    .map(|_| {
                        let s = 1_000 + rng.next_u64() % 2_000;
                        (s, s + 1 + rng.next_u64() % 120)
                    })
                    .collect()
            };
            let kernels = interval(30);
            let names = (0..kernels.len()).map(|k| format!("k{k}")).collect();
            // Ids 0..10 once each (the gaps' calls name them), then 20
            // calls spread over four more ids (the host's totals).
            let calls = interval(10)
                .into_iter()
                .enumerate()
                .map(|(i, (s, e))| (s, e, i as u32))
                .chain(
                    interval(20)
                        .into_iter()
                        .enumerate()
                        .map(|(i, (s, e))| (s, e, 10 + i as u32 % 4)),
                )
                .collect();
            let t = Timeline {
                kernels,
                names,
                copies: interval(6),
                calls,
            };
            let s = t.summary();
            let (span, busy, copying) = by_nanosecond(&t);
            assert_eq!(
                (s.span_ns, s.busy_ns, s.idle_copying_ns),
                (span, busy, copying)
            );
            assert_eq!(s.idle_ns, span - busy);
            // The host's totals: every call counted once under its id.
            let total = |id: u32| {
                t.calls
                    .iter()
                    .filter(|c| c.2 == id)
                    .fold((0, 0), |(n, ns), c| (n + 1, ns + c.1 - c.0))
            };
            assert_eq!(s.host_calls.len(), HOST_CALLS.min(14));
            for c in &s.host_calls {
                assert_eq!((c.count, c.ns), total(c.cbid));
            }
            assert!(s.host_calls.windows(2).all(|w| w[0].ns >= w[1].ns));
            let least = s.host_calls.last().map_or(0, |c| c.ns);
            assert!(
                (0..14).all(|id| s.host_calls.iter().any(|c| c.cbid == id) || total(id).1 <= least)
            );
            assert!(s.longest.windows(2).all(|w| w[0].ns >= w[1].ns));
            assert!(s.longest.iter().all(|g| g.copying_ns <= g.ns));
            assert!(s.longest.iter().map(|g| g.ns).sum::<u64>() <= s.idle_ns);
            // Each gap is bounded by the kernels it names: one ends where
            // it starts, the other starts where it ends, and none runs in
            // between.
            for g in &s.longest {
                let at = |name: &Option<String>| -> (u64, u64) {
                    let k: usize = name.as_deref().expect("named")[1..].parse().expect("k<n>");
                    t.kernels[k]
                };
                let (before, after) = (at(&g.before), at(&g.after));
                assert_eq!(after.0 - before.1, g.ns);
                let earlier = t.kernels.iter().filter(|k| k.0 < after.0).count();
                assert_eq!(g.kernels_before, earlier);
                // The calls named overlap the gap by what they say, longest
                // first, and no call left out overlaps it more.
                let overlap =
                    |&(s, e, _): &(u64, u64, u32)| e.min(after.0).saturating_sub(s.max(before.1));
                for &(id, ns) in &g.calls {
                    assert!(t.calls.iter().any(|c| c.2 == id && overlap(c) == ns));
                    assert!(ns > 0);
                }
                assert!(g.calls.windows(2).all(|w| w[0].1 >= w[1].1));
                let least = g.calls.last().map_or(0, |c| c.1);
                assert!(t.calls.iter().all(|c| {
                    g.calls.iter().any(|n| n.0 == c.2)
                        || overlap(c) <= least
                        || g.calls.len() < 3 && overlap(c) == 0
                }));
                assert!(
                    t.kernels
                        .iter()
                        .all(|&(a, b)| b <= before.1 || a >= after.0)
                );
            }
        }
    }

    #[test]
    fn an_empty_timeline_sums_to_nothing() {
        let t = Timeline {
            kernels: Vec::new(),
            names: Vec::new(),
            copies: vec![(5, 9)],
            calls: vec![(1, 4, 7)],
        };
        assert_eq!(t.summary(), TimelineSummary::default());
    }
}
