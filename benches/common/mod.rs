//! What the root crate's workload benches share: the cells they measure
//! (CPU with small insecure presets everywhere; the GPU per policy and
//! budget where a GPU exists), contexts for them, and the skip notices.

use std::time::Duration;

use criterion::Criterion;
use hemem::memory::{BudgetSetting, ByteSize, MemoryConfig, PolicyConfig, PolicyKind};
use hemem::prelude::*;

/// The budgets the GPU benches emulate: the paper's 2 and 6 GiB cards.
pub const GPU_BUDGETS: [u64; 2] = [2 * ByteSize::GIB, 6 * ByteSize::GIB];

/// The policies the GPU benches compare (`profiled` needs a recording
/// first: `hemem bench oversub` does that).
pub const GPU_POLICIES: [PolicyKind; 5] = [
    PolicyKind::Device,
    PolicyKind::Managed,
    PolicyKind::Static,
    PolicyKind::Dynamic,
    PolicyKind::Planned,
];

/// The presets of the GPU benches: `HEMEM_BENCH_PRESETS` (comma-separated
/// names), FGb by default.
pub fn gpu_presets() -> Vec<Preset> {
    std::env::var("HEMEM_BENCH_PRESETS")
        .unwrap_or_else(|_| "FGb".into())
        .split(',')
        .filter_map(|name| match name.trim().parse() {
            Ok(p) => Some(p),
            Err(e) => {
                eprintln!("SKIP preset {name:?}: {e}");
                None
            }
        })
        .collect()
}

/// Whether a GPU is usable, asked the way users ask: `auto` picks the GPU
/// where one exists and falls back to the CPU otherwise.
pub fn gpu_available() -> bool {
    let Ok(params) = Parameters::from_preset_with(Preset::TestFTb, SecurityCheck::AllowInsecure)
    else {
        return false;
    };
    Context::new(params, DeviceSelection::Auto).is_ok_and(|c| c.device() != Device::Cpu)
}

/// Prints why the GPU benches of `bench` are skipped.
pub fn skip_gpu(bench: &str) {
    eprintln!(
        "SKIP {bench} GPU benches: no GPU (auto chose the CPU); \
         they run per policy ({}) and budget (2GiB, 6GiB) where one exists",
        GPU_POLICIES.map(|p| p.name()).join(", ")
    );
}

/// The parameters of `preset` (test presets allowed).
pub fn parameters(preset: Preset) -> Parameters {
    let check = if preset.is_test() {
        SecurityCheck::AllowInsecure
    } else {
        SecurityCheck::Enforce
    };
    Parameters::from_preset_with(preset, check).expect("preset parameters")
}

/// A context of `preset` on `device` under `policy` and `budget`
/// (`HEMEM_*` settings first); `None`, with a notice, where it cannot be made.
pub fn context(
    preset: Preset,
    device: DeviceSelection,
    policy: PolicyKind,
    budget: Option<u64>,
) -> Option<Context> {
    let made = (|| -> hemem::Result<Context> {
        let mut config = MemoryConfig::from_env()?;
        config.policy = PolicyConfig::from_kind(policy, None)?;
        if let Some(bytes) = budget {
            config.budget = BudgetSetting::Bytes(bytes);
        }
        Ok(Context::with_memory(parameters(preset), device, &config)?)
    })();
    made.map_err(|e| eprintln!("SKIP {preset} {}: {e}", policy.name()))
        .ok()
}

/// `2GiB` for a budget's id.
pub fn budget_name(bytes: u64) -> String {
    ByteSize(bytes).to_string().replace(' ', "")
}

/// Times `run` as `group/id`: ten samples after a one-second warm-up, each
/// ending with the device synchronised so that GPU work is inside the time.
pub fn bench_synchronized<T>(
    c: &mut Criterion,
    group: &str,
    id: &str,
    context: &Context,
    run: impl Fn() -> T,
) {
    let mut group = c.benchmark_group(group);
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.bench_function(id, |b| {
        b.iter(|| {
            let out = run();
            context.synchronize().unwrap();
            out
        })
    });
    group.finish();
}
