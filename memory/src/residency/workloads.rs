//! Eviction over synthetic workloads, through the real manager and the
//! recording driver: bytes brought back to the device per cycle after
//! warm-up, for each order and budget, against Belady's choice (evict the
//! buffer whose next use is farthest, knowing the future) on the same
//! sequence. `cargo test -p hemem-memory workloads -- --nocapture` prints
//! the tables.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::driver::mock::Call;
use super::testing::manager_with;
use super::*;
use crate::policy::Advice;
use crate::{AllocationId, DevicePtr};

const MB: u64 = 1_000_000;
/// Cycles run; the first two are warm-up (cold misses, first intervals).
const CYCLES: usize = 6;
const WARM_UP: usize = 2;

/// One declaration: the buffers an operation touches, and the pooled
/// scratch it allocates for its duration.
#[derive(Debug, Clone, Default)]
struct Op {
    ids: Vec<u64>,
    scratch: u64,
}

/// Managed buffers and one cycle of operations, repeated.
#[derive(Debug, Default)]
struct Workload {
    buffers: Vec<(u64, MemoryClass, u64)>,
    cycle: Vec<Op>,
}

impl Workload {
    fn add(&mut self, class: MemoryClass, bytes: u64) -> u64 {
        let id = self.buffers.len() as u64 + 1;
        self.buffers.push((id, class, bytes));
        id
    }

    fn op(&mut self, ids: &[u64]) {
        self.cycle.push(Op {
            ids: ids.to_vec(),
            scratch: 0,
        });
    }

    fn size(&self, id: u64) -> u64 {
        self.buffers[id as usize - 1].2
    }

    /// Managed bytes the cycle touches.
    fn working_set(&self) -> u64 {
        self.buffers.iter().map(|b| b.2).sum()
    }
}

/// Runs `cycles` cycles; returns the bytes prefetched back to the device in
/// each, checking the budget, the pins and the driver's calls as it goes.
fn traffic(w: &Workload, budget: u64, eviction: Eviction) -> Vec<u64> {
    let (r, d, stats) = manager_with(budget, true, eviction);
    for &(id, class, bytes) in &w.buffers {
        r.register_managed(
            AllocationId(id),
            class,
            DevicePtr(id << 32),
            bytes,
            Advice::for_class(class),
        );
    }
    let mut per_cycle = Vec::with_capacity(CYCLES);
    for cycle in 0..CYCLES {
        let before = stats.snapshot().total().prefetched_to_device;
        let mut fetched = 0;
        for op in &w.cycle {
            if op.scratch > 0 && r.reserve_pool(MemoryClass::Temporary, op.scratch).is_err() {
                assert!(r.make_room(op.scratch, false).unwrap(), "scratch fits");
                r.reserve_pool(MemoryClass::Temporary, op.scratch)
                    .expect("room was made");
            }
            // Making room for scratch only evicts.
            assert!(
                d.take()
                    .iter()
                    .all(|c| !matches!(c, Call::ToDevice(_) | Call::ReadMostly(_, true)))
            );
            let ids: Vec<AllocationId> = op.ids.iter().map(|&i| AllocationId(i)).collect();
            let guard = r.prepare(&ids).expect("each operation fits alone");
            for id in &ids {
                assert_eq!(r.is_resident(*id), Some(true), "declared {id:?}");
            }
            assert!(r.usage().device_bytes() <= budget, "over the budget");
            for call in d.take() {
                match call {
                    Call::ToDevice(id) => fetched += w.size(id),
                    Call::ToHost(id) => {
                        assert!(!op.ids.contains(&id), "evicted a declared buffer");
                    }
                    _ => {}
                }
            }
            drop(guard);
            if op.scratch > 0 {
                r.release_pool(MemoryClass::Temporary, op.scratch);
            }
        }
        let moved = stats.snapshot().total().prefetched_to_device - before;
        if cycle > 0 {
            // Every buffer has been on the device: each prefetch moves data.
            assert_eq!(moved, fetched, "statistics agree with the driver");
        }
        per_cycle.push(moved);
    }
    per_cycle
}

/// Bytes brought back per cycle when the victim is always the resident,
/// undeclared buffer used farthest ahead (Belady), on the same sequence
/// (scratch ignored): the reference.
fn belady(w: &Workload, budget: u64) -> u64 {
    let n = w.cycle.len();
    // For each position, when each buffer is next used (cyclically).
    let mut next_at: Vec<HashMap<u64, usize>> = vec![HashMap::new(); n];
    let mut upcoming: HashMap<u64, usize> = HashMap::new();
    for pass in 0..2 {
        for k in (0..n).rev() {
            if pass == 1 {
                next_at[k] = upcoming.clone();
            }
            for &id in &w.cycle[k].ids {
                upcoming.insert(id, k + (1 - pass) * n);
            }
        }
    }
    let mut resident: HashSet<u64> = HashSet::new();
    let mut used = 0;
    let mut moved = 0;
    for cycle in 0..CYCLES {
        if cycle == CYCLES - 1 {
            moved = 0;
        }
        for (k, op) in w.cycle.iter().enumerate() {
            let need: u64 = op
                .ids
                .iter()
                .filter(|i| !resident.contains(*i))
                .map(|&i| w.size(i))
                .sum();
            while used + need > budget {
                let victim = *resident
                    .iter()
                    .filter(|i| !op.ids.contains(*i))
                    .max_by_key(|&&i| (next_at[k].get(&i).copied().unwrap_or(usize::MAX), i))
                    .expect("a victim");
                resident.remove(&victim);
                used -= w.size(victim);
            }
            for &id in &op.ids {
                if resident.insert(id) {
                    used += w.size(id);
                    moved += w.size(id);
                }
            }
        }
    }
    moved
}

/// Steady-state bytes per cycle (the worst cycle after warm-up).
fn steady(per_cycle: &[u64]) -> u64 {
    per_cycle.iter().skip(WARM_UP).copied().max().unwrap_or(0)
}

/// A row of the table: budget, LRU, predicted next use, Belady.
#[derive(Debug, Clone, Copy)]
struct Row {
    budget: u64,
    lru: u64,
    next_use: u64,
    belady: u64,
}

fn rows(name: &str, w: &Workload, budgets: &[u64]) -> Vec<Row> {
    let ws = w.working_set();
    println!(
        "{name}: working set {} MB, {} operations per cycle; MB brought back per cycle after warm-up",
        ws / MB,
        w.cycle.len()
    );
    println!("  budget MB (%)   | lru     | next-use | Belady | working set − budget");
    budgets
        .iter()
        .map(|&budget| {
            let row = Row {
                budget,
                lru: steady(&traffic(w, budget, Eviction::LeastRecentlyUsed)),
                next_use: steady(&traffic(w, budget, Eviction::PredictedNextUse)),
                belady: belady(w, budget),
            };
            println!(
                "  {:>6} ({:>3} %) | {:>7} | {:>8} | {:>6} | {:>6}",
                budget / MB,
                budget * 100 / ws,
                row.lru / MB,
                row.next_use / MB,
                row.belady / MB,
                ws.saturating_sub(budget) / MB
            );
            row
        })
        .collect()
}

/// The brief's loop: 40 buffers of 150 MB declared in a fixed order.
fn cyclic() -> Workload {
    let mut w = Workload::default();
    let ids: Vec<u64> = (0..40)
        .map(|_| w.add(MemoryClass::EvaluationKey, 150 * MB))
        .collect();
    for id in ids {
        w.op(&[id]);
    }
    w
}

/// Shaped like an FGb bootstrap under the `static` policy: 42 keys of
/// 157 MB in 10 parts declared together (the key-switch inner product),
/// shared by SlotToCoeff (three factors at low levels, small diagonals) and
/// CoeffToSlot (the same factors, in the same order or reversed, with large
/// diagonals), each a
/// BSGS transform (hoisted baby steps, then per giant step its diagonals and
/// its key); then a conjugation and EvalMod's relinearisations in bursts.
/// Every operation declares a small conversion table and allocates scratch;
/// the input ciphertext is read at the start. About 8.8 GB in all.
fn bootstrap_shaped(reversed: bool) -> Workload {
    let mut w = Workload::default();
    let key = |w: &mut Workload| -> Vec<u64> {
        (0..10)
            .map(|_| w.add(MemoryClass::EvaluationKey, 15_700_000))
            .collect()
    };
    // Factor f: 7 baby-step keys and 7 giant-step keys; neighbouring
    // factors share a key (a step that is a giant step in one factor and a
    // baby step in the next).
    let keys: Vec<Vec<u64>> = (0..40).map(|_| key(&mut w)).collect();
    let factor_keys = |f: usize| -> (Vec<usize>, Vec<usize>) {
        let base = f * 13;
        ((base..base + 7).collect(), (base + 7..base + 14).collect())
    };
    let conj = key(&mut w);
    let relin = key(&mut w);
    let table = w.add(MemoryClass::Constant, 2 * MB);
    let input = w.add(MemoryClass::Ciphertext, 13 * MB);
    let diagonals = |w: &mut Workload, bytes: u64| -> Vec<Vec<u64>> {
        (0..7)
            .map(|_| {
                (0..6)
                    .map(|_| w.add(MemoryClass::BootstrapConstant, bytes))
                    .collect()
            })
            .collect()
    };
    let stc: Vec<Vec<Vec<u64>>> = (0..3).map(|_| diagonals(&mut w, 3 * MB)).collect();
    let cts: Vec<Vec<Vec<u64>>> = (0..3).map(|_| diagonals(&mut w, 14 * MB)).collect();
    let with_table = |ids: &[u64]| -> Vec<u64> {
        let mut v = ids.to_vec();
        v.push(table);
        v
    };
    let mut ops: Vec<Op> = Vec::new();
    let mut push = |ids: Vec<u64>, scratch: u64| ops.push(Op { ids, scratch });
    push(with_table(&[input]), 0);
    let transform = |push: &mut dyn FnMut(Vec<u64>, u64), f: usize, diags: &[Vec<u64>]| {
        let (babies, giants) = factor_keys(f);
        for b in babies {
            push(with_table(&keys[b]), 60 * MB);
        }
        for (g, giant) in giants.into_iter().enumerate() {
            for &d in &diags[g] {
                push(with_table(&[d]), 0);
            }
            push(with_table(&keys[giant]), 60 * MB);
        }
    };
    for (f, diags) in stc.iter().enumerate() {
        transform(&mut push, f, diags);
    }
    for k in 0..3 {
        let f = if reversed { 2 - k } else { k };
        transform(&mut push, f, &cts[f]);
    }
    push(with_table(&conj), 60 * MB);
    for _ in 0..3 {
        for _ in 0..4 {
            push(with_table(&relin), 60 * MB);
            push(with_table(&[]), 0);
        }
        push(with_table(&[input]), 0);
    }
    w.cycle = ops;
    w
}

/// A hot set of four 100 MB buffers used around every step of a cold loop
/// of forty (least recently used keeps the hot set; so must the new order).
fn hot_set_beside_a_loop() -> Workload {
    let mut w = Workload::default();
    let hot: Vec<u64> = (0..4)
        .map(|_| w.add(MemoryClass::Ciphertext, 100 * MB))
        .collect();
    let cold: Vec<u64> = (0..40)
        .map(|_| w.add(MemoryClass::Plaintext, 100 * MB))
        .collect();
    for (j, &c) in cold.iter().enumerate() {
        w.op(&[hot[j % 4]]);
        w.op(&[c]);
        w.op(&[hot[(j + 1) % 4]]);
    }
    w
}

/// A window of eight 50 MB buffers, each window repeated three times, then
/// moved on by one: recency is the right guide.
fn sliding_window() -> Workload {
    let mut w = Workload::default();
    let ids: Vec<u64> = (0..60)
        .map(|_| w.add(MemoryClass::Ciphertext, 50 * MB))
        .collect();
    for start in 0..50 {
        for _ in 0..3 {
            for &id in &ids[start..start + 8] {
                w.op(&[id]);
            }
        }
    }
    w
}

/// Two phases: a loop over twenty 100 MB buffers five times, then a loop
/// over twenty others five times.
fn phases() -> Workload {
    let mut w = Workload::default();
    let ids: Vec<u64> = (0..40)
        .map(|_| w.add(MemoryClass::Ciphertext, 100 * MB))
        .collect();
    for half in ids.chunks(20) {
        for _ in 0..5 {
            for &id in half {
                w.op(&[id]);
            }
        }
    }
    w
}

fn percent(w: &Workload, p: u64) -> u64 {
    w.working_set() * p / 100
}

#[test]
fn a_larger_budget_keeps_part_of_a_loop_resident() {
    let w = cyclic();
    let ws = w.working_set();
    let budgets: Vec<u64> = [25, 50, 75].iter().map(|&p| percent(&w, p)).collect();
    let rows = rows("loop of 40 × 150 MB", &w, &budgets);
    for row in &rows {
        // Least recently used moves the whole loop every cycle.
        assert_eq!(row.lru, ws, "{row:?}");
        // Predicted next use moves what does not fit, plus one buffer.
        assert!(row.next_use <= ws - row.budget + 150 * MB, "{row:?}");
        assert!(row.next_use >= row.belady, "{row:?}");
    }
    for pair in rows.windows(2) {
        assert!(pair[1].next_use < pair[0].next_use, "{pair:?}");
    }
}

#[test]
fn a_bootstrap_shaped_cycle_moves_less_as_the_budget_grows() {
    let gib = 1 << 30;
    for (name, reversed) in [
        (
            "bootstrap-shaped cycle, CoeffToSlot in SlotToCoeff's order",
            false,
        ),
        ("bootstrap-shaped cycle, CoeffToSlot in reverse order", true),
    ] {
        let w = bootstrap_shaped(reversed);
        let ws = w.working_set();
        assert!((8_500 * MB..9_000 * MB).contains(&ws), "{ws}");
        let rows = rows(name, &w, &[2 * gib, 4 * gib, 6 * gib]);
        for row in &rows {
            assert!(row.next_use < row.lru, "{name}: {row:?}");
            // Within 15 % of Belady's choice.
            assert!(row.next_use * 100 <= row.belady * 115, "{name}: {row:?}");
        }
        for pair in rows.windows(2) {
            // The saving follows the budget: at least half of the extra
            // budget comes off the traffic.
            let saved = pair[0].next_use.saturating_sub(pair[1].next_use);
            assert!(
                2 * saved >= pair[1].budget - pair[0].budget,
                "{name}: {pair:?}"
            );
        }
    }
}

#[test]
fn recency_friendly_workloads_are_not_made_worse() {
    let cases: [(&str, Workload, &[u64]); 3] = [
        ("hot set beside a loop", hot_set_beside_a_loop(), &[20, 50]),
        ("sliding window", sliding_window(), &[20, 50]),
        ("two phases", phases(), &[25, 50, 75]),
    ];
    for (name, w, percents) in cases {
        let budgets: Vec<u64> = percents.iter().map(|&p| percent(&w, p)).collect();
        for row in rows(name, &w, &budgets) {
            assert!(row.next_use <= row.lru, "{name}: {row:?}");
        }
    }
    // What fits moves nothing after the first cycle, under either order.
    let w = hot_set_beside_a_loop();
    for eviction in Eviction::ALL {
        let per_cycle = traffic(&w, w.working_set(), eviction);
        assert!(per_cycle.iter().all(|&b| b == 0), "{eviction}");
    }
}

#[test]
fn the_hot_set_stays_resident_beside_a_loop() {
    let w = hot_set_beside_a_loop();
    let (r, _, _) = manager_with(percent(&w, 20), true, Eviction::PredictedNextUse);
    for &(id, class, bytes) in &w.buffers {
        r.register_managed(AllocationId(id), class, DevicePtr(id), bytes, Advice::NONE);
    }
    let r: Arc<Residency> = r;
    for cycle in 0..3 {
        for op in &w.cycle {
            let ids: Vec<AllocationId> = op.ids.iter().map(|&i| AllocationId(i)).collect();
            drop(r.prepare(&ids).expect("fits"));
            if cycle > 0 {
                for hot in 1..=4 {
                    assert_eq!(r.is_resident(AllocationId(hot)), Some(true));
                }
            }
        }
    }
}
