//! A recorded phase and its split: which streamed objects stay resident
//! and which stream (the window's stable set, or Belady's schedule decided
//! per gap), with the simulations that weigh them and the floor.

use fnv::{FnvHashMap as HashMap, FnvHashSet as HashSet};

use super::LOOK_AHEAD;
use super::stalls::{PlanTiming, StepTimes};
use crate::AllocationId;

/// One recorded phase: the streamed objects of each step, and where each
/// object occurs.
#[derive(Debug, Clone, Default)]
pub(crate) struct Recording {
    pub(in crate::residency) steps: Vec<Vec<AllocationId>>,
    pub(in crate::residency) positions: HashMap<AllocationId, Vec<usize>>,
    /// For each object of each step, the steps since its previous use,
    /// cyclically (the step count for an object used once; 0 for a repeat
    /// within one step): the use is the first of a look-ahead window that
    /// starts `d` steps before it exactly when its gap exceeds `d`
    /// ([`Planner::upcoming`](super::Planner::upcoming) without a set).
    pub(super) gaps: Vec<Vec<usize>>,
    /// The objects that stay resident (see the module's documentation).
    pub(super) stable: HashSet<AllocationId>,
    /// With [`StreamingPlan::Belady`](super::StreamingPlan::Belady): the
    /// gaps after which the object is fetched again, each named by the
    /// object and the step that ends it (every other gap is kept).
    dropped: Option<HashSet<(AllocationId, usize)>>,
    /// The device times of the recorded run, when it was timed (see
    /// [`StepTimes`]).
    pub(in crate::residency) times: Option<StepTimes>,
}

impl Recording {
    pub(super) fn new(steps: Vec<Vec<AllocationId>>) -> Self {
        let mut positions: HashMap<AllocationId, Vec<usize>> = HashMap::default();
        for (n, step) in steps.iter().enumerate() {
            for &id in step {
                positions.entry(id).or_default().push(n);
            }
        }
        let len = steps.len();
        let mut last: HashMap<AllocationId, usize> = HashMap::default();
        let gaps = steps
            .iter()
            .enumerate()
            .map(|(k, step)| {
                step.iter()
                    .map(|&id| match last.insert(id, k) {
                        Some(previous) => k - previous,
                        None => positions
                            .get(&id)
                            .and_then(|p| p.last())
                            .map_or(len, |&final_use| k + len - final_use),
                    })
                    .collect()
            })
            .collect();
        Self {
            steps,
            positions,
            gaps,
            stable: HashSet::default(),
            dropped: None,
            times: None,
        }
    }

    /// Gives the recording its run's device times; ignored unless there is
    /// one finite, non-negative time per step and a positive copy rate (a run
    /// timed in part, or by a clock that failed, is not modelled).
    pub(crate) fn set_times(&mut self, times: StepTimes) {
        let valid = times.compute.len() == self.steps.len()
            && times.compute.iter().all(|t| t.is_finite() && *t >= 0.0)
            && times.rate > 0.0;
        self.times = valid.then_some(times);
    }

    /// Whether `id` stays on the device until its next use at or after
    /// step `now`: it is in the stable set, or (with Belady's plan) that use
    /// ends a kept gap.
    pub(super) fn keeps(&self, id: AllocationId, now: usize) -> bool {
        let Some(dropped) = &self.dropped else {
            return self.stable.contains(&id);
        };
        let len = self.steps.len().max(1);
        match self.next_use(id, now) {
            Some(distance) => !dropped.contains(&(id, (now + distance) % len)),
            None => false,
        }
    }

    /// Chooses the plan of
    /// [`StreamingPlan::Belady`](super::StreamingPlan::Belady) for
    /// `capacity` bytes of streamed objects: Belady's demand schedule over
    /// `capacity` less `reserve` times the largest step's bytes, its
    /// refetched gaps dropped and the others kept (see the module's
    /// documentation). The planned bytes are the schedule's; the stable
    /// bytes, those of the objects it never fetches again.
    pub(crate) fn choose_belady(
        &mut self,
        size: impl Fn(AllocationId) -> Option<u64>,
        capacity: u64,
        reserve: f64,
    ) -> StableChoice {
        let largest_step = self.largest_step_bytes(&size);
        let room = capacity.saturating_sub((largest_step as f64 * reserve) as u64);
        let mut dropped = HashSet::default();
        self.belady(&size, &HashSet::default(), room, Some(&mut dropped));
        self.dropped = Some(dropped);
        self.fit_kept_gaps(&size, room.max(largest_step));
        let dropped = self.dropped.take().unwrap_or_default();
        let moved = dropped.iter().filter_map(|&(id, _)| size(id)).sum();
        let refetched: HashSet<AllocationId> = dropped.iter().map(|&(id, _)| id).collect();
        self.stable = self
            .positions
            .keys()
            .filter(|id| !refetched.contains(id))
            .copied()
            .collect();
        self.dropped = Some(dropped);
        StableChoice {
            stable_bytes: self.stable.iter().filter_map(|&id| size(id)).sum(),
            largest_step_bytes: largest_step,
            planned_bytes: moved,
            timing: None,
        }
    }

    /// Drops kept gaps, the one ending farthest ahead first, wherever the
    /// kept ones would hold more than `room`. The steady-state run of the
    /// schedule decides the gaps inside a run; the gaps that wrap into the
    /// next run take the decision made where the previous run wrapped,
    /// which Belady's rule (not periodic in general) may not repeat.
    fn fit_kept_gaps(&mut self, size: &impl Fn(AllocationId) -> Option<u64>, room: u64) {
        let len = self.steps.len();
        let mut ids: Vec<AllocationId> = self.positions.keys().copied().collect();
        ids.sort_unstable();
        for now in 0..len {
            let mut kept: Vec<(usize, AllocationId, u64)> = ids
                .iter()
                .filter(|&&id| self.keeps(id, now))
                .filter_map(|&id| Some((self.next_use(id, now)?, id, size(id)?)))
                .collect();
            let mut bytes: u64 = kept.iter().map(|k| k.2).sum();
            kept.sort_unstable();
            while bytes > room {
                let Some((distance, id, b)) = kept.pop() else {
                    break;
                };
                if let Some(dropped) = self.dropped.as_mut() {
                    dropped.insert((id, (now + distance) % len));
                }
                bytes -= b;
            }
        }
    }

    /// The most bytes any one step declares.
    pub(super) fn largest_step_bytes(&self, size: &impl Fn(AllocationId) -> Option<u64>) -> u64 {
        self.steps
            .iter()
            .map(|step| step.iter().filter_map(|&id| size(id)).sum::<u64>())
            .max()
            .unwrap_or(0)
    }

    /// How often `id` would be fetched per run if it streamed: its uses
    /// that come more than `GAP` steps after its previous one (cyclically).
    fn fetches_if_streamed(&self, id: AllocationId) -> usize {
        const GAP: usize = 8;
        let Some(positions) = self.positions.get(&id) else {
            return 0;
        };
        let len = self.steps.len();
        let count = positions
            .iter()
            .zip(positions.iter().skip(1))
            .filter(|&(a, b)| b - a > GAP)
            .count();
        let wraps = match (positions.first(), positions.last()) {
            (Some(&first), Some(&last)) => len - last + first > GAP,
            _ => false,
        };
        (count + usize::from(wraps)).max(1)
    }

    /// Chooses the stable set for `capacity` bytes of streamed objects
    /// (`size` gives each object's bytes). The room left for streaming is
    /// one of a few candidates — `reserve` times the largest step's bytes,
    /// and the most distinct bytes any 4, 16, 64 or 256 consecutive steps
    /// touch (a batch reuses a whole factor's keys within such a window) —
    /// whichever [`Recording::simulate_window`] says moves the fewest bytes per run
    /// (the first on ties) — or, with `slack` > 0, of the candidates moving at
    /// most `1 + slack` times that, the one leaving the most streaming room:
    /// a fetch ahead can start only where room is free, and on the H100 the
    /// larger rooms ran FGb at 2 GiB 4–6 ms faster for ~10 % more bytes with
    /// double hoisting (with single hoisting, 0.15 chose the fewest-bytes
    /// split anyway). The
    /// stable set fills the rest with the objects that would be fetched most
    /// often per byte.
    pub(crate) fn choose_stable(
        &mut self,
        size: impl Fn(AllocationId) -> Option<u64>,
        capacity: u64,
        reserve: f64,
        slack: f64,
    ) -> StableChoice {
        let largest_step = self.largest_step_bytes(&size);
        let candidates = self.window_candidates(&size, capacity, reserve);
        let fewest = candidates.iter().map(|c| c.0).min().unwrap_or(0);
        let within = (fewest as f64 * (1.0 + slack.max(0.0))) as u64;
        let mut best: Option<(u64, HashSet<AllocationId>, u64)> = None;
        for (moved, stable, used) in candidates {
            let better = best.as_ref().is_none_or(|(m, _, u)| {
                if slack > 0.0 {
                    moved <= within && (used, moved) < (*u, *m)
                } else {
                    moved < *m
                }
            });
            if better && moved <= within {
                best = Some((moved, stable, used));
            }
        }
        let (moved, stable, used) = best.unwrap_or_default();
        self.stable = stable;
        self.dropped = None;
        StableChoice {
            stable_bytes: used,
            largest_step_bytes: largest_step,
            planned_bytes: moved,
            timing: None,
        }
    }

    /// The window split's candidates for `capacity` bytes (see
    /// [`Recording::choose_stable`]): for each streaming room, the bytes
    /// its simulation fetches per run, the stable set and its bytes.
    pub(super) fn window_candidates(
        &self,
        size: &impl Fn(AllocationId) -> Option<u64>,
        capacity: u64,
        reserve: f64,
    ) -> Vec<(u64, HashSet<AllocationId>, u64)> {
        let largest_step = self.largest_step_bytes(size);
        let mut reserves = vec![(largest_step as f64 * reserve) as u64];
        reserves.extend([4, 16, 64, 256].map(|w| self.window_bytes(size, w)));
        let orders = self.window_orders();
        reserves
            .into_iter()
            .map(|r| {
                let (stable, used) = self.greedy_stable(size, capacity.saturating_sub(r));
                let room = capacity.saturating_sub(used);
                let moved = self.window_fetches(size, &stable, room, &orders);
                (moved, stable, used)
            })
            .collect()
    }

    /// The fewest bytes a run must fetch when its streamed objects share
    /// `capacity` bytes of device memory: Belady's demand schedule over the
    /// whole room (fetch only when a step needs an object, evict the one
    /// needed farthest ahead), with no stable set and nothing fetched early.
    /// Belady's rule is optimal for objects of one size and close to it for
    /// these (a few sizes, each step's objects resident together); it is
    /// what "the floor" means in the figures the policy reports.
    pub(crate) fn floor_bytes(
        &self,
        size: impl Fn(AllocationId) -> Option<u64>,
        capacity: u64,
    ) -> u64 {
        self.belady(&size, &HashSet::default(), capacity, None)
    }

    /// The objects that would be fetched most often per byte, while they
    /// fit `room` (smaller first on ties), and their bytes.
    fn greedy_stable(
        &self,
        size: &impl Fn(AllocationId) -> Option<u64>,
        room: u64,
    ) -> (HashSet<AllocationId>, u64) {
        let mut candidates: Vec<(AllocationId, usize, u64)> = self
            .positions
            .keys()
            .filter_map(|&id| size(id).map(|b| (id, self.fetches_if_streamed(id), b)))
            .collect();
        candidates.sort_by_key(|&(id, fetches, bytes)| (std::cmp::Reverse(fetches), bytes, id));
        let mut stable = HashSet::default();
        let mut used = 0u64;
        for (id, _, bytes) in candidates {
            if used.saturating_add(bytes) <= room {
                used += bytes;
                stable.insert(id);
            }
        }
        (stable, used)
    }

    /// The most distinct bytes that any `window` consecutive steps touch,
    /// counting cyclically (the run repeats).
    fn window_bytes(&self, size: &impl Fn(AllocationId) -> Option<u64>, window: usize) -> u64 {
        let len = self.steps.len();
        if len == 0 {
            return 0;
        }
        let window = window.min(len);
        let mut counts: HashMap<AllocationId, usize> = HashMap::default();
        let (mut bytes, mut most) = (0u64, 0u64);
        for k in 0..len + window - 1 {
            for &id in self.steps.get(k % len).into_iter().flatten() {
                let c = counts.entry(id).or_insert(0);
                if *c == 0 {
                    bytes += size(id).unwrap_or(0);
                }
                *c += 1;
            }
            if k + 1 > window {
                for &id in self.steps.get((k - window) % len).into_iter().flatten() {
                    if let Some(c) = counts.get_mut(&id) {
                        *c -= 1;
                        if *c == 0 {
                            bytes = bytes.saturating_sub(size(id).unwrap_or(0));
                        }
                    }
                }
            }
            if k + 1 >= window {
                most = most.max(bytes);
            }
        }
        most
    }

    /// Bytes fetched per run, in the steady state (the second of two runs),
    /// when `stable` stays resident and the other objects share `room`
    /// bytes, fetched when a step needs them, the one needed farthest ahead
    /// leaving first (Belady's rule; never one of the step's own). With
    /// `dropped`, adds the gaps the steady state fetches again, each as the
    /// object and the step that ends it.
    fn belady(
        &self,
        size: &impl Fn(AllocationId) -> Option<u64>,
        stable: &HashSet<AllocationId>,
        room: u64,
        mut dropped: Option<&mut HashSet<(AllocationId, usize)>>,
    ) -> u64 {
        let mut resident: HashMap<AllocationId, u64> = HashMap::default();
        let (mut used, mut fetched) = (0u64, 0u64);
        for run in 0..2 {
            for (k, step) in self.steps.iter().enumerate() {
                for &id in step {
                    if stable.contains(&id) || resident.contains_key(&id) {
                        continue;
                    }
                    let Some(bytes) = size(id) else {
                        continue;
                    };
                    while used + bytes > room {
                        let victim = resident
                            .keys()
                            .filter(|v| !step.contains(v))
                            .max_by_key(|&&v| (self.next_use(v, k + 1).unwrap_or(usize::MAX), v))
                            .copied();
                        let Some(victim) = victim else {
                            break;
                        };
                        used -= resident.remove(&victim).unwrap_or(0);
                    }
                    resident.insert(id, bytes);
                    used += bytes;
                    if run == 1 {
                        fetched += bytes;
                        if let Some(dropped) = dropped.as_deref_mut() {
                            dropped.insert((id, k));
                        }
                    }
                }
            }
        }
        fetched
    }

    /// Bytes fetched per run, in the steady state, by what the residency
    /// manager does with a split: `stable` stays resident, and the other
    /// objects share `room` fetched ahead of use. Fetching ahead keeps in
    /// the room, at every step, the streaming objects needed soonest (each
    /// evicting one needed later), up to [`LOOK_AHEAD`] steps ahead: a
    /// sliding window, in which an object leaves after its use unless it is
    /// needed again before the window's far end. Belady's demand schedule
    /// ([`Recording::belady`]) keeps more of a cycle in the same room, but
    /// fetches only at the miss: the copy then cannot overlap the work
    /// before it. Choosing a split by that schedule chose rooms the run
    /// does not use that way (a large room, 1.9× the bytes planned in the
    /// arena's cyclic test), so the choice is made on this model.
    pub(crate) fn simulate_window(
        &self,
        size: &impl Fn(AllocationId) -> Option<u64>,
        stable: &HashSet<AllocationId>,
        room: u64,
    ) -> u64 {
        self.window_fetches(size, stable, room, &self.window_orders())
    }

    /// [`Recording::simulate_window`] over the orders
    /// [`Recording::window_orders`] gives.
    pub(super) fn window_fetches(
        &self,
        size: &impl Fn(AllocationId) -> Option<u64>,
        stable: &HashSet<AllocationId>,
        room: u64,
        orders: &[Vec<(usize, AllocationId)>],
    ) -> u64 {
        let mut resident: HashSet<AllocationId> = HashSet::default();
        let mut fetched = 0u64;
        for run in 0..2 {
            for order in orders {
                let (window, _) = self.window_step(size, stable, room, order, &mut resident);
                for id in window {
                    if resident.insert(id) && run == 1 {
                        fetched += size(id).unwrap_or(0);
                    }
                }
            }
        }
        fetched
    }

    /// For each step, the objects the next [`LOOK_AHEAD`] steps touch (the
    /// step's own included), each once, by distance to its next use (0:
    /// the step's own) and then by id: the order in which the look-ahead
    /// fetches them.
    pub(super) fn window_orders(&self) -> Vec<Vec<(usize, AllocationId)>> {
        let len = self.steps.len();
        (0..len)
            .map(|k| {
                let mut order: Vec<(usize, AllocationId)> = Vec::new();
                let mut seen = HashSet::default();
                for distance in 0..len.min(LOOK_AHEAD + 1) {
                    for &id in self.steps.get((k + distance) % len).into_iter().flatten() {
                        if seen.insert(id) {
                            order.push((distance, id));
                        }
                    }
                }
                order.sort_unstable();
                order
            })
            .collect()
    }

    /// One step of the sliding window: the streaming objects of `order`
    /// (see [`Recording::window_orders`]) that the room holds — the step's
    /// own always, then the others by next use while they fit — and its
    /// bytes; the objects `resident` holds outside it stay, unless they
    /// and the window overflow the room: then they leave, and are
    /// returned (to be fetched again when the window next wants them).
    pub(super) fn window_step(
        &self,
        size: &impl Fn(AllocationId) -> Option<u64>,
        stable: &HashSet<AllocationId>,
        room: u64,
        order: &[(usize, AllocationId)],
        resident: &mut HashSet<AllocationId>,
    ) -> (Vec<AllocationId>, Vec<AllocationId>) {
        let mut window = Vec::new();
        let mut used = 0u64;
        for &(next, id) in order.iter().filter(|(_, id)| !stable.contains(id)) {
            let bytes = size(id).unwrap_or(0);
            if next > 0 && used + bytes > room {
                break;
            }
            used += bytes;
            window.push(id);
        }
        // Objects stay until the window drops them.
        let wanted: HashSet<AllocationId> = window.iter().copied().collect();
        let outside: Vec<AllocationId> = resident
            .iter()
            .filter(|id| !wanted.contains(id))
            .copied()
            .collect();
        let kept: u64 = outside.iter().filter_map(|&id| size(id)).sum();
        if used + kept > room {
            for id in &outside {
                resident.remove(id);
            }
            return (window, outside);
        }
        (window, Vec::new())
    }

    /// The distance in steps from step `from` to the next step that touches
    /// `id`, wrapping into the next run; `None` if no step does.
    pub(super) fn next_use(&self, id: AllocationId, from: usize) -> Option<usize> {
        let positions = self.positions.get(&id)?;
        let at = positions.partition_point(|&p| p < from);
        match positions.get(at) {
            Some(&p) => Some(p - from),
            None => positions
                .first()
                .map(|&p| self.steps.len() - from.min(self.steps.len()) + p),
        }
    }
}

/// The split [`Recording::choose_stable`] made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct StableChoice {
    /// Bytes of the objects kept resident.
    pub(crate) stable_bytes: u64,
    /// The largest step's streamed bytes.
    pub(crate) largest_step_bytes: u64,
    /// Bytes the simulation of the split fetches per run.
    pub(crate) planned_bytes: u64,
    /// The split's run in the stall model, where the recording was timed.
    pub(crate) timing: Option<PlanTiming>,
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in crate::residency::plan) fn ids(list: &[u64]) -> Vec<AllocationId> {
        list.iter().map(|&n| AllocationId(n)).collect()
    }

    /// `count` random steps over objects `1..=objects`, from `next(m)` (a
    /// number below `m`): mostly one object, sometimes two.
    pub(in crate::residency::plan) fn random_steps(
        next: &mut impl FnMut(u64) -> u64,
        objects: u64,
        count: u64,
    ) -> Vec<Vec<AllocationId>> {
        (0..count)
            .map(|_| {
                let a = 1 + next(objects);
                let b = 1 + next(objects);
                if a == b || next(3) > 0 {
                    ids(&[a])
                } else {
                    ids(&[a, b])
                }
            })
            .collect()
    }

    fn unit(id: AllocationId) -> Option<u64> {
        Some(u64::from(id.0 < 1000))
    }

    #[test]
    fn the_simulation_moves_what_belady_moves_on_a_cycle() {
        // Ten objects of one byte in a cycle, seven bytes of room: Belady's
        // rule misses n(n−k)/(n−1) = 3.3 times a run on average (3 or 4),
        // least recently used would miss all ten.
        let steps: Vec<Vec<AllocationId>> = (1..=10).map(|n| ids(&[n])).collect();
        let r = Recording::new(steps);
        assert!((3..=4).contains(&r.belady(&unit, &HashSet::default(), 7, None)));
        // Everything fits: nothing moves in the steady state.
        assert_eq!(r.belady(&unit, &HashSet::default(), 10, None), 0);
        // Stable objects never move; the rest cycle through what is left.
        let stable: HashSet<AllocationId> = ids(&[1, 2, 3]).into_iter().collect();
        assert_eq!(r.belady(&unit, &stable, 1, None), 7);
        assert_eq!(r.window_bytes(&unit, 4), 4);
        assert_eq!(r.window_bytes(&unit, 40), 10);
    }

    #[test]
    fn a_batch_gets_room_for_a_whole_factor() {
        // Four ciphertexts through two factors of three keys each, one
        // ciphertext after another within a factor: steps k1 k2 k3 k1 k2 k3 …
        let mut steps = Vec::new();
        for keys in [[1u64, 2, 3], [4, 5, 6]] {
            for _ct in 0..4 {
                steps.extend(keys.iter().map(|&k| ids(&[k])));
            }
        }
        let mut r = Recording::new(steps);
        let capacity = 4;
        // Twice the largest step (2 bytes) leaves two of a factor's three
        // keys to share two bytes: they thrash.
        let (naive, naive_used) = r.greedy_stable(&unit, capacity - 2);
        let thrash = r.simulate_window(&unit, &naive, capacity - naive_used);
        let choice = r.choose_stable(unit, capacity, 2.0, 0.0);
        assert_eq!(choice.largest_step_bytes, 1);
        let chosen = r.stable.clone();
        let moved = r.simulate_window(&unit, &chosen, capacity - choice.stable_bytes);
        assert_eq!(choice.planned_bytes, moved);
        assert!(moved < thrash, "{moved} bytes against {thrash}");
        // A whole factor fits the streaming room: no key is fetched more
        // than once a run.
        assert!(
            moved <= 6 - chosen.len() as u64,
            "{moved}, stable {chosen:?}"
        );
    }

    #[test]
    fn belady_plan_keeps_within_its_room_and_moves_the_floor_of_that_room() {
        // Random phases of objects of 1–3 bytes: the kept gaps never hold
        // more than the room less the reserve at any step, so fetching
        // ahead always has the reserve; the planned bytes are the demand
        // schedule's over that smaller room.
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |m: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % m
        };
        let sized = |id: AllocationId| Some(1 + id.0 % 3);
        for _ in 0..60 {
            let objects = 4 + next(14);
            let count = 10 + next(40);
            let steps = random_steps(&mut next, objects, count);
            let mut r = Recording::new(steps);
            let capacity = 6 + next(2 * objects);
            let reserve = [0.0, 1.0, 2.0][next(3) as usize];
            let choice = r.choose_belady(sized, capacity, reserve);
            let room = capacity.saturating_sub((choice.largest_step_bytes as f64 * reserve) as u64);
            // The demand schedule's fetches, and any kept gap dropped to
            // fit the room where the next run's gaps differ.
            assert!(choice.planned_bytes >= r.belady(&sized, &HashSet::default(), room, None));
            let dropped = r.dropped.as_ref().expect("belady's plan");
            assert_eq!(
                choice.planned_bytes,
                dropped.iter().filter_map(|&(id, _)| sized(id)).sum::<u64>()
            );
            assert!(choice.planned_bytes >= r.floor_bytes(sized, capacity));
            for now in 0..r.steps.len() {
                let kept: u64 = r
                    .positions
                    .keys()
                    .filter(|&&id| r.keeps(id, now))
                    .filter_map(|&id| sized(id))
                    .sum();
                assert!(
                    kept <= room.max(choice.largest_step_bytes),
                    "{kept} > {room} at {now}"
                );
            }
            // Every refetched gap ends where the object is used.
            for &(id, at) in r.dropped.as_ref().expect("belady's plan") {
                assert!(r.steps[at].contains(&id));
            }
        }
    }

    #[test]
    fn slack_trades_a_few_bytes_for_streaming_room() {
        // A bootstrap-like cycle of one-byte keys with a few reused often:
        // with slack, the split keeps no more than without and plans at
        // most the slack's share more bytes.
        let mut steps = Vec::new();
        for k in 5..=60u64 {
            steps.push(ids(&[k]));
            if k % 3 == 0 {
                steps.push(ids(&[1 + k % 4]));
            }
        }
        let mut r = Recording::new(steps);
        for capacity in [10, 20, 30, 45] {
            let tight = r.choose_stable(unit, capacity, 2.0, 0.0);
            for slack in [0.1, 0.5, 2.0] {
                let loose = r.choose_stable(unit, capacity, 2.0, slack);
                assert!(
                    loose.stable_bytes <= tight.stable_bytes,
                    "{loose:?} {tight:?}"
                );
                assert!(
                    loose.planned_bytes as f64 <= tight.planned_bytes as f64 * (1.0 + slack),
                    "{loose:?} {tight:?}"
                );
                let moved =
                    r.simulate_window(&unit, &r.stable.clone(), capacity - loose.stable_bytes);
                assert_eq!(moved, loose.planned_bytes);
            }
        }
    }

    #[test]
    fn no_split_fetches_less_than_the_floor() {
        // Random phases of unit objects (where Belady's demand schedule is
        // optimal): whatever the stable set, the split's simulated bytes are
        // at least the floor, and the floor is at least what cannot fit.
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = |m: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % m
        };
        for _ in 0..40 {
            let objects = 4 + next(12);
            let steps: Vec<Vec<AllocationId>> = (0..10 + next(30))
                .map(|_| {
                    let a = 1 + next(objects);
                    let b = 1 + next(objects);
                    if a == b { ids(&[a]) } else { ids(&[a, b]) }
                })
                .collect();
            let mut r = Recording::new(steps);
            let distinct = r.positions.len() as u64;
            let capacity = 2 + next(objects);
            let floor = r.floor_bytes(unit, capacity);
            assert!(floor >= distinct.saturating_sub(capacity), "{floor}");
            let choice = r.choose_stable(unit, capacity, 2.0, 0.0);
            assert!(choice.planned_bytes >= floor, "{choice:?} against {floor}");
            for reserve in [1.0, 3.0] {
                let c = r.choose_stable(unit, capacity, reserve, 0.0);
                assert!(c.planned_bytes >= floor, "{c:?} against {floor}");
            }
        }
    }
}
