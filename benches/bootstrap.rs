//! Bootstrapping as a whole workload: on the CPU with the insecure
//! test-FGb (runs anywhere, in seconds per sample), and on the GPU per
//! preset, policy and budget (FGb by default, `HEMEM_BENCH_PRESETS` for
//! others) where a GPU exists — skipped, saying so, elsewhere. Ids:
//! `bootstrap/<preset>/<backend>[/<policy>/<budget>]`. A setup the budget
//! refuses (the `device` policy at 2 GiB) is reported and skipped.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    missing_docs
)]

mod common;

use criterion::{Criterion, criterion_group, criterion_main};
use hemem::bench::workload::BootstrapWorkload;
use hemem::bootstrap::linear_transform::DiagonalStorage;
use hemem::ckks::sampling::Sampler;
use hemem::memory::PolicyKind;
use hemem::prelude::*;

fn workload(context: &Context, preset: Preset) -> Option<BootstrapWorkload> {
    let mut sampler = Sampler::from_os().expect("OS randomness");
    // Compact, not `Fit`: policies are compared on the same data, whatever
    // room each leaves.
    BootstrapWorkload::generate(context, None, DiagonalStorage::Compact, &mut sampler)
        .map_err(|e| eprintln!("SKIP bootstrap setup on {preset}: {e}"))
        .ok()
}

fn bench(c: &mut Criterion, id: &str, context: &Context, w: &BootstrapWorkload) {
    common::bench_synchronized(c, "bootstrap", id, context, || {
        w.bootstrapper.bootstrap_real(&w.input).unwrap()
    });
}

fn cpu(c: &mut Criterion) {
    let preset = Preset::TestFGb;
    let Some(context) = common::context(preset, DeviceSelection::Cpu, PolicyKind::Planned, None)
    else {
        return;
    };
    if let Some(w) = workload(&context, preset) {
        bench(c, &format!("{preset}/cpu"), &context, &w);
    }
}

fn gpu(c: &mut Criterion) {
    if !common::gpu_available() {
        common::skip_gpu("bootstrap");
        return;
    }
    for preset in common::gpu_presets() {
        for budget in common::GPU_BUDGETS {
            for policy in common::GPU_POLICIES {
                let device = DeviceSelection::Gpu(0);
                let Some(context) = common::context(preset, device, policy, Some(budget)) else {
                    continue;
                };
                let Some(w) = workload(&context, preset) else {
                    continue;
                };
                let id = format!(
                    "{preset}/gpu/{}/{}",
                    policy.name(),
                    common::budget_name(budget)
                );
                bench(c, &id, &context, &w);
            }
        }
    }
}

criterion_group!(benches, cpu, gpu);
criterion_main!(benches);
