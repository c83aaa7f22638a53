//! Bootstrapping a batch across several devices ([`MultiBootstrapper`]) on
//! the CPU, with CPU contexts as logical devices: outputs bit-identical to
//! one device's [`Bootstrapper::bootstrap_many`] on the same random inputs,
//! in input order, for batches smaller than the group, not divisible by
//! it, spread evenly or by work stealing; keys loaded from one serialized
//! copy or kept by their own context; failures naming the device and its
//! inputs. `gpu_two_logical_devices_match_one` does the same with two
//! contexts on GPU 0 (skipping without a GPU; `HEMEM_REQUIRE_GPU=1` makes
//! that a failure).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

use std::sync::Mutex;

use hemem_bootstrap::multi_device::{MultiBootstrapper, Split};
use hemem_bootstrap::schedule::BootstrapSchedule;
use hemem_bootstrap::{BootstrapKeys, BootstrapOptions, Bootstrapper, DeviceFailure, Error};
use hemem_ckks::prelude::*;
use hemem_ckks::testing::{seed32, seeded_rng, unit_disk};
use hemem_memory::testing::gpu_or_skip;
use num_complex::Complex64;

const PRESET: Preset = Preset::TestFGb;
const SLOTS: usize = 1 << 4;

type Words = (Vec<u64>, Vec<u64>);

fn params() -> Parameters {
    Parameters::from_preset_with(PRESET, SecurityCheck::AllowInsecure).unwrap()
}

fn words(ct: &Ciphertext) -> Words {
    (
        ct.parts().0.to_words().unwrap(),
        ct.parts().1.to_words().unwrap(),
    )
}

/// A home context with a secret, public key, the bootstrapping keys (also
/// serialized), a single-device reference bootstrapper and random inputs at
/// level 3 (from two levels, so two input scales).
struct Home {
    context: Context,
    secret: SecretKey,
    schedule: BootstrapSchedule,
    key_bytes: Vec<u8>,
    reference: Bootstrapper,
    values: Vec<Vec<Complex64>>,
    inputs: Vec<Ciphertext>,
}

fn home(device: DeviceSelection, count: usize) -> Home {
    let params = params();
    let context = Context::with_memory(params.clone(), device, &MemoryConfig::default()).unwrap();
    let keygen = KeyGenerator::with_seed(&context, seed32(31));
    let secret = keygen.secret_key().unwrap();
    let public = keygen.public_key(&secret).unwrap();
    let schedule = BootstrapSchedule::recommended_for_slots(&params, SLOTS).unwrap();
    let keys = BootstrapKeys::generate(&keygen, &secret, &schedule).unwrap();
    let mut key_bytes = Vec::new();
    keys.save(&mut key_bytes).unwrap();
    let reference = Bootstrapper::new(&context, schedule.clone(), keys).unwrap();
    let encoder = Encoder::new(&context);
    let eval = Evaluator::new(&context);
    let values: Vec<Vec<Complex64>> = (0..count)
        .map(|i| unit_disk(&mut seeded_rng(500 + i as u64), SLOTS))
        .collect();
    let inputs = values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let from = if i % 3 == 1 {
                params.enc_level()
            } else {
                Level(3)
            };
            let pt = encoder
                .encode_at(v, from, params.default_scale(from).unwrap(), SLOTS)
                .unwrap();
            let ct = Encryptor::with_seed(&context, seed32(600 + i as u64))
                .encrypt(&pt, &public)
                .unwrap();
            eval.level_down(&ct, Level(3)).unwrap()
        })
        .collect();
    Home {
        context,
        secret,
        schedule,
        key_bytes,
        reference,
        values,
        inputs,
    }
}

fn cpu_contexts(n: usize) -> Vec<Context> {
    (0..n)
        .map(|_| Context::new(params(), DeviceSelection::Cpu).unwrap())
        .collect()
}

/// The group's outputs for the first `len` inputs against the reference's
/// (computed once for all inputs): the same limbs, in order, each in the
/// home context.
fn check_against(h: &Home, reference: &[Words], group: &MultiBootstrapper, len: usize, real: bool) {
    let inputs = &h.inputs[..len];
    let out = if real {
        group.bootstrap_real_many(inputs).unwrap()
    } else {
        group.bootstrap_many(inputs).unwrap()
    };
    assert_eq!(out.len(), len);
    for (i, o) in out.iter().enumerate() {
        assert!(o.context().ptr_eq(&h.context), "output {i} is back home");
        assert!(
            words(o) == reference[i],
            "output {i} of {len} differs from one device's ({:?}, real {real})",
            group.split()
        );
    }
}

#[test]
fn a_group_bootstraps_like_one_device() {
    let h = home(DeviceSelection::Cpu, 7);
    let reference: Vec<Words> = h
        .reference
        .bootstrap_many(&h.inputs)
        .unwrap()
        .iter()
        .map(words)
        .collect();
    // Independent of the bootstrapper: the reference decrypts to the inputs.
    let first = h.reference.bootstrap(&h.inputs[0]).unwrap();
    let decoded = Encoder::new(&h.context)
        .decode(
            &Decryptor::new(&h.context)
                .decrypt(&first, &h.secret)
                .unwrap(),
        )
        .unwrap();
    let err = decoded
        .iter()
        .zip(&h.values[0])
        .map(|(a, b)| (a - b).norm())
        .fold(0.0, f64::max);
    assert!(
        -err.log2() > 20.0,
        "reference precision {:.2} bits",
        -err.log2()
    );
    assert!(words(&first) == reference[0]);

    // Three CPU devices, keys from one serialized copy.
    let group = MultiBootstrapper::from_key_bytes(
        cpu_contexts(3),
        h.schedule.clone(),
        &h.key_bytes,
        BootstrapOptions::default(),
    )
    .unwrap();
    assert_eq!(group.devices(), vec![Device::Cpu; 3]);
    assert!(group.bootstrap_many(&[]).unwrap().is_empty());
    // Fewer inputs than devices, not divisible, divisible, the whole batch.
    for len in [1, 2, 5, 6, 7] {
        check_against(&h, &reference, &group, len, false);
    }
    // Even shares: 1 + 2 + 5 + 6 + 7 = 21 inputs, spread 7 each way? No:
    // 1 → [1,0,0]; 2 → [1,1,0]; 5 → [2,2,1]; 6 → [2,2,2]; 7 → [3,2,2].
    assert_eq!(group.bootstrapped_counts(), vec![9, 7, 5]);

    let group = group.with_split(Split::Stealing { chunk: 2 }).unwrap();
    for len in [3, 7] {
        check_against(&h, &reference, &group, len, false);
    }
    assert_eq!(group.bootstrapped_counts().iter().sum::<u64>(), 21 + 10);

    // Real slot values, against the reference's own real bootstraps.
    let real: Vec<Words> = h
        .reference
        .bootstrap_real_many(&h.inputs[..4])
        .unwrap()
        .iter()
        .map(words)
        .collect();
    check_against(&h, &real, &group, 4, true);

    // Progress: (0, n) first, increasing, ending at n.
    let seen = Mutex::new(Vec::new());
    let record = |done: u64, total: u64| seen.lock().unwrap().push((done, total));
    let group = group.with_split(Split::Even).unwrap();
    group
        .bootstrap_many_with_progress(&h.inputs[..5], false, &record)
        .unwrap();
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen.first(), Some(&(0, 5)));
    assert_eq!(seen.last(), Some(&(5, 5)));
    assert!(seen.windows(2).all(|w| w[0].0 < w[1].0), "{seen:?}");
    assert_eq!(seen.len(), 4, "one report per share");
}

/// The keys' own context, when in the group, keeps them (its inputs do not
/// move); the other device loads them; one device alone is the same path.
#[test]
fn the_keys_context_keeps_its_keys_and_one_device_works() {
    let h = home(DeviceSelection::Cpu, 3);
    let reference: Vec<Words> = h
        .reference
        .bootstrap_many(&h.inputs)
        .unwrap()
        .iter()
        .map(words)
        .collect();
    let keys = BootstrapKeys::load(&h.context, h.key_bytes.as_slice()).unwrap();
    assert!(keys.context().unwrap().ptr_eq(&h.context));
    let mut contexts = vec![h.context.clone()];
    contexts.extend(cpu_contexts(1));
    let group = MultiBootstrapper::new(
        contexts,
        h.schedule.clone(),
        keys,
        BootstrapOptions::default(),
    )
    .unwrap();
    assert!(group.context(0).unwrap().ptr_eq(&h.context));
    check_against(&h, &reference, &group, 3, false);
    assert_eq!(group.bootstrapped_counts(), vec![2, 1]);

    // One device, keys made elsewhere (serialized once, loaded there).
    let keys = BootstrapKeys::load(&h.context, h.key_bytes.as_slice()).unwrap();
    let one = MultiBootstrapper::new(
        cpu_contexts(1),
        h.schedule.clone(),
        keys,
        BootstrapOptions::default(),
    )
    .unwrap();
    assert_eq!(one.len(), 1);
    check_against(&h, &reference, &one, 3, false);

    // A key file streamed by each device.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bootstrap.keys");
    std::fs::write(&path, &h.key_bytes).unwrap();
    let from_file = MultiBootstrapper::from_key_file(
        cpu_contexts(2),
        h.schedule.clone(),
        &path,
        BootstrapOptions::default(),
    )
    .unwrap();
    check_against(&h, &reference, &from_file, 3, false);
}

/// A device that fails reports itself and the inputs it held, each failing
/// device separately; bad groups are refused when built.
#[test]
fn failures_name_the_device_and_its_inputs() {
    let h = home(DeviceSelection::Cpu, 6);
    let group = MultiBootstrapper::from_key_bytes(
        cpu_contexts(3),
        h.schedule.clone(),
        &h.key_bytes,
        BootstrapOptions::default(),
    )
    .unwrap();
    let eval = Evaluator::new(&h.context);
    let low = |i: usize| eval.level_down(&h.inputs[i], Level(2)).unwrap();
    let copy = |i: usize| {
        h.inputs[i]
            .clone_as(hemem_memory::MemoryClass::Ciphertext)
            .unwrap()
    };
    // Input 4 below level 3: device 2 (inputs 4..6) fails.
    let batch: Vec<Ciphertext> = (0..6)
        .map(|i| if i == 4 { low(i) } else { copy(i) })
        .collect();
    let err = group.bootstrap_many(&batch).unwrap_err();
    let Error::DeviceFailures { failures } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(
        failures,
        &vec![DeviceFailure {
            index: 2,
            device: Device::Cpu,
            inputs: 4..6,
            error: Box::new(Error::LevelTooLow {
                operation: "bootstrap",
                needed: 3,
                level: 2
            }),
        }]
    );
    assert!(
        err.to_string().contains("device 2 (cpu), inputs 4..6"),
        "{err}"
    );
    // Inputs 0 and 5 low: devices 0 and 2 both reported.
    let batch: Vec<Ciphertext> = (0..6)
        .map(|i| if i == 0 || i == 5 { low(i) } else { copy(i) })
        .collect();
    let Err(Error::DeviceFailures { failures }) = group.bootstrap_many(&batch) else {
        panic!("two devices should fail")
    };
    let named: Vec<_> = failures
        .iter()
        .map(|f| (f.index, f.inputs.clone()))
        .collect();
    assert_eq!(named, vec![(0, 0..2), (2, 4..6)]);
    // Work stealing by ones: the failing chunk is exactly the bad input.
    let group = group.with_split(Split::Stealing { chunk: 1 }).unwrap();
    let batch: Vec<Ciphertext> = (0..4)
        .map(|i| if i == 3 { low(i) } else { copy(i) })
        .collect();
    let Err(Error::DeviceFailures { failures }) = group.bootstrap_many(&batch) else {
        panic!("a device should fail")
    };
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0].inputs, 3..4);
    assert!(matches!(
        *failures[0].error,
        Error::LevelTooLow { level: 2, .. }
    ));

    // Refused when built: no context, mixed parameters, a chunk of 0,
    // foreign key bytes (each device names itself).
    let no = MultiBootstrapper::from_key_bytes(
        Vec::new(),
        h.schedule.clone(),
        &h.key_bytes,
        BootstrapOptions::default(),
    );
    assert!(matches!(
        no,
        Err(Error::InvalidParameter {
            name: "contexts",
            ..
        })
    ));
    let other =
        Parameters::from_preset_with(Preset::TestFTb, SecurityCheck::AllowInsecure).unwrap();
    let mixed = vec![
        Context::new(params(), DeviceSelection::Cpu).unwrap(),
        Context::new(other, DeviceSelection::Cpu).unwrap(),
    ];
    assert!(matches!(
        MultiBootstrapper::from_key_bytes(
            mixed,
            h.schedule.clone(),
            &h.key_bytes,
            BootstrapOptions::default()
        ),
        Err(Error::InvalidParameter {
            name: "contexts",
            ..
        })
    ));
    assert!(group.with_split(Split::Stealing { chunk: 0 }).is_err());
    let truncated = &h.key_bytes[..h.key_bytes.len() / 2];
    let Err(Error::DeviceFailures { failures }) = MultiBootstrapper::from_key_bytes(
        cpu_contexts(2),
        h.schedule.clone(),
        truncated,
        BootstrapOptions::default(),
    ) else {
        panic!("truncated keys should fail on every device")
    };
    let named: Vec<_> = failures
        .iter()
        .map(|f| (f.index, f.inputs.clone()))
        .collect();
    assert_eq!(named, vec![(0, 0..0), (1, 0..0)]);
    assert!(failures.iter().all(|f| matches!(*f.error, Error::Ckks(_))));
}

/// Two logical devices on GPU 0 (two contexts, two memory systems) give the
/// limbs one GPU context gives, inputs and outputs in a third (home) GPU
/// context, with even shares and work stealing; one of the two devices
/// under a budget.
#[test]
fn gpu_two_logical_devices_match_one() {
    let Some(_gpu) = gpu_or_skip("gpu_two_logical_devices_match_one") else {
        return;
    };
    let h = home(DeviceSelection::Gpu(0), 5);
    let reference: Vec<Words> = h
        .reference
        .bootstrap_many(&h.inputs)
        .unwrap()
        .iter()
        .map(words)
        .collect();
    let budgeted = MemoryConfig {
        budget: hemem_memory::BudgetSetting::Bytes(1 << 30),
        ..MemoryConfig::default()
    };
    let contexts = vec![
        Context::with_memory(params(), DeviceSelection::Gpu(0), &MemoryConfig::default()).unwrap(),
        Context::with_memory(params(), DeviceSelection::Gpu(0), &budgeted).unwrap(),
    ];
    let group = MultiBootstrapper::from_key_bytes(
        contexts,
        h.schedule.clone(),
        &h.key_bytes,
        BootstrapOptions::default(),
    )
    .unwrap();
    assert_eq!(group.devices(), vec![Device::Gpu(0); 2]);
    for len in [1, 5] {
        check_against(&h, &reference, &group, len, false);
    }
    let group = group.with_split(Split::Stealing { chunk: 2 }).unwrap();
    check_against(&h, &reference, &group, 5, false);
    assert_eq!(group.bootstrapped_counts().iter().sum::<u64>(), 11);
}
