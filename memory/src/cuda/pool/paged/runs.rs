//! Sets of runs: disjoint, maximal intervals (of pages, or of bytes in a
//! slab), merged with their neighbours as they are given back.

use std::collections::BTreeMap;

/// Disjoint runs `[start, start + len)` of pages, each maximal (two runs
/// never touch).
#[derive(Debug, Default)]
pub(super) struct Runs {
    runs: BTreeMap<u64, u64>,
}

impl Runs {
    /// Adds `[start, start + len)`, which must not overlap a run, merged with
    /// the runs it touches.
    pub(super) fn insert(&mut self, start: u64, len: u64) {
        if len == 0 {
            return;
        }
        let (mut first, mut count) = (start, len);
        if let Some((&before, &before_len)) = self.runs.range(..start).next_back()
            && before + before_len == start
        {
            self.runs.remove(&before);
            first = before;
            count += before_len;
        }
        if let Some(after_len) = self.runs.remove(&(start + len)) {
            count += after_len;
        }
        self.runs.insert(first, count);
    }

    /// Removes `[start, start + len)`, which must lie in one run; `false`
    /// (and nothing changed) when it does not.
    pub(super) fn remove(&mut self, start: u64, len: u64) -> bool {
        let Some((&first, &count)) = self.runs.range(..=start).next_back() else {
            return false;
        };
        if start + len > first + count {
            return false;
        }
        self.runs.remove(&first);
        if start > first {
            self.runs.insert(first, start - first);
        }
        if first + count > start + len {
            self.runs.insert(start + len, first + count - start - len);
        }
        true
    }

    /// The start of the shortest run of at least `len` pages (the lowest of
    /// equals): best fit, which keeps long runs for long requests.
    pub(super) fn best_fit(&self, len: u64) -> Option<u64> {
        self.best_fit_run(len).map(|(start, _)| start)
    }

    /// The shortest run of at least `len` (the lowest of equals): (start,
    /// length).
    pub(super) fn best_fit_run(&self, len: u64) -> Option<(u64, u64)> {
        self.runs
            .iter()
            .filter(|&(_, &count)| count >= len)
            .min_by_key(|&(&start, &count)| (count, start))
            .map(|(&start, &count)| (start, count))
    }

    /// The length of the run that starts at `start`.
    pub(super) fn starting_at(&self, start: u64) -> Option<u64> {
        self.runs.get(&start).copied()
    }

    /// The run that ends at `end` (exclusive): (start, length).
    pub(super) fn ending_at(&self, end: u64) -> Option<(u64, u64)> {
        self.runs
            .range(..end)
            .next_back()
            .filter(|&(&start, &len)| start + len == end)
            .map(|(&start, &len)| (start, len))
    }

    /// The runs, shortest first (the lowest of equals).
    pub(super) fn shortest_first(&self) -> Vec<(u64, u64)> {
        let mut runs: Vec<(u64, u64)> = self.runs.iter().map(|(&s, &l)| (s, l)).collect();
        runs.sort_by_key(|&(start, len)| (len, start));
        runs
    }

    /// Pages in all runs.
    #[cfg(test)]
    pub(super) fn pages(&self) -> u64 {
        self.runs.values().sum()
    }

    /// Whether `page` lies in a run.
    #[cfg(test)]
    pub(super) fn contains(&self, page: u64) -> bool {
        self.runs
            .range(..=page)
            .next_back()
            .is_some_and(|(&start, &len)| page < start + len)
    }

    /// The number of runs.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.runs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::Runs;

    #[test]
    fn runs_merge_split_and_fit_best() {
        let mut r = Runs::default();
        r.insert(10, 5);
        r.insert(20, 3);
        r.insert(15, 5);
        assert_eq!(r.len(), 1, "10..15, 15..20 and 20..23 merge");
        assert_eq!(r.pages(), 13);
        assert!(r.remove(12, 2));
        assert_eq!(r.shortest_first(), vec![(10, 2), (14, 9)]);
        assert!(!r.remove(11, 3), "11..14 crosses the hole at 12..14");
        assert!(!r.remove(30, 1), "not in a run");
        assert_eq!(r.best_fit(2), Some(10));
        assert_eq!(r.best_fit(3), Some(14));
        assert_eq!(r.best_fit(10), None);
        assert!(r.contains(22) && !r.contains(23) && !r.contains(12));
        assert_eq!((r.starting_at(14), r.starting_at(15)), (Some(9), None));
        assert_eq!((r.ending_at(12), r.ending_at(11)), (Some((10, 2)), None));
        r.insert(12, 2);
        assert_eq!(r.shortest_first(), vec![(10, 13)]);
        r.insert(0, 0);
        assert_eq!(r.len(), 1, "an empty run adds nothing");
    }
}
