//! Programmatic dependent launch keeps the stream's order (GPU only;
//! skipped without one).
//!
//! With [`DependentLaunch`] on, a kernel's blocks may be scheduled while the
//! kernel before it still runs, and only the `griddepcontrol.wait` each CKKS
//! kernel starts with keeps it from reading what that kernel has not written
//! yet, or overwriting what it still reads. A long chain of dependent
//! element-wise launches ([`dependent_chain`]) gives a different result as
//! soon as one launch runs early; the host's modular arithmetic, step for
//! step, is the reference. Between the launches the chain also puts what a
//! bootstrap puts there: operands uploaded on the copy stream and handed to
//! the compute stream through an event (the planned policy's fetches), and
//! downloads of an intermediate result. Small grids (many kernels in flight)
//! and large ones (several waves) are both run, with the mode on (where the
//! card has it), off, and `auto`.
#![expect(clippy::expect_used, reason = "test helpers outside #[test] functions")]

mod dependent_chain;

use std::time::{SystemTime, UNIX_EPOCH};

use dependent_chain::Chain;
use hemem_memory::testing::gpu_or_skip;
use hemem_memory::{DependentLaunch, StreamId};

/// Rounds of three dependent launches each.
const ROUNDS: usize = 200;
/// Every this many rounds, `y += z` for a `z` uploaded on the copy stream.
const INJECT_EVERY: usize = 25;
/// Every this many rounds, `x` is downloaded and checked.
const CHECK_EVERY: usize = 64;

fn chain_matches_host(name: &str, n: usize, limbs: usize) {
    let Some(device) = gpu_or_skip(name) else {
        return;
    };
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    let supported = device.info().compute_capability >= DependentLaunch::MIN_CAPABILITY;
    let mut modes = vec![DependentLaunch::Off, DependentLaunch::Auto];
    if supported {
        modes.push(DependentLaunch::On);
    }
    for mode in modes {
        let mut chain = Chain::new(&device, mode, seed, n, limbs);
        assert_eq!(
            chain.kernels.dependent_launch(),
            mode != DependentLaunch::Off && supported,
            "{name}: {mode}"
        );
        for round in 0..ROUNDS {
            chain.round();
            if round % INJECT_EVERY == INJECT_EVERY - 1 {
                chain.inject(seed.wrapping_add(round as u64 + 7));
            }
            if round % CHECK_EVERY == CHECK_EVERY - 1 {
                assert!(
                    chain.device_x() == chain.x,
                    "{name}: {mode}, seed {seed}, round {round}: x differs from the host's"
                );
            }
        }
        let (x, y) = (chain.device_x(), chain.device_y());
        device.synchronize(StreamId::Compute).expect("sync");
        device.synchronize(StreamId::Copy).expect("sync");
        assert_eq!(device.take_deferred_error(), None);
        assert!(
            x == chain.x && y == chain.y,
            "{name}: {mode}, seed {seed}: the chain differs from the host's"
        );
    }
}

/// 2^12 words × 3 limbs: 24 blocks a launch, so many launches are in flight
/// at once.
#[test]
fn gpu_dependent_launch_small_grids_keep_order() {
    chain_matches_host("gpu_dependent_launch_small_grids_keep_order", 1 << 12, 3);
}

/// 2^16 words × 24 limbs: thousands of blocks, several waves a launch.
#[test]
fn gpu_dependent_launch_large_grids_keep_order() {
    chain_matches_host("gpu_dependent_launch_large_grids_keep_order", 1 << 16, 24);
}
