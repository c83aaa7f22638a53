//! The stall model against its bounds, the window's bytes and the split it
//! chooses, on random recordings (seeded ChaCha20, never zero sizes or
//! times) and on a constructed burst.

use fnv::{FnvHashMap as HashMap, FnvHashSet as HashSet};

use rand_core::{Rng, SeedableRng};

use super::super::recording::tests::{ids, random_steps};
use super::*;

const MB: u64 = 1_000_000;

/// A random recording: 4–23 objects of 1–80 MB, 10–89 steps of one or two
/// objects, each step computing 0.05–2 ms; a capacity from the largest
/// step's bytes to all the objects'.
struct Case {
    recording: Recording,
    sizes: HashMap<AllocationId, u64>,
    compute: Vec<f64>,
    capacity: u64,
}

fn random_case(rng: &mut rand_chacha::ChaCha20Rng) -> Case {
    let mut next = |m: u64| rng.next_u64() % m;
    let objects = 4 + next(20);
    let sizes: HashMap<AllocationId, u64> = (1..=objects)
        .map(|n| (AllocationId(n), (1 + next(80)) * MB))
        .collect();
    let count = 10 + next(80);
    let steps = random_steps(&mut next, objects, count);
    let compute = (0..steps.len())
        .map(|_| (50 + next(1950)) as f64 * 1e-6)
        .collect();
    let recording = Recording::new(steps);
    let size = |id: AllocationId| sizes.get(&id).copied();
    let largest = recording.largest_step_bytes(&size);
    let total: u64 = sizes.values().sum();
    let capacity = largest + next(total.saturating_sub(largest) + 1);
    Case {
        recording,
        sizes,
        compute,
        capacity,
    }
}

/// A random stable set of `case` that leaves the largest step room.
fn random_stable(rng: &mut rand_chacha::ChaCha20Rng, case: &Case) -> (HashSet<AllocationId>, u64) {
    let size = |id: AllocationId| case.sizes.get(&id).copied();
    let room = case
        .capacity
        .saturating_sub(case.recording.largest_step_bytes(&size));
    let mut stable = HashSet::default();
    let mut used = 0;
    let mut objects: Vec<AllocationId> = case.sizes.keys().copied().collect();
    objects.sort_unstable();
    for id in objects {
        let bytes = case.sizes[&id];
        if rng.next_u64().is_multiple_of(3) && used + bytes <= room {
            stable.insert(id);
            used += bytes;
        }
    }
    (stable, used)
}

/// `simulate_window` as it was written before the window's steps were
/// shared with the stall model: every object's next use looked up at every
/// step.
fn reference_window(
    r: &Recording,
    size: &impl Fn(AllocationId) -> Option<u64>,
    stable: &HashSet<AllocationId>,
    room: u64,
) -> u64 {
    let len = r.steps.len();
    let mut resident: HashSet<AllocationId> = HashSet::default();
    let mut fetched = 0u64;
    for run in 0..2 {
        for k in 0..len {
            let mut wanted: Vec<(usize, AllocationId)> = r
                .positions
                .keys()
                .filter(|id| !stable.contains(id))
                .filter_map(|&id| {
                    let next = r.next_use(id, k)?;
                    (next <= LOOK_AHEAD).then_some((next, id))
                })
                .collect();
            wanted.sort_unstable();
            let mut window = HashSet::default();
            let mut used = 0u64;
            for (next, id) in wanted {
                let bytes = size(id).unwrap_or(0);
                if next > 0 && used + bytes > room {
                    break;
                }
                used += bytes;
                window.insert(id);
            }
            let kept: u64 = resident
                .iter()
                .filter(|id| !window.contains(id))
                .filter_map(|&id| size(id))
                .sum();
            if used + kept > room {
                resident.retain(|id| window.contains(id));
            }
            for &id in &window {
                if resident.insert(id) && run == 1 {
                    fetched += size(id).unwrap_or(0);
                }
            }
        }
    }
    fetched
}

#[test]
fn the_model_runs_at_least_its_compute_and_its_copies_and_fetches_what_the_window_does() {
    const SEED: u64 = 0x57a1_1500;
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(SEED);
    for case_number in 0..150 {
        let case = random_case(&mut rng);
        let (stable, used) = random_stable(&mut rng, &case);
        let size = |id: AllocationId| case.sizes.get(&id).copied();
        let r = &case.recording;
        let room = case.capacity - used;
        let compute: f64 = case.compute.iter().sum();
        let run = r.simulate_stalls(size, &stable, room, &case.compute, DEFAULT_COPY_RATE);
        let at = format!("seed {SEED:#x}, case {case_number}: {run:?}");
        assert!((run.compute - compute).abs() <= compute * 1e-12, "{at}");
        assert!(run.total >= compute * (1.0 - 1e-12), "{at}");
        assert!(run.total >= run.copy, "{at}");
        assert!(
            (run.copy - run.fetched as f64 / DEFAULT_COPY_RATE).abs() <= run.copy * 1e-9,
            "{at}"
        );
        // The same fetches as the window's bytes model, old and new.
        let window = r.simulate_window(&size, &stable, room);
        assert_eq!(run.fetched, window, "{at}");
        assert_eq!(window, reference_window(r, &size, &stable, room), "{at}");
        // Free copies: nothing waits.
        let free = r.simulate_stalls(size, &stable, room, &case.compute, f64::INFINITY);
        assert!(
            (free.total - compute).abs() <= compute * 1e-9,
            "{at}: {free:?}"
        );
    }
}

#[test]
fn the_stall_split_is_never_slower_than_the_window_split() {
    const SEED: u64 = 0x57a1_1501;
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(SEED);
    let (mut faster, mut beyond) = (0, 0);
    for case_number in 0..120 {
        let mut case = random_case(&mut rng);
        let rate = [DEFAULT_COPY_RATE, 10e9, 200e9][case_number % 3];
        let times = StepTimes {
            compute: case.compute.clone(),
            rate,
            rate_measured: true,
        };
        let size = |id: AllocationId| case.sizes.get(&id).copied();
        let capacity = case.capacity;
        // The window split, timed.
        let mut window = case.recording.clone();
        window.set_times(times.clone());
        let window_choice = window.choose_stable(size, capacity, 2.0, 0.0);
        let window_timing = window.time_split(size, capacity).expect("timed");
        // The stall split.
        let r = &mut case.recording;
        r.set_times(times);
        let choice = r.choose_stalls(size, capacity, 2.0, 0.0, MAX_BYTES_OVER_WINDOW);
        let at = format!("seed {SEED:#x}, case {case_number}: {choice:?}");
        let timing = choice.timing.expect("timed");
        assert_eq!(timing.window_run_ns, window_timing.run_ns, "{at}");
        assert!(timing.run_ns <= timing.window_run_ns, "{at}");
        assert!(timing.stall_ns <= timing.run_ns, "{at}");
        assert_eq!(timing.copy_rate, rate as u64, "{at}");
        faster += usize::from(timing.run_ns < timing.window_run_ns);
        // The split moves at most MAX_BYTES_OVER_WINDOW times the window
        // split's bytes, and is at least as fast as every candidate room
        // that does too.
        let cap = (window_choice.planned_bytes as f64 * MAX_BYTES_OVER_WINDOW) as u64;
        assert!(choice.planned_bytes <= cap, "{at}");
        let fastest_candidate = r
            .window_candidates(&size, capacity, 2.0)
            .into_iter()
            .filter(|(_, _, used)| *used <= window_choice.stable_bytes)
            .map(|(_, stable, used)| {
                r.simulate_stalls(size, &stable, capacity - used, &case.compute, rate)
            })
            .filter(|run| run.fetched <= cap)
            .map(|run| nanos(run.total))
            .min()
            .expect("candidates");
        assert!(timing.run_ns <= fastest_candidate, "{at}");
        beyond += usize::from(timing.run_ns < fastest_candidate);
        // The figures are the chosen split's, which fits the capacity.
        let stable = r.stable.clone();
        let used: u64 = stable.iter().filter_map(|&id| size(id)).sum();
        assert_eq!(used, choice.stable_bytes, "{at}");
        assert!(used <= capacity, "{at}");
        // Never less streaming room than the window split leaves.
        assert!(used <= window_choice.stable_bytes, "{at}");
        let room = capacity - used;
        let run = r.simulate_stalls(size, &stable, room, &case.compute, rate);
        assert_eq!(nanos(run.total), timing.run_ns, "{at}");
        assert_eq!(
            choice.planned_bytes,
            r.simulate_window(&size, &stable, room),
            "{at}"
        );
        assert_eq!(choice.largest_step_bytes, window_choice.largest_step_bytes);
    }
    // It is faster in some (16 of these), and the greedy moves find splits
    // that none of the window's candidate rooms gives in a few (8).
    println!("faster in {faster} of 120 recordings, beyond the candidates in {beyond}");
    assert!(
        faster >= beyond && beyond > 0,
        "seed {SEED:#x}: {faster}, {beyond}"
    );
}

#[test]
fn the_byte_cap_bounds_the_splits_that_would_stream_more() {
    const SEED: u64 = 0x57a1_1503;
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(SEED);
    let mut bound = 0;
    for case_number in 0..200 {
        let case = random_case(&mut rng);
        let size = |id: AllocationId| case.sizes.get(&id).copied();
        let times = StepTimes {
            compute: case.compute.clone(),
            rate: [DEFAULT_COPY_RATE, 10e9][case_number % 2],
            rate_measured: true,
        };
        let mut window = case.recording.clone();
        let window_bytes = window
            .choose_stable(size, case.capacity, 2.0, 0.0)
            .planned_bytes;
        let split = |cap: f64| {
            let mut r = case.recording.clone();
            r.set_times(times.clone());
            r.choose_stalls(size, case.capacity, 2.0, 0.0, cap)
        };
        let free = split(f64::INFINITY);
        // The cap in use, and tighter ones (random recordings rarely
        // tempt the model past twice the window's bytes; FGb did).
        for over in [MAX_BYTES_OVER_WINDOW, 1.25, 1.0] {
            let capped = split(over);
            let at = format!("seed {SEED:#x}, case {case_number}, cap {over}");
            let cap = (window_bytes as f64 * over) as u64;
            assert!(capped.planned_bytes <= cap, "{at}: {capped:?}");
            // Still never slower than the window split in the model.
            let timing = capped.timing.expect("timed");
            assert!(timing.run_ns <= timing.window_run_ns, "{at}");
            // (A cap can also change a split that ends below it: the greedy
            // moves cannot pass through splits above it.)
            bound += usize::from(free.planned_bytes > cap);
        }
    }
    // The caps change the split in some of these cases (not vacuous).
    assert!(bound > 0, "no cap ever bound in 200 cases");
}

#[test]
fn without_times_the_stall_split_is_the_window_split() {
    const SEED: u64 = 0x57a1_1502;
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(SEED);
    for _ in 0..20 {
        let case = random_case(&mut rng);
        let size = |id: AllocationId| case.sizes.get(&id).copied();
        let mut window = case.recording.clone();
        let mut stalls = case.recording.clone();
        let expected = window.choose_stable(size, case.capacity, 2.0, 0.0);
        // A partly timed run is not modelled either.
        stalls.set_times(StepTimes {
            compute: vec![1e-3; case.compute.len() - 1],
            rate: DEFAULT_COPY_RATE,
            rate_measured: false,
        });
        assert_eq!(
            stalls.choose_stalls(size, case.capacity, 2.0, 0.0, MAX_BYTES_OVER_WINDOW),
            expected
        );
        assert_eq!(stalls.stable, window.stable);
    }
}

/// A phase's steps, each step's compute in seconds, and each object's id
/// and bytes.
pub(in crate::residency) type BurstCase = (Vec<Vec<AllocationId>>, Vec<f64>, Vec<(u64, u64)>);

/// A run shaped like a bootstrap's: four 80 MB objects (1–4) used twice
/// each in slow steps (5 ms, SlotToCoeff/EvalMod-like) far apart, a burst
/// of `burst` other 80 MB objects (5, 6, …) in fast steps (0.5 ms,
/// CoeffToSlot's key switches), and a 1 MB object (100) used in every step
/// of the `stretch` steps after each group (1 ms each): the steps, their
/// times and the objects' sizes.
pub(in crate::residency) fn burst_case(burst: u64, stretch: usize) -> BurstCase {
    let small = 100u64;
    let mut steps = Vec::new();
    let mut compute = Vec::new();
    let stretch = |steps: &mut Vec<Vec<AllocationId>>, compute: &mut Vec<f64>| {
        for _ in 0..stretch {
            steps.push(ids(&[small]));
            compute.push(1e-3);
        }
    };
    for _ in 0..2 {
        for n in 1..=4 {
            steps.push(ids(&[n]));
            compute.push(5e-3);
        }
        stretch(&mut steps, &mut compute);
    }
    for n in 5..5 + burst {
        steps.push(ids(&[n]));
        compute.push(0.5e-3);
    }
    stretch(&mut steps, &mut compute);
    let mut sizes: Vec<(u64, u64)> = (1..5 + burst).map(|n| (n, 80 * MB)).collect();
    sizes.push((small, MB));
    (steps, compute, sizes)
}

/// [`burst_case`] as a timed recording, with its sizes, for a capacity of
/// four 80 MB objects, the small one and twice the largest step.
fn burst_recording(burst: u64) -> (Recording, HashMap<AllocationId, u64>, u64) {
    let (steps, compute, sizes) = burst_case(burst, 60);
    let mut r = Recording::new(steps);
    r.set_times(StepTimes {
        compute,
        rate: DEFAULT_COPY_RATE,
        rate_measured: false,
    });
    let sizes = sizes
        .into_iter()
        .map(|(n, b)| (AllocationId(n), b))
        .collect();
    (r, sizes, 4 * 80 * MB + MB + 2 * 80 * MB)
}

#[test]
fn a_burst_after_slack_is_given_room_and_the_slow_objects_stream() {
    let (mut r, sizes, capacity) = burst_recording(4);
    let size = |id: AllocationId| sizes.get(&id).copied();
    // The window keeps the objects fetched twice a run (the slow ones):
    // the fewest bytes, but the burst streams through two objects' room
    // and waits for every copy after the second.
    let mut window = r.clone();
    let by_bytes = window.choose_stable(size, capacity, 2.0, 0.0);
    let slow: HashSet<AllocationId> = ids(&[1, 2, 3, 4]).into_iter().collect();
    assert!(slow.is_subset(&window.stable), "{:?}", window.stable);
    let window_run = window.time_split(size, capacity).expect("timed");
    assert!(window_run.stall_ns > 1_000_000, "{window_run:?}");
    // The stall split streams slow objects behind their long steps and
    // leaves the burst room: more bytes, (almost) no stall.
    let choice = r.choose_stalls(size, capacity, 2.0, 0.0, MAX_BYTES_OVER_WINDOW);
    let timing = choice.timing.expect("timed");
    assert!(!slow.is_subset(&r.stable), "{:?}", r.stable);
    assert!(timing.run_ns < timing.window_run_ns, "{timing:?}");
    assert_eq!(timing.window_run_ns, window_run.run_ns);
    assert!(
        timing.stall_ns * 10 < window_run.stall_ns,
        "{timing:?} {window_run:?}"
    );
    assert!(
        choice.planned_bytes > by_bytes.planned_bytes,
        "{choice:?} {by_bytes:?}"
    );
}
