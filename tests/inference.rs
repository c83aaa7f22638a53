//! Encrypted inference against the same network in f64, on the CPU with
//! insecure test presets: ResNet-20's shape scaled down (fewer channels and
//! blocks) with random weights and random images, bootstrapping between
//! blocks, inside a block, and not at all; and the typed errors.
//!
//! Tolerances come from the preset's precision: test-FGb bootstraps to
//! more than 22 bits (`bootstrap/tests/bootstrap.rs`), a fresh encryption
//! keeps about 30. The calibrated network keeps its values below 1 and does
//! not amplify errors much (the activation's slope stays near 1, the
//! pooling averages), so the logits may lose 4 more bits over the few
//! layers here (measured: 29–30 bits either way, as the pooling averages
//! the bootstrap's errors).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

use std::time::Instant;

use hemem::Error;
use hemem::inference::{EncryptedNetwork, Network, NetworkShape, WeightResidency, random_image};
use hemem::prelude::*;

/// Bits test-FGb keeps through a bootstrap, and through encryption alone.
const BOOTSTRAP_BITS: f64 = 22.0;
const FRESH_BITS: f64 = 30.0;
/// Bits the network may lose on top of them.
const NETWORK_LOSS_BITS: f64 = 4.0;

fn context(preset: Preset) -> Context {
    let params = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure).unwrap();
    Context::new(params, DeviceSelection::Cpu).unwrap()
}

struct Run {
    encrypted: EncryptedNetwork,
    max_error: f64,
    magnitude: f64,
}

/// Generates keys for `shape` on `preset`, runs one random image through
/// the encrypted network and returns the largest logit error against f64.
fn run(preset: Preset, shape: NetworkShape, seed: u64) -> Run {
    let context = context(preset);
    let network = Network::random(&shape, seed).unwrap();
    let keygen = KeyGenerator::new(&context).unwrap();
    let secret = keygen.secret_key().unwrap();
    let public = keygen.public_key(&secret).unwrap();
    let t = Instant::now();
    let encrypted = EncryptedNetwork::generate(&context, &network, &keygen, &secret).unwrap();
    let setup = t.elapsed().as_secs_f64();
    let image = random_image(&shape, seed + 1).unwrap();
    let input = encrypted.encrypt(&image, &public).unwrap();
    let t = Instant::now();
    let output = encrypted.infer(&input).unwrap();
    let infer = t.elapsed().as_secs_f64();
    let got = encrypted.decrypt_logits(&output, &secret).unwrap();
    let expected = network.infer_plain(&image).unwrap();
    assert_eq!(got.len(), shape.classes);
    let max_error = got
        .iter()
        .zip(&expected)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    let magnitude = expected.iter().map(|v| v.abs()).fold(0.0, f64::max);
    let peak = network.peak_activation_input(&image).unwrap();
    assert!(peak < 0.9, "activations stay inside [-1, 1]: {peak}");
    println!(
        "{preset}: {shape:?}\n  {} keys, {} bootstrap calls, setup {setup:.2} s, \
         inference {infer:.2} s, max error 2^{:.1} (logits up to {magnitude:.3}, activations up to {peak:.3})",
        encrypted.key_count(),
        encrypted.plan().bootstrap_calls,
        max_error.log2()
    );
    Run {
        encrypted,
        max_error,
        magnitude,
    }
}

#[test]
fn resnet_shaped_network_bootstraps_between_blocks() {
    // ResNet-20's three stages (32×32 → 16×16 → 8×8), one block each, two
    // channels (all test-FGb's 2048 slots hold).
    let shape = NetworkShape {
        blocks_per_stage: 1,
        ..NetworkShape::resnet20_for_slots(1 << 11)
    };
    assert_eq!(shape.channels, 2);
    let r = run(Preset::TestFGb, shape, 11);
    let plan = r.encrypted.plan();
    assert_eq!(plan.bootstrap_calls, 2, "{plan:?}");
    assert!(r.magnitude > 0.01, "logits are not trivially small");
    approx::assert_abs_diff_eq!(
        r.max_error,
        0.0,
        epsilon = 2f64.powf(NETWORK_LOSS_BITS - BOOTSTRAP_BITS)
    );
}

#[test]
fn a_block_deeper_than_a_bootstrap_bootstraps_inside_it() {
    // A degree-14 activation takes 4 levels: a block needs 10, test-FGb
    // gives 9 between bootstraps, so the block's main path and shortcut
    // are bootstrapped together halfway.
    let shape = NetworkShape {
        image_size: 28,
        stages: 2,
        blocks_per_stage: 1,
        classes: 4,
        activation_degree: 14,
        ..NetworkShape::resnet20(2)
    };
    let r = run(Preset::TestFGb, shape, 21);
    let plan = r.encrypted.plan();
    assert!(
        plan.bootstrap_inputs.len() > plan.bootstrap_calls,
        "a batch of two: {plan:?}"
    );
    approx::assert_abs_diff_eq!(
        r.max_error,
        0.0,
        epsilon = 2f64.powf(NETWORK_LOSS_BITS - BOOTSTRAP_BITS)
    );
}

/// One stage of one block with degree-1 activations: 7 levels in all.
fn shallow() -> NetworkShape {
    NetworkShape {
        stages: 1,
        blocks_per_stage: 1,
        classes: 1,
        activation_degree: 1,
        ..NetworkShape::resnet20(2)
    }
}

#[test]
fn a_shallow_network_needs_no_bootstrapping() {
    // Degree-1 activations: stem 2 levels, the block 4, FC 1: 7 of the 9.
    let shape = shallow();
    let r = run(Preset::TestFGb, shape, 31);
    assert_eq!(r.encrypted.plan().bootstrap_calls, 0);
    approx::assert_abs_diff_eq!(
        r.max_error,
        0.0,
        epsilon = 2f64.powf(NETWORK_LOSS_BITS - FRESH_BITS)
    );
}

/// Both polynomials of a ciphertext as words, with its level and scale.
fn words(ct: &Ciphertext) -> (Vec<u64>, Vec<u64>, Level, f64) {
    let (c0, c1) = ct.parts();
    (
        c0.to_words().unwrap(),
        c1.to_words().unwrap(),
        ct.level(),
        ct.scale().get(),
    )
}

/// The hand-written swap (`manual-swap` in the sweep) changes where the
/// weights wait, never the arithmetic: the same network, moved to host
/// residency and back, gives the same output ciphertext word for word,
/// through its bootstraps, and that output decrypts to the f64 logits.
#[test]
fn swapped_weights_give_bit_identical_outputs() {
    let shape = NetworkShape {
        blocks_per_stage: 1,
        ..NetworkShape::resnet20_for_slots(1 << 11)
    };
    let context = context(Preset::TestFGb);
    let network = Network::random(&shape, 41).unwrap();
    let keygen = KeyGenerator::new(&context).unwrap();
    let secret = keygen.secret_key().unwrap();
    let public = keygen.public_key(&secret).unwrap();
    let resident = EncryptedNetwork::generate(&context, &network, &keygen, &secret).unwrap();
    assert_eq!(resident.residency(), WeightResidency::Resident);
    assert!(resident.plan().bootstrap_calls > 0);
    let (weights, largest) = (resident.weight_bytes(), resident.largest_layer_bytes());
    assert!(largest > 0 && largest < weights, "{largest} of {weights}");
    let image = random_image(&shape, 42).unwrap();
    let input = resident.encrypt(&image, &public).unwrap();
    let plain = words(&resident.infer(&input).unwrap());

    let swapped = resident.with_residency(WeightResidency::Swapped).unwrap();
    assert_eq!(swapped.residency(), WeightResidency::Swapped);
    assert_eq!(swapped.weight_bytes(), weights);
    let output = swapped.infer(&input).unwrap();
    let out = words(&output);
    assert!(out.0.iter().any(|&w| w != 0), "a non-zero output");
    assert_eq!(out, plain, "swapping the weights changed the output");
    let got = swapped.decrypt_logits(&output, &secret).unwrap();
    let expected = network.infer_plain(&image).unwrap();
    let max_error = got
        .iter()
        .zip(&expected)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    approx::assert_abs_diff_eq!(
        max_error,
        0.0,
        epsilon = 2f64.powf(NETWORK_LOSS_BITS - BOOTSTRAP_BITS)
    );

    let back = swapped.with_residency(WeightResidency::Resident).unwrap();
    assert_eq!(back.residency(), WeightResidency::Resident);
    assert_eq!(words(&back.infer(&input).unwrap()), plain);
}

/// A network generated straight into swapped residency (what the sweep's
/// `manual-swap` cell builds: each layer's diagonals leave the device as
/// soon as they are encoded) computes the f64 network's logits.
#[test]
fn a_network_generated_swapped_matches_f64() {
    let shape = shallow();
    let context = context(Preset::TestFGb);
    let network = Network::random(&shape, 51).unwrap();
    let keygen = KeyGenerator::new(&context).unwrap();
    let secret = keygen.secret_key().unwrap();
    let public = keygen.public_key(&secret).unwrap();
    let encrypted = EncryptedNetwork::generate_with_residency(
        &context,
        &network,
        &keygen,
        &secret,
        hemem::bootstrap::linear_transform::DiagonalStorage::Compact,
        WeightResidency::Swapped,
    )
    .unwrap();
    assert_eq!(encrypted.residency(), WeightResidency::Swapped);
    let image = random_image(&shape, 52).unwrap();
    let output = encrypted
        .infer(&encrypted.encrypt(&image, &public).unwrap())
        .unwrap();
    let got = encrypted.decrypt_logits(&output, &secret).unwrap();
    let expected = network.infer_plain(&image).unwrap();
    assert!(expected.iter().any(|v| v.abs() > 1e-3), "{expected:?}");
    let max_error = got
        .iter()
        .zip(&expected)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    approx::assert_abs_diff_eq!(
        max_error,
        0.0,
        epsilon = 2f64.powf(NETWORK_LOSS_BITS - FRESH_BITS)
    );
}

#[test]
fn bad_inputs_are_typed_errors() {
    let context = context(Preset::TestFGb);
    let keygen = KeyGenerator::new(&context).unwrap();
    let secret = keygen.secret_key().unwrap();
    let public = keygen.public_key(&secret).unwrap();

    // Weights outside the layers are None, not a panic.
    let small = Network::random(&NetworkShape::resnet20(1), 2).unwrap();
    let classes = NetworkShape::resnet20(1).classes;
    assert!(small.fc_weight(0, 0).is_some());
    assert_eq!(small.fc_weight(classes, 0), None);
    assert_eq!(small.fc_weight(100, 100), None);
    assert!(small.stem().weight(0, 0, 1, -1).is_some());
    assert_eq!(small.stem().weight(0, 0, 2, 0), None);
    assert_eq!(small.stem().weight(usize::MAX, 0, 0, 0), None);

    // Shapes whose sizes would overflow are refused, not wrapped.
    let base = NetworkShape::resnet20(1);
    for shape in [
        NetworkShape { stages: 65, ..base },
        NetworkShape {
            image_size: 1 << 16,
            channels: 1 << 32,
            ..base
        },
        NetworkShape {
            activation_degree: 1 << 40,
            ..base
        },
    ] {
        assert!(
            matches!(shape.validate(), Err(Error::InvalidNetwork { .. })),
            "{shape:?}"
        );
    }
    assert!(base.validate().is_ok());

    // Too many channels for the slots.
    let wide = Network::random(&NetworkShape::resnet20(4), 1).unwrap();
    assert!(matches!(
        EncryptedNetwork::generate(&context, &wide, &keygen, &secret),
        Err(Error::InvalidNetwork { .. })
    ));

    // test-FTb gives one level between bootstraps; the stem needs three.
    let ftb = self::context(Preset::TestFTb);
    let ftb_keygen = KeyGenerator::new(&ftb).unwrap();
    let ftb_secret = ftb_keygen.secret_key().unwrap();
    let net = Network::random(&NetworkShape::resnet20(1), 1).unwrap();
    assert!(matches!(
        EncryptedNetwork::generate(&ftb, &net, &ftb_keygen, &ftb_secret),
        Err(Error::NotEnoughLevels {
            layer: "stem",
            needed: 3,
            available: 1
        })
    ));

    // A shallow network, then a wrong image and a wrong input.
    let shape = shallow();
    let network = Network::random(&shape, 2).unwrap();
    let encrypted = EncryptedNetwork::generate(&context, &network, &keygen, &secret).unwrap();
    assert!(matches!(
        encrypted.encrypt(&[0.5; 28 * 28], &public),
        Err(Error::ImageSize {
            expected: 1024,
            actual: 784
        })
    ));
    let mut image = random_image(&shape, 3).unwrap();
    image[7] = 1.5;
    assert!(matches!(
        encrypted.encrypt(&image, &public),
        Err(Error::ImagePixel { index: 7 })
    ));
    let input = encrypted
        .encrypt(&random_image(&shape, 3).unwrap(), &public)
        .unwrap();
    let lower = Evaluator::new(&context)
        .level_down(&input, Level(5))
        .unwrap();
    assert!(matches!(
        encrypted.infer(&lower),
        Err(Error::InputShape { .. })
    ));
}
