//! The baby-step giant-step split of a transform's diagonal indices
//! (Lattigo's `BSGSIndex` and `FindBestBSGSRatio`), with the giant steps
//! that Horner's rule combines.

use std::collections::{BTreeMap, BTreeSet};

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
    /// The split Lattigo's baby-step choice gives for `log_max_ratio`
    /// ([`find_best_bsgs_ratio`]): what [`LinearTransform::new`] uses, for
    /// callers that need the rotations of a ratio but not the matrix.
    ///
    /// [`LinearTransform::new`]: super::LinearTransform::new
    pub fn with_ratio(diagonals: &[usize], n: usize, log_max_ratio: i32) -> Self {
        Self::new(
            diagonals,
            n,
            find_best_bsgs_ratio(diagonals, n, log_max_ratio),
        )
    }

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
