//! Encrypted CNN inference, end to end: a network of ResNet-20's shape
//! (3 stages of residual blocks on a 32×32 single-channel image, polynomial
//! ReLU, average pooling, a fully-connected layer) with **random weights**,
//! run on a CKKS-encrypted random image and checked against the same
//! network in f64.
//!
//! ```sh
//! cargo run --release --example cnn_inference                       # test-FGb on the CPU (insecure, seconds)
//! cargo run --release --example cnn_inference -- --preset FGb --device gpu --budget 2GiB --policy planned
//! # The hand-written swap of the weights (the sweep's manual-swap), under device:
//! cargo run --release --example cnn_inference -- --preset FGb --device gpu --budget 4GiB --policy device --manual-swap
//! ```
//!
//! The steps a program of its own would copy: build a context (device and
//! memory policy, an optional device budget), make a secret and public key,
//! let [`EncryptedNetwork::generate`] plan the levels and make the keys the
//! network needs (its rotations, relinearisation and, where levels run
//! out, bootstrapping's), encrypt, infer, decrypt.

use std::error::Error;
use std::time::Instant;

use clap::Parser;
use hemem::inference::{EncryptedNetwork, Network, NetworkShape, WeightResidency, random_image};
use hemem::memory::{BudgetSetting, ByteSize, MemoryConfig, PolicyConfig, PolicyKind};
use hemem::prelude::*;

/// Encrypted inference of a ResNet-20-shaped CNN with random weights.
#[derive(Debug, Parser)]
struct Args {
    /// Parameter preset (test-* presets are insecure, for trying it out).
    #[arg(long, default_value = "test-FGb")]
    preset: Preset,
    /// cpu, gpu, gpu:N or auto.
    #[arg(long, default_value = "cpu")]
    device: DeviceSelection,
    /// Device budget (2GiB, 6GiB, …): emulates a smaller card (GPU only).
    #[arg(long)]
    budget: Option<ByteSize>,
    /// Memory policy: planned, device, managed, static or dynamic.
    #[arg(long, default_value = "planned")]
    policy: PolicyKind,
    /// Channels per convolution (default: as many as the slots hold, at
    /// most 16 — ResNet-20's first stage).
    #[arg(long)]
    channels: Option<usize>,
    /// Residual blocks per stage (ResNet-20: 3).
    #[arg(long, default_value_t = 3)]
    blocks: usize,
    /// Seed of the random weights (the image's is the next one).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Keep the weights in host memory and copy each layer's to the device
    /// just before it runs (a hand-written swap; best with --policy device).
    #[arg(long)]
    manual_swap: bool,
}

fn main() -> Result<(), Box<dyn Error>> {
    let args = Args::parse();

    // The context: parameters, device, memory policy and budget.
    let check = if args.preset.is_test() {
        SecurityCheck::AllowInsecure
    } else {
        SecurityCheck::Enforce
    };
    let params = Parameters::from_preset_with(args.preset, check)?;
    let mut memory = MemoryConfig::from_env()?;
    memory.policy = PolicyConfig::from_kind(args.policy, None)?;
    if let Some(ByteSize(bytes)) = args.budget {
        memory.budget = BudgetSetting::Bytes(bytes);
    }
    let context = Context::with_memory(params, args.device, &memory)?;

    // The network: ResNet-20's shape, random (calibrated) weights.
    let mut shape = NetworkShape::resnet20_for_slots(context.params().slots());
    shape.blocks_per_stage = args.blocks;
    if let Some(channels) = args.channels {
        shape.channels = channels;
    }
    let network = Network::random(&shape, args.seed)?;
    println!(
        "{} on {}, policy {}{}: {}×{} image, {} channels, {} stages × {} blocks, {} classes",
        context.params().name(),
        context.device(),
        args.policy.name(),
        args.budget
            .map_or_else(String::new, |b| format!(", budget {b}")),
        shape.image_size,
        shape.image_size,
        shape.channels,
        shape.stages,
        shape.blocks_per_stage,
        shape.classes
    );

    // Keys and encoded weights.
    let started = Instant::now();
    let keygen = KeyGenerator::new(&context)?;
    let secret = keygen.secret_key()?;
    let public = keygen.public_key(&secret)?;
    let residency = if args.manual_swap {
        WeightResidency::Swapped
    } else {
        WeightResidency::Resident
    };
    let encrypted = EncryptedNetwork::generate_with_residency(
        &context,
        &network,
        &keygen,
        &secret,
        DiagonalStorage::Compact,
        residency,
    )?;
    context.synchronize()?;
    let plan = encrypted.plan();
    println!(
        "setup: {:.2} s; {} keys ({}), weights {} ({residency:?}, largest layer {}); \
         {} bootstraps per inference",
        started.elapsed().as_secs_f64(),
        encrypted.key_count(),
        ByteSize(encrypted.key_bytes() as u64),
        ByteSize(encrypted.weight_bytes() as u64),
        ByteSize(encrypted.largest_layer_bytes() as u64),
        plan.bootstrap_calls
    );

    // Encrypt a random image, infer, decrypt.
    let image = random_image(&shape, args.seed + 1)?;
    let input = encrypted.encrypt(&image, &public)?;
    context.synchronize()?;
    let started = Instant::now();
    let output = encrypted.infer(&input)?;
    context.synchronize()?;
    let seconds = started.elapsed().as_secs_f64();
    let logits = encrypted.decrypt_logits(&output, &secret)?;

    // The same network in f64.
    let expected = network.infer_plain(&image)?;
    let max_error = logits
        .iter()
        .zip(&expected)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    let argmax = |v: &[f64]| {
        v.iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map_or(0, |(i, _)| i)
    };
    println!("logits (encrypted): {logits:.5?}");
    println!("logits (f64):       {expected:.5?}");
    println!(
        "inference: {:.3} s; max error {max_error:.3e} (2^{:.1}); class {} (f64: {})",
        seconds,
        max_error.log2(),
        argmax(&logits),
        argmax(&expected)
    );
    Ok(())
}
