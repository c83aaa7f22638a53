//! Bytes of each preset's DFT diagonals, encoded and compact (the table of
//! `docs/BENCHMARKS.md`, "Compact diagonals"), counted from the schedule
//! without encoding anything; with `--measure PRESET`, the CPU cost of
//! encoding and expanding one diagonal at that preset's CoeffToSlot and
//! SlotToCoeff levels:
//!
//! ```text
//! cargo run --release -p hemem-bootstrap --example diagonal_bytes
//! cargo run --release -p hemem-bootstrap --example diagonal_bytes -- --measure test-FGb
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::time::Instant;

use hemem_bootstrap::dft::HomomorphicDft;
use hemem_bootstrap::linear_transform::EXPAND_BATCH;
use hemem_bootstrap::schedule::{BootstrapSchedule, INPUT_LEVEL};
use hemem_ckks::encoding::Encoder;
use hemem_ckks::prelude::*;
use hemem_ckks::testing::{seeded_rng, unit_disk};
use hemem_memory::MemoryClass;

/// Diagonals per factor of `dft` as the bootstrapper encodes them.
fn counts(dft: &HomomorphicDft, ratio: i32) -> Vec<usize> {
    dft.linear_transforms(ratio)
        .iter()
        .map(|lt| lt.matrix().diagonals().len())
        .collect()
}

fn gb(bytes: usize) -> f64 {
    bytes as f64 / 1e9
}

fn table() {
    println!(
        "| preset | slots | CtS diagonals (levels) | StC diagonals (levels) | encoded CtS + StC | compact CtS + StC | ratio |"
    );
    println!("|---|---|---|---|---|---|---|");
    for preset in Preset::HEAAN.into_iter().chain(Preset::TEST) {
        let params = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure).unwrap();
        let schedule = BootstrapSchedule::recommended(&params).unwrap();
        let n = params.degree().get();
        let slots = schedule.slots();
        let ratio = schedule.log_bsgs_ratio;
        let cts = counts(&schedule.cts_dft().unwrap(), ratio);
        let stc = counts(&schedule.stc_dft().unwrap(), ratio);
        let encoded = |counts: &[usize], start: usize| -> usize {
            counts
                .iter()
                .enumerate()
                .map(|(i, c)| c * (start - i + 1) * n * 8)
                .sum()
        };
        let (cts_enc, stc_enc) = (
            encoded(&cts, schedule.top_level),
            encoded(&stc, INPUT_LEVEL),
        );
        let compact = |counts: &[usize]| counts.iter().sum::<usize>() * 2 * slots * 8;
        let (cts_c, stc_c) = (compact(&cts), compact(&stc));
        let levels = |start: usize, k: usize| format!("{}–{}", start, start + 1 - k);
        println!(
            "| {preset} | 2^{} | {:?} ({}) | {:?} ({}) | {:.3} + {:.3} GB | {:.3} + {:.3} GB | {:.1}× |",
            slots.trailing_zeros(),
            cts,
            levels(schedule.top_level, cts.len()),
            stc,
            levels(INPUT_LEVEL, stc.len()),
            gb(cts_enc),
            gb(stc_enc),
            gb(cts_c),
            gb(stc_c),
            (cts_enc + stc_enc) as f64 / (cts_c + stc_c) as f64
        );
    }
}

/// Median of `runs` timings of `f`, in milliseconds.
fn median_ms(runs: usize, mut f: impl FnMut()) -> f64 {
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

fn measure(preset: Preset) {
    assert!(preset.is_test(), "measure test presets only");
    let params = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure).unwrap();
    let context = Context::new(params.clone(), DeviceSelection::Cpu).unwrap();
    let encoder = Encoder::new(&context);
    let slots = params.slots();
    let schedule = BootstrapSchedule::recommended(&params).unwrap();
    let mut rng = seeded_rng(5);
    let values: Vec<_> = (0..EXPAND_BATCH)
        .map(|_| unit_disk(&mut rng, slots))
        .collect();
    println!(
        "{preset}: N = 2^{}, {slots} slots, one thread per `RAYON_NUM_THREADS`",
        params.degree().get().trailing_zeros()
    );
    println!(
        "| level | limbs | encode (full) | encode (compact) | expand (batch of {EXPAND_BATCH}) | encoded bytes | compact bytes |"
    );
    println!("|---|---|---|---|---|---|---|");
    for level in [schedule.top_level, INPUT_LEVEL] {
        let level = Level(level);
        let scale = Scale(params.q_modulus(level).unwrap().value() as f64);
        let class = MemoryClass::BootstrapConstant;
        let full = median_ms(5, || {
            for v in &values {
                encoder
                    .encode_at_class(v, level, scale, slots, class)
                    .unwrap();
            }
        }) / EXPAND_BATCH as f64;
        let mut compact = Vec::new();
        let encode = median_ms(5, || {
            compact = values
                .iter()
                .map(|v| {
                    encoder
                        .encode_compact_at_class(v, level, scale, slots, class)
                        .unwrap()
                })
                .collect();
        }) / EXPAND_BATCH as f64;
        let refs: Vec<_> = compact.iter().collect();
        let expand = median_ms(9, || {
            encoder.expand(&refs, MemoryClass::Temporary).unwrap();
        }) / EXPAND_BATCH as f64;
        println!(
            "| {} | {} | {full:.3} ms | {encode:.3} ms | {expand:.3} ms | {} | {} |",
            level.0,
            level.0 + 1,
            compact[0].expanded_bytes(),
            compact[0].size_bytes()
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--measure") => measure(
            args.get(1)
                .map_or("test-FGb", String::as_str)
                .parse()
                .expect("a preset name"),
        ),
        _ => table(),
    }
}
