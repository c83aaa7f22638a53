//! The encrypted-inference workload ([`hemem::inference`]): one image
//! through the ResNet-20-shaped network. On the CPU with the insecure
//! test-FGb and one block per stage (runs anywhere, seconds per sample);
//! on the GPU with ResNet-20's 3 blocks per stage per preset, policy and
//! budget (FGb by default, `HEMEM_BENCH_PRESETS` for others) where a GPU
//! exists — skipped, saying so, elsewhere. Ids:
//! `inference/<preset>/<backend>[/<policy>/<budget>]`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    missing_docs
)]

mod common;

use criterion::{Criterion, criterion_group, criterion_main};
use hemem::bench::workload::InferenceWorkload;
use hemem::bootstrap::linear_transform::DiagonalStorage;
use hemem::inference::NetworkShape;
use hemem::memory::PolicyKind;
use hemem::prelude::*;

fn workload(context: &Context, shape: &NetworkShape) -> Option<InferenceWorkload> {
    // Compact, not `Fit`: the network's own diagonals are encoded after
    // the bootstrapper, so `Fit` could not weigh them.
    InferenceWorkload::generate(context, shape, DiagonalStorage::Compact)
        .map_err(|e| eprintln!("SKIP inference setup on {}: {e}", context.params().name()))
        .ok()
}

fn bench(c: &mut Criterion, id: &str, context: &Context, w: &InferenceWorkload) {
    common::bench_synchronized(c, "inference", id, context, || {
        w.network.infer(&w.input).unwrap()
    });
}

fn cpu(c: &mut Criterion) {
    let preset = Preset::TestFGb;
    let Some(context) = common::context(preset, DeviceSelection::Cpu, PolicyKind::Planned, None)
    else {
        return;
    };
    let shape = NetworkShape {
        blocks_per_stage: 1,
        ..NetworkShape::resnet20_for_slots(context.params().slots())
    };
    if let Some(w) = workload(&context, &shape) {
        bench(c, &format!("{preset}/cpu"), &context, &w);
    }
}

fn gpu(c: &mut Criterion) {
    if !common::gpu_available() {
        common::skip_gpu("inference");
        return;
    }
    for preset in common::gpu_presets() {
        let shape = NetworkShape::resnet20_for_slots(common::parameters(preset).slots());
        for budget in common::GPU_BUDGETS {
            for policy in common::GPU_POLICIES {
                let device = DeviceSelection::Gpu(0);
                let Some(context) = common::context(preset, device, policy, Some(budget)) else {
                    continue;
                };
                let Some(w) = workload(&context, &shape) else {
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
