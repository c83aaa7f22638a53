//! A chain of dependent element-wise launches and its host mirror, for
//! `gpu_dependent_launch.rs`.
//!
//! Each round is `y = x·y` (reads the `y` the previous round wrote),
//! `x = x + y` (reads the `y` just written) and `y = x − y` (overwrites the
//! `y` the previous launch read): a launch that ran early would read or
//! clobber the wrong values. Limb `i` is reduced by `MODULI[i % 3]`.

use hemem_gpu_kernels::launch::ckks::arith::binary_async;
use hemem_gpu_kernels::launch::ckks::{ElementOp, LimbMap, ModConst};
use hemem_gpu_kernels::{Kernels, pattern_word};
use hemem_memory::{
    Allocator, Buffer, DependentLaunch, GpuDevice, MemoryClass, MemoryConfig, PolicyConfig,
    StreamId,
};

/// Moduli below 2^62, as the kernels require (any odd modulus reduces
/// correctly; these are primes).
pub const MODULI: [u64; 3] = [(1 << 61) - 1, (1 << 50) - 27, (1 << 40) - 87];

fn mul_mod(a: u64, b: u64, q: u64) -> u64 {
    ((u128::from(a) * u128::from(b)) % u128::from(q)) as u64
}

fn modulus_of(limb: usize) -> u64 {
    MODULI
        .get(limb % MODULI.len())
        .copied()
        .unwrap_or(MODULI[0])
}

/// Random words of `limbs` limbs of `n`, each below its limb's modulus.
pub fn random(seed: u64, n: usize, limbs: usize) -> Vec<u64> {
    (0..n * limbs)
        .map(|i| pattern_word(seed, i as u64) % modulus_of(i / n))
        .collect()
}

/// `a op b` limb by limb on the host, as `binary_op` computes it.
pub fn host_op(op: ElementOp, a: &[u64], b: &[u64], n: usize) -> Vec<u64> {
    a.iter()
        .zip(b)
        .enumerate()
        .map(|(i, (&a, &b))| {
            let q = modulus_of(i / n);
            match op {
                ElementOp::Mul => mul_mod(a, b, q),
                ElementOp::Add => (a + b) % q,
                ElementOp::Sub => (a + q - b) % q,
            }
        })
        .collect()
}

/// The chain's device state and its host mirror.
pub struct Chain {
    pub kernels: Kernels,
    pub allocator: Allocator,
    pub n: usize,
    pub limbs: usize,
    map: LimbMap,
    consts: Buffer,
    pub xs: Buffer,
    pub ys: Buffer,
    /// The host mirror of `xs` and `ys`.
    pub x: Vec<u64>,
    pub y: Vec<u64>,
    /// Copy-stream operands, kept to the end so that no block is reused
    /// while a kernel may still read it.
    injected: Vec<Buffer>,
}

fn upload(allocator: &Allocator, words: &[u64], stream: StreamId) -> Buffer {
    let mut buffer = allocator
        .allocate_on(MemoryClass::Temporary, words.len() * 8, false, stream)
        .expect("allocation");
    allocator.upload(&mut buffer, 0, words).expect("upload");
    buffer
}

fn address(buffer: &Buffer) -> u64 {
    buffer.device_ptr().expect("device memory").addr()
}

impl Chain {
    /// Loads the kernels in `mode` and uploads random `x`, `y` of `limbs`
    /// limbs of `n` words.
    pub fn new(
        device: &GpuDevice,
        mode: DependentLaunch,
        seed: u64,
        n: usize,
        limbs: usize,
    ) -> Self {
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
        let consts = upload(&allocator, &table, StreamId::Compute);
        let x = random(seed, n, limbs);
        let y = random(seed.wrapping_add(1 << 40), n, limbs);
        let xs = upload(&allocator, &x, StreamId::Compute);
        let ys = upload(&allocator, &y, StreamId::Compute);
        let positions: Vec<usize> = (0..limbs).collect();
        let moduli: Vec<usize> = (0..limbs).map(|i| i % MODULI.len()).collect();
        let map = LimbMap::new(&positions, &moduli).expect("map");
        Self {
            kernels,
            allocator,
            n,
            limbs,
            map,
            consts,
            xs,
            ys,
            x,
            y,
            injected: Vec::new(),
        }
    }

    fn launch(&self, op: ElementOp, out: u64, a: u64, b: u64) {
        let n = u32::try_from(self.n).expect("n fits u32");
        #[allow(unsafe_code, reason = "the raw launcher is what is tested")]
        // SAFETY: every address holds `limbs` limbs of `n` words (the table
        // every modulus of the map); the buffers live in `self`, and the
        // callers synchronise the streams before dropping it.
        unsafe {
            binary_async(
                &self.kernels,
                StreamId::Compute,
                op,
                (out, &self.map),
                (a, &self.map),
                (b, &self.map),
                address(&self.consts),
                n,
            )
        }
        .expect("launch");
    }

    /// One round: three launches, each depending on the one before.
    pub fn round(&mut self) {
        let (xa, ya) = (address(&self.xs), address(&self.ys));
        self.launch(ElementOp::Mul, ya, xa, ya);
        self.y = host_op(ElementOp::Mul, &self.x, &self.y, self.n);
        self.launch(ElementOp::Add, xa, xa, ya);
        self.x = host_op(ElementOp::Add, &self.x, &self.y, self.n);
        self.launch(ElementOp::Sub, ya, xa, ya);
        self.y = host_op(ElementOp::Sub, &self.x, &self.y, self.n);
    }

    /// `y = z + y` for a random `z` uploaded on the copy stream and handed
    /// to the compute stream through an event (as the planned policy's
    /// fetches are).
    pub fn inject(&mut self, seed: u64) {
        let z = random(seed, self.n, self.limbs);
        let mut zs = upload(&self.allocator, &z, StreamId::Copy);
        self.allocator
            .hand_over(&mut zs, StreamId::Compute)
            .expect("event");
        let ya = address(&self.ys);
        self.launch(ElementOp::Add, ya, address(&zs), ya);
        self.y = host_op(ElementOp::Add, &z, &self.y, self.n);
        self.injected.push(zs);
    }

    /// The device's `x` (the download waits for the compute stream).
    pub fn device_x(&self) -> Vec<u64> {
        self.download(&self.xs)
    }

    /// The device's `y`.
    pub fn device_y(&self) -> Vec<u64> {
        self.download(&self.ys)
    }

    fn download(&self, buffer: &Buffer) -> Vec<u64> {
        let mut words = vec![0; self.n * self.limbs];
        self.allocator
            .download(buffer, 0, &mut words)
            .expect("download");
        words
    }
}
