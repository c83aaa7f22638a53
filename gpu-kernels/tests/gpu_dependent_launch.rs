//! Programmatic dependent launch keeps the stream's order (GPU only;
//! skipped without one).
//!
//! With [`DependentLaunch`] on, a kernel's blocks may be scheduled while the
//! kernel before it still runs, and only the `griddepcontrol.wait` each CKKS
//! kernel starts with keeps it from reading what that kernel has not written
//! yet, or overwriting what it still reads. A long chain of element-wise
//! launches in which every launch reads the previous one's output, and
//! overwrites an operand the previous one read, gives a different result as
//! soon as one launch runs early; the host's modular arithmetic is the
//! reference. Small grids (many kernels in flight) and large ones (several
//! waves) are both run, with the mode on (where the card has it), off, and
//! `auto`.
#![expect(clippy::expect_used, reason = "test helpers outside #[test] functions")]

use std::time::{SystemTime, UNIX_EPOCH};

use hemem_gpu_kernels::launch::ckks::arith::binary_async;
use hemem_gpu_kernels::launch::ckks::{ElementOp, LimbMap, ModConst};
use hemem_gpu_kernels::{Kernels, pattern_word};
use hemem_memory::testing::gpu_or_skip;
use hemem_memory::{
    Allocator, Buffer, DependentLaunch, GpuDevice, MemoryClass, MemoryConfig, PolicyConfig,
    StreamId,
};

/// Moduli below 2^62, as the kernels require (any odd modulus reduces
/// correctly; these are primes).
const MODULI: [u64; 3] = [(1 << 61) - 1, (1 << 50) - 27, (1 << 40) - 87];

/// Rounds of three dependent launches each.
const ROUNDS: usize = 200;

fn mul_mod(a: u64, b: u64, q: u64) -> u64 {
    ((u128::from(a) * u128::from(b)) % u128::from(q)) as u64
}

/// Limb `i` of a polynomial in the test's buffers is reduced by
/// `MODULI[i % 3]`.
fn modulus_of(limb: usize) -> u64 {
    MODULI
        .get(limb % MODULI.len())
        .copied()
        .unwrap_or(MODULI[0])
}

/// The chain on the host: `y = x·y`, `x = x + y`, `y = y − x`, `ROUNDS`
/// times, limb by limb.
fn host_chain(mut x: Vec<u64>, mut y: Vec<u64>, n: usize) -> (Vec<u64>, Vec<u64>) {
    for _ in 0..ROUNDS {
        for (i, (xv, yv)) in x.iter_mut().zip(y.iter_mut()).enumerate() {
            let q = modulus_of(i / n);
            *yv = mul_mod(*xv, *yv, q);
            *xv = (*xv + *yv) % q;
            *yv = (*yv + q - *xv) % q;
        }
    }
    (x, y)
}

fn upload(allocator: &Allocator, words: &[u64]) -> Buffer {
    let mut buffer = allocator
        .allocate(MemoryClass::Temporary, words.len() * 8)
        .expect("allocation");
    allocator.upload(&mut buffer, 0, words).expect("upload");
    buffer
}

fn address(buffer: &Buffer) -> u64 {
    buffer.device_ptr().expect("device memory").addr()
}

/// The same chain on the GPU, every launch on the compute stream.
fn device_chain(
    device: &GpuDevice,
    mode: DependentLaunch,
    (x, y): (&[u64], &[u64]),
    n: usize,
    limbs: usize,
) -> (bool, Vec<u64>, Vec<u64>) {
    let kernels = Kernels::load(device, mode).expect("PTX loads");
    let config = MemoryConfig {
        policy: PolicyConfig::Device,
        ..MemoryConfig::default()
    };
    let allocator = Allocator::gpu(device, &config).expect("allocator");
    let table: Vec<u64> = MODULI
        .iter()
        .flat_map(|&q| {
            let c = ModConst::new(q);
            [c.q, c.mu, c.ratio_lo, c.ratio_hi, u64::from(c.bits)]
        })
        .collect();
    let consts = upload(&allocator, &table);
    let xs = upload(&allocator, x);
    let ys = upload(&allocator, y);
    let positions: Vec<usize> = (0..limbs).collect();
    let moduli: Vec<usize> = (0..limbs).map(|i| i % MODULI.len()).collect();
    let map = LimbMap::new(&positions, &moduli).expect("map");
    let (xa, ya, ca) = (address(&xs), address(&ys), address(&consts));
    let width = u32::try_from(n).expect("n fits u32");
    for _ in 0..ROUNDS {
        for (op, out, a, b) in [
            (ElementOp::Mul, ya, xa, ya),
            (ElementOp::Add, xa, xa, ya),
            (ElementOp::Sub, ya, ya, xa),
        ] {
            #[allow(unsafe_code, reason = "the raw launcher is what is tested")]
            // SAFETY: both buffers hold `limbs` limbs of `n` words and the
            // table every modulus of the map; all three live, on the compute
            // stream, until the downloads below have waited for it.
            unsafe {
                binary_async(
                    &kernels,
                    StreamId::Compute,
                    op,
                    (out, &map),
                    (a, &map),
                    (b, &map),
                    ca,
                    width,
                )
            }
            .expect("launch");
        }
    }
    let mut xo = vec![0; x.len()];
    let mut yo = vec![0; y.len()];
    allocator.download(&xs, 0, &mut xo).expect("download");
    allocator.download(&ys, 0, &mut yo).expect("download");
    device.synchronize(StreamId::Compute).expect("sync");
    assert_eq!(device.take_deferred_error(), None);
    (kernels.dependent_launch(), xo, yo)
}

fn chain_matches_host(name: &str, n: usize, limbs: usize) {
    let Some(device) = gpu_or_skip(name) else {
        return;
    };
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    let words = n * limbs;
    let random = |offset: u64| -> Vec<u64> {
        (0..words)
            .map(|i| pattern_word(seed.wrapping_add(offset), i as u64) % modulus_of(i / n))
            .collect()
    };
    let (x, y) = (random(0), random(1 << 40));
    let expected = host_chain(x.clone(), y.clone(), n);
    let supported = device.info().compute_capability >= DependentLaunch::MIN_CAPABILITY;
    let mut modes = vec![DependentLaunch::Off, DependentLaunch::Auto];
    if supported {
        modes.push(DependentLaunch::On);
    }
    for mode in modes {
        let (dependent, xo, yo) = device_chain(&device, mode, (&x, &y), n, limbs);
        assert_eq!(
            dependent,
            mode != DependentLaunch::Off && supported,
            "{name}: {mode}"
        );
        assert!(
            xo == expected.0 && yo == expected.1,
            "{name}: {mode} (dependent launch {dependent}), seed {seed}: the chain differs from the host's"
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
