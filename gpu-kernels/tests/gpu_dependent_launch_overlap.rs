//! Programmatic dependent launch takes effect (GPU only; skipped without
//! one, or on a card older than compute capability 9.0).
//!
//! `gpu_dependent_launch.rs` shows the order is kept; this shows the
//! launches do overlap, which a driver that ignored the attribute would
//! also pass there. CUPTI's concurrent-kernel records (enabled before any
//! context, hence a binary of its own) give each kernel's start and end: with
//! the mode on, some kernel of a dependent chain must start before the one
//! before it has ended (its blocks scheduled during that kernel's last wave,
//! then waiting); with it off, none may.
#![expect(clippy::expect_used, reason = "test helpers outside #[test] functions")]

mod dependent_chain;

use dependent_chain::Chain;
use hemem_memory::cuda::cupti::KernelTimeline;
use hemem_memory::testing::{gpu_or_skip, gpu_required};
use hemem_memory::{DependentLaunch, GpuDevice, StreamId};

/// Launches of `binary_op` that started before the previous one ended, over
/// a chain of `rounds` rounds in `mode`.
fn overlaps(device: &GpuDevice, timeline: &KernelTimeline, mode: DependentLaunch) -> usize {
    let mut chain = Chain::new(device, mode, 0x5eed, 1 << 12, 3);
    device.synchronize(StreamId::Compute).expect("sync");
    timeline.collect().expect("records");
    for _ in 0..100 {
        chain.round();
    }
    assert!(
        chain.device_x() == chain.x,
        "{mode}: x differs from the host's"
    );
    device.synchronize(StreamId::Compute).expect("sync");
    let records = timeline.collect().expect("records");
    let mut kernels: Vec<(u64, u64)> = records
        .kernels
        .iter()
        .zip(
            records
                .names
                .iter()
                .map(Some)
                .chain(std::iter::repeat(None)),
        )
        .filter(|(_, name)| name.is_none_or(|n| n.contains("binary_op")))
        .map(|(&interval, _)| interval)
        .collect();
    assert!(
        kernels.len() >= 300,
        "{mode}: {} kernel records",
        kernels.len()
    );
    kernels.sort_unstable();
    kernels
        .iter()
        .zip(kernels.iter().skip(1))
        .filter(|(before, after)| after.0 < before.1)
        .count()
}

#[test]
fn gpu_dependent_launches_overlap_and_plain_ones_do_not() {
    let name = "gpu_dependent_launches_overlap_and_plain_ones_do_not";
    let timeline = match KernelTimeline::enable() {
        Ok(t) => t,
        Err(e) => {
            assert!(!gpu_required(), "{name}: CUPTI unavailable: {e}");
            println!("SKIP {name}: no GPU or CUPTI ({e})");
            return;
        }
    };
    let Some(device) = gpu_or_skip(name) else {
        return;
    };
    if device.info().compute_capability < DependentLaunch::MIN_CAPABILITY {
        println!(
            "SKIP {name}: compute capability {} has no dependent launch",
            device.info().compute_capability
        );
        return;
    }
    let plain = overlaps(&device, &timeline, DependentLaunch::Off);
    let dependent = overlaps(&device, &timeline, DependentLaunch::On);
    println!("{name}: overlapping launches: plain {plain}, dependent {dependent} of 299");
    assert_eq!(plain, 0, "plain launches in one stream overlapped");
    assert!(
        dependent > 0,
        "no dependent launch overlapped its predecessor"
    );
}
