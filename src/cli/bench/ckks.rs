//! `hemem bench ckks`: the NTT and evaluator operations at a preset's top
//! level, on the CPU or the GPU, under one or several memory policies.
//!
//! GPU timing: each operation is queued `iterations` times back to back and
//! the stream synchronised before the host clock is read (launch overhead
//! included, as in a pipeline); warm-up runs come first. `submit_ms` is the
//! host time to queue one iteration (before the synchronisation): when it
//! is close to `ms`, the operation is bound by the host, not the GPU.
//! `--ops` runs a subset (for profilers such as `ncu`). The NTT runs over
//! more input buffers than the L2 cache holds, rotating among them, and its
//! achieved bandwidth — `2 × limbs × N × 8` bytes over the time — is compared
//! with a device-to-device copy measured in the same run.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use hemem_ckks::backend::{Backend, DeviceSelection};
use hemem_ckks::prelude::*;
use hemem_ckks::sampling::{Sampler, SeedPrf, UniformSeed};
use hemem_memory::{MemoryClass, PolicyConfig, policy::PolicyKind};
use num_complex::Complex64;
use serde::Serialize;

use crate::cli::device::DeviceArgs;
use crate::cli::memory::MemoryArgs;

/// Arguments of `hemem bench ckks`.
#[derive(Debug, clap::Args)]
#[command(mut_arg("device", |a| a.default_value("gpu")))]
pub struct Args {
    /// Parameter preset.
    #[arg(long, default_value = "FGb")]
    preset: String,
    #[command(flatten)]
    device: DeviceArgs,
    /// Timed repetitions of each operation.
    #[arg(long, default_value_t = 20, value_parser = super::super::at_least_one)]
    iterations: usize,
    /// Policies to compare (comma-separated; GPU only). The first is the
    /// baseline of the ratios.
    #[arg(long, default_value = "device,static,managed,dynamic")]
    policies: String,
    /// Input buffers the NTT rotates over (more than the L2 cache holds).
    #[arg(long, default_value_t = 8, value_parser = super::super::at_least_one)]
    ntt_buffers: usize,
    /// Operations to run (comma-separated; default all): ntt_forward,
    /// ntt_inverse, tensor, decompose, mult_relin, mult_relin_rescale,
    /// rescale, rotate, conjugate, hoisted_rotate_8, hoisted_rotate_16, add,
    /// key_switch, key_switch_compressed (a relinearisation key stored, and
    /// compressed: `a` generated from the seed inside the inner product),
    /// expand_key (generate every digit's `a` of one top-level key from its
    /// seed).
    #[arg(long)]
    ops: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    memory: MemoryArgs,
}

#[derive(Debug, Serialize)]
struct Timing {
    op: String,
    /// Wall time per iteration, queue to completion.
    ms: f64,
    /// Host time per iteration to queue the work (before the final sync).
    submit_ms: f64,
}

/// Every operation `--ops` accepts, in run order.
const OPS: [&str; 15] = [
    "ntt_forward",
    "ntt_inverse",
    "tensor",
    "decompose",
    "mult_relin",
    "mult_relin_rescale",
    "rescale",
    "rotate",
    "conjugate",
    "hoisted_rotate_8",
    "hoisted_rotate_16",
    "add",
    "key_switch",
    "key_switch_compressed",
    "expand_key",
];

/// Operations that need neither a ciphertext nor keys.
const STANDALONE: [&str; 3] = ["ntt_forward", "ntt_inverse", "expand_key"];

#[derive(Debug, Serialize)]
struct PolicyRun {
    policy: String,
    timings: Vec<Timing>,
    /// The forward NTT's bandwidth; absent when `--ops` leaves it out.
    #[serde(skip_serializing_if = "Option::is_none")]
    ntt_gb_per_s: Option<f64>,
    copy_gb_per_s: f64,
    /// Where the run went (`auto` resolved).
    #[serde(skip)]
    device: String,
}

#[derive(Debug, Serialize)]
struct Report {
    preset: String,
    device: String,
    iterations: usize,
    runs: Vec<PolicyRun>,
}

/// `(wall ms, submit ms)` per iteration. On a GPU the timed iterations
/// are bracketed by `cuProfilerStart`/`Stop`, so `ncu --profile-from-start
/// off` sees only them (not key generation or warm-up).
fn time<T>(
    backend: &Arc<dyn Backend>,
    iterations: usize,
    mut f: impl FnMut() -> hemem_ckks::Result<T>,
) -> anyhow::Result<(f64, f64)> {
    for _ in 0..3 {
        f()?;
    }
    backend.synchronize()?;
    let gpu = backend.allocator().device();
    if let Some(d) = gpu {
        d.set_profiling(true)?;
    }
    let start = Instant::now();
    for _ in 0..iterations {
        f()?;
    }
    let queued = start.elapsed();
    backend.synchronize()?;
    if let Some(d) = gpu {
        d.set_profiling(false)?;
    }
    let per = |d: std::time::Duration| d.as_secs_f64() * 1e3 / iterations.max(1) as f64;
    Ok((per(start.elapsed()), per(queued)))
}

fn timing(op: &str, (ms, submit_ms): (f64, f64)) -> Timing {
    Timing {
        op: op.into(),
        ms,
        submit_ms,
    }
}

fn run_policy(
    params: &Parameters,
    selection: DeviceSelection,
    args: &Args,
    policy: Option<&str>,
) -> anyhow::Result<PolicyRun> {
    let mut config = args.memory.config()?;
    if let Some(p) = policy {
        let kind: PolicyKind = p.parse()?;
        config.policy = PolicyConfig::from_kind(kind, None)?;
    }
    let context = Context::with_memory(params.clone(), selection, &config)?;
    let backend = Arc::clone(context.backend());
    let n = params.degree().get();
    let level = params.max_level();
    let limbs = level.primes();
    let mut sampler = Sampler::from_os()?;
    let mut timings = Vec::new();

    // Device-to-device copy bandwidth (read + write) of 512 MiB, through the
    // memory system's copy (the driver's memcpy on a GPU). The source is
    // written first: on the host, never-written pages all map the kernel's
    // one zero page, whose reads hit the cache (83 GB/s on a 2-core VM).
    let allocator = backend.allocator();
    let words = 64usize << 20;
    let mut src = allocator.allocate(MemoryClass::Temporary, words * 8)?;
    let chunk = 1usize << 20;
    for start in (0..words).step_by(chunk) {
        let fill: Vec<u64> = (start..start + chunk)
            .map(|i| (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .collect();
        allocator.upload(&mut src, start, &fill)?;
    }
    let mut dst = allocator.allocate(MemoryClass::Temporary, words * 8)?;
    let (copy_ms, _) = time(&backend, args.iterations, || {
        allocator
            .copy(&src, 0, &mut dst, 0, words)
            .map_err(hemem_ckks::Error::from)
    })?;
    let copy_gb_per_s = 2.0 * (words * 8) as f64 / (copy_ms * 1e-3) / 1e9;
    drop((src, dst));

    let wanted = |op: &str| {
        args.ops
            .as_deref()
            .is_none_or(|list| list.split(',').any(|o| o.trim() == op))
    };

    // NTT over every top-level limb, rotating over several buffers.
    let q: Vec<usize> = (0..limbs).collect();
    let mut ntt_gb_per_s = None;
    for (op, forward) in [("ntt_forward", true), ("ntt_inverse", false)] {
        if !wanted(op) {
            continue;
        }
        let mut polys = (0..args.ntt_buffers)
            .map(|_| {
                let words: Vec<u64> = q
                    .iter()
                    .flat_map(|&i| {
                        let p = params.q_moduli().get(i).map_or(2, |m| m.value());
                        (0..n).map(|_| sampler.uniform_mod(p)).collect::<Vec<_>>()
                    })
                    .collect();
                hemem_ckks::poly::RnsPoly::<hemem_ckks::poly::Coeff>::from_words(
                    &backend,
                    &q,
                    MemoryClass::Temporary,
                    &words,
                )
            })
            .collect::<hemem_ckks::Result<Vec<_>>>()?;
        let mut next = 0usize;
        let count = polys.len();
        let t = time(&backend, args.iterations * count, || {
            next = (next + 1) % count;
            match polys.get_mut(next) {
                Some(p) if forward => backend.ntt_forward(p.limbs_mut()?),
                Some(p) => backend.ntt_inverse(p.limbs_mut()?),
                None => Ok(()),
            }
        })?;
        if forward {
            ntt_gb_per_s = Some(2.0 * (limbs * n * 8) as f64 / (t.0 * 1e-3) / 1e9);
        }
        timings.push(timing(&format!("{op}/{limbs}x2^{}", n.trailing_zeros()), t));
    }

    // One top-level switching key's uniform halves from its seed: every
    // digit over every limb of Q ∪ P, generated where the key lives.
    if wanted("expand_key") {
        let qp = params.qp_indices(level)?;
        let digits = params.digits_at(level);
        let mut bytes = [0u8; 32];
        bytes.copy_from_slice(sampler.seed().as_ref());
        let mut halves = (0..digits)
            .map(|_| backend.allocate(MemoryClass::Temporary, qp.len(), false))
            .collect::<hemem_ckks::Result<Vec<_>>>()?;
        // The default PRF under the operation's name, ChaCha20 (earlier
        // builds' keys) beside it.
        for (prf, name) in [
            (SeedPrf::default(), "expand_key"),
            (SeedPrf::ChaCha20, "expand_key_chacha20"),
        ] {
            let seed = UniformSeed::new(bytes, prf);
            let t = time(&backend, args.iterations, || {
                for (j, a) in halves.iter_mut().enumerate() {
                    let view = hemem_ckks::backend::LimbsMut::new(backend.as_ref(), a, &qp)?;
                    backend.uniform_from_seed(&seed, j, view)?;
                }
                Ok(())
            })?;
            timings.push(timing(
                &format!("{name}/{digits}x{}x2^{}", qp.len(), n.trailing_zeros()),
                t,
            ));
        }
    }

    // Evaluator operations at the top level.
    let evaluator_ops = || OPS.iter().filter(|op| !STANDALONE.contains(op));
    let needs_keys = evaluator_ops().skip(2).any(|op| wanted(op));
    let needs_ct = evaluator_ops().any(|op| wanted(op));
    if needs_ct {
        let keygen = KeyGenerator::new(&context)?;
        let secret = keygen.secret_key()?;
        let public = keygen.public_key(&secret)?;
        let request = KeySetRequest {
            relinearization: true,
            conjugation: true,
            rotations: if wanted("hoisted_rotate_16") {
                (1..=16).collect()
            } else if wanted("hoisted_rotate_8") {
                (1..=8).collect()
            } else {
                vec![1]
            },
            ..Default::default()
        };
        let eval = if needs_keys {
            let keys = keygen
                .key_set(&secret, &request)
                .context("generating the key set")?;
            Evaluator::with_keys(&context, Arc::new(keys))
        } else {
            Evaluator::new(&context)
        };
        let encoder = Encoder::new(&context);
        let values: Vec<Complex64> = (0..params.slots())
            .map(|_| Complex64::new(sampler.uniform_f64() - 0.5, sampler.uniform_f64() - 0.5))
            .collect();
        let scale = params.default_scale(level)?;
        let pt = encoder.encode_at(&values, level, scale, params.slots())?;
        let encryptor = Encryptor::new(&context)?;
        let ct = encryptor.encrypt(&pt, &public)?;
        let it = args.iterations;
        if wanted("tensor") {
            timings.push(timing(
                "tensor",
                time(&backend, it, || eval.tensor(&ct, &ct))?,
            ));
        }
        if wanted("decompose") {
            timings.push(timing(
                "decompose",
                time(&backend, it, || eval.decompose(&ct))?,
            ));
        }
        if wanted("mult_relin") {
            let t = time(&backend, it, || eval.mult_without_rescale(&ct, &ct))?;
            timings.push(timing("mult_relin", t));
        }
        if wanted("mult_relin_rescale") {
            timings.push(timing(
                "mult_relin_rescale",
                time(&backend, it, || eval.mult(&ct, &ct))?,
            ));
        }
        if wanted("rescale") {
            let wide = eval.mult_without_rescale(&ct, &ct)?;
            let t = time(&backend, it, || eval.rescale_unchecked(&wide))?;
            timings.push(timing("rescale", t));
        }
        if wanted("rotate") {
            timings.push(timing(
                "rotate",
                time(&backend, it, || eval.rotate(&ct, 1))?,
            ));
        }
        if wanted("conjugate") {
            timings.push(timing(
                "conjugate",
                time(&backend, it, || eval.conjugate(&ct))?,
            ));
        }
        for (op, k) in [("hoisted_rotate_8", 8i64), ("hoisted_rotate_16", 16)] {
            if wanted(op) {
                let steps: Vec<i64> = (1..=k).collect();
                let t = time(&backend, it, || eval.rotate_hoisted(&ct, &steps))?;
                timings.push(timing(op, t));
            }
        }
        if wanted("add") {
            timings.push(timing("add", time(&backend, it, || eval.add(&ct, &ct))?));
        }
        if wanted("key_switch") || wanted("key_switch_compressed") {
            // Keys are made compressed: expand one copy to time the stored
            // key's inner product.
            let compressed = keygen.relinearization_key(&secret)?;
            let mut stored = compressed.to_device()?;
            stored.expand()?;
            for (op, key) in [
                ("key_switch", &stored),
                ("key_switch_compressed", &compressed),
            ] {
                if wanted(op) {
                    let t = time(&backend, it, || eval.switch_key(&ct, key))?;
                    timings.push(timing(op, t));
                }
            }
        }
    }
    let policy = policy.map_or_else(|| config.policy.kind().to_string(), str::to_owned);
    Ok(PolicyRun {
        policy,
        timings,
        ntt_gb_per_s,
        copy_gb_per_s,
        device: context.device().to_string(),
    })
}

/// Runs the benchmark.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let (preset, params) = crate::cli::preset_parameters(&args.preset)?;
    let selection = args.device.selection()?;
    if let Some(list) = &args.ops
        && let Some(bad) = list.split(',').map(str::trim).find(|o| !OPS.contains(o))
    {
        anyhow::bail!(
            "unknown op {bad:?} in --ops (expected some of {})",
            OPS.join(",")
        );
    }
    let asked: Vec<&str> = args.policies.split(',').map(str::trim).collect();
    for policy in &asked {
        policy.parse::<PolicyKind>()?;
    }
    // The policies place device memory: on the CPU (asked for, or what
    // `auto` finds without a GPU) one run with the configured policy.
    let on_gpu = match selection {
        DeviceSelection::Cpu => false,
        DeviceSelection::Gpu(_) => true,
        DeviceSelection::Auto => hemem_memory::GpuDevice::count().is_ok_and(|n| n > 0),
    };
    let policies: Vec<Option<&str>> = if on_gpu {
        asked.into_iter().map(Some).collect()
    } else {
        vec![None]
    };
    let mut runs = Vec::new();
    let mut device = String::from("cpu");
    for policy in policies {
        if !args.json {
            eprintln!(
                "hemem bench ckks: {preset} on {}, policy {}",
                if on_gpu {
                    selection.to_string()
                } else {
                    "cpu".into()
                },
                policy.unwrap_or("(configured)")
            );
        }
        let run = run_policy(&params, selection, args, policy)?;
        device.clone_from(&run.device);
        runs.push(run);
    }
    let report = Report {
        preset: preset.name().into(),
        device,
        iterations: args.iterations,
        runs,
    };
    if args.json {
        out!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let baseline: Vec<f64> = report
        .runs
        .first()
        .map(|r| r.timings.iter().map(|t| t.ms).collect())
        .unwrap_or_default();
    out!(
        "  {:<26} {:>10}      {:>10}   {}",
        "op",
        "ms",
        "submit ms",
        "vs first policy"
    );
    for run in &report.runs {
        let ntt = run.ntt_gb_per_s.map_or_else(String::new, |ntt| {
            format!(
                "NTT {ntt:.1} GB/s ({:.0} % of copy), ",
                100.0 * ntt / run.copy_gb_per_s
            )
        });
        out!(
            "policy {:<8}  {ntt}copy {:.1} GB/s",
            run.policy,
            run.copy_gb_per_s
        );
        for (t, base) in run.timings.iter().zip(&baseline) {
            out!(
                "  {:<26} {:>10.4} ms   {:>10.4} ms   x{:.2}",
                t.op,
                t.ms,
                t.submit_ms,
                t.ms / base
            );
        }
    }
    Ok(())
}
