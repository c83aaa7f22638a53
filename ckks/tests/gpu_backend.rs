//! The GPU backend against the CPU backend: every primitive and every
//! evaluator operation must give bit-identical RNS limbs for the same inputs
//! and randomness. Outputs are poisoned before each operation so an
//! unwritten element fails. Tests named `gpu_*` skip (saying so) without a
//! GPU, and fail instead with `HEMEM_REQUIRE_GPU=1`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

use std::sync::Arc;

use hemem_ckks::backend::{Addend, Backend, BinaryOp, Limbs, LimbsMut, NttRows, PeriodicLimbs};
use hemem_ckks::ntt::GaloisElement;
use hemem_ckks::prelude::*;
use hemem_ckks::sampling::{SeedPrf, UniformSeed};
use hemem_ckks::testing::{max_abs_error, random_residues, seed32, seeded_rng, unit_disk};
use hemem_ckks::{Error, Result};
use hemem_memory::MemoryClass;
use hemem_memory::testing::gpu_or_skip;
use num_complex::Complex64;
use rand_core::Rng;

const POISON: u64 = 0xDEAD_BEEF_DEAD_BEEF;

/// A CPU context and a GPU context for the same parameters, or `None`
/// without a GPU.
fn contexts(name: &str, preset: Preset) -> Option<(Context, Context)> {
    let device = gpu_or_skip(name)?;
    drop(device);
    let params = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure).unwrap();
    let cpu = Context::new(params.clone(), DeviceSelection::Cpu).unwrap();
    // The staged GPU runs set HEMEM_* variables (scripts/gpu-planned.sh
    // `with:`): the GPU context follows them.
    let memory = MemoryConfig::from_env().unwrap();
    let gpu = Context::with_memory(params, DeviceSelection::Gpu(0), &memory).unwrap();
    assert_eq!(gpu.device(), Device::Gpu(0));
    Some((cpu, gpu))
}

/// Random residues for `moduli` (global indices).
fn random_words(context: &Context, moduli: &[usize], seed: u64) -> Vec<u64> {
    random_residues(context.params(), moduli, &mut seeded_rng(seed)).unwrap()
}

/// The backend behind an `Arc`, for the views' checked constructors.
fn be(backend: &Arc<dyn Backend>) -> &dyn Backend {
    backend.as_ref()
}

/// The same words in a buffer of `limbs` limbs on each backend.
struct Pair {
    cpu: hemem_memory::Buffer,
    gpu: hemem_memory::Buffer,
}

fn pair(cpu: &Arc<dyn Backend>, gpu: &Arc<dyn Backend>, limbs: usize, words: &[u64]) -> Pair {
    let moduli: Vec<usize> = (0..limbs).collect();
    let mut a = cpu.allocate(MemoryClass::Temporary, limbs, false).unwrap();
    let mut b = gpu.allocate(MemoryClass::Temporary, limbs, false).unwrap();
    cpu.write(LimbsMut::new(be(cpu), &mut a, &moduli).unwrap(), words)
        .unwrap();
    gpu.write(LimbsMut::new(be(gpu), &mut b, &moduli).unwrap(), words)
        .unwrap();
    Pair { cpu: a, gpu: b }
}

fn poisoned(cpu: &Arc<dyn Backend>, gpu: &Arc<dyn Backend>, limbs: usize) -> Pair {
    let n = cpu.degree();
    pair(cpu, gpu, limbs, &vec![POISON; limbs * n])
}

fn download(
    backend: &Arc<dyn Backend>,
    buffer: &hemem_memory::Buffer,
    positions: &[usize],
    moduli: &[usize],
) -> Vec<u64> {
    let mut out = vec![0u64; positions.len() * backend.degree()];
    backend
        .read(Limbs::unchecked(buffer, positions, moduli), &mut out)
        .unwrap();
    out
}

fn assert_same(what: &str, cpu: &[u64], gpu: &[u64], n: usize) {
    assert_eq!(cpu.len(), gpu.len(), "{what}: lengths");
    if let Some(i) = cpu.iter().zip(gpu).position(|(a, b)| a != b) {
        panic!(
            "{what}: first difference at limb {} coefficient {}: cpu {} gpu {}{}",
            i / n,
            i % n,
            cpu[i],
            gpu[i],
            if gpu[i] == POISON { " (unwritten)" } else { "" }
        );
    }
    assert!(!gpu.contains(&POISON), "{what}: poison left");
}

/// Every Backend primitive on random data, GPU against CPU, at one preset.
fn primitives(name: &str, preset: Preset, rows: NttRows) {
    let Some((cpu_ctx, gpu_ctx)) = contexts(name, preset) else {
        return;
    };
    let cpu = Arc::clone(cpu_ctx.host_backend());
    let gpu = Arc::clone(gpu_ctx.backend());
    // Every NTT below (plain, fused conversions, ModDown and rescale
    // epilogues) runs with these rows kernels.
    gpu.set_ntt_rows(rows);
    assert_eq!(gpu.ntt_rows(), Some(rows));
    let params = cpu_ctx.params().clone();
    let n = params.degree().get();
    let level = params.max_level();
    let qp = params.qp_indices(level).expect("a level of the chain");
    let total = qp.len();
    let p_count = params.p_moduli().len();
    let q_count = level.primes();
    let all: Vec<usize> = (0..total).collect();
    let compare = |what: &str, out: &Pair, positions: &[usize], moduli: &[usize]| {
        assert_same(
            what,
            &download(&cpu, &out.cpu, positions, moduli),
            &download(&gpu, &out.gpu, positions, moduli),
            n,
        );
        println!("{name}: {what} bit-identical");
    };

    let a = pair(&cpu, &gpu, total, &random_words(&cpu_ctx, &qp, 1));
    let b = pair(&cpu, &gpu, total, &random_words(&cpu_ctx, &qp, 2));
    fn view<'a>(buffer: &'a hemem_memory::Buffer, all: &'a [usize], qp: &'a [usize]) -> Limbs<'a> {
        Limbs::unchecked(buffer, all, qp)
    }

    // NTT both ways, all limbs (Q and P primes).
    let mut x = pair(&cpu, &gpu, total, &random_words(&cpu_ctx, &qp, 3));
    cpu.ntt_forward(LimbsMut::unchecked(&mut x.cpu, &all, &qp))
        .unwrap();
    gpu.ntt_forward(LimbsMut::unchecked(&mut x.gpu, &all, &qp))
        .unwrap();
    compare("ntt_forward", &x, &all, &qp);
    cpu.ntt_inverse(LimbsMut::unchecked(&mut x.cpu, &all, &qp))
        .unwrap();
    gpu.ntt_inverse(LimbsMut::unchecked(&mut x.gpu, &all, &qp))
        .unwrap();
    compare("ntt_inverse", &x, &all, &qp);
    // A scattered subset of limbs.
    let some: Vec<usize> = vec![total - 1, 0, 2];
    let some_moduli: Vec<usize> = some.iter().map(|&p| qp[p]).collect();
    cpu.ntt_forward(LimbsMut::unchecked(&mut x.cpu, &some, &some_moduli))
        .unwrap();
    gpu.ntt_forward(LimbsMut::unchecked(&mut x.gpu, &some, &some_moduli))
        .unwrap();
    compare("ntt_forward (scattered limbs)", &x, &all, &qp);

    for (op, label) in [
        (BinaryOp::Add, "add"),
        (BinaryOp::Sub, "sub"),
        (BinaryOp::Mul, "mul"),
    ] {
        let mut out = poisoned(&cpu, &gpu, total);
        cpu.binary(
            op,
            view(&a.cpu, &all, &qp),
            view(&b.cpu, &all, &qp),
            LimbsMut::unchecked(&mut out.cpu, &all, &qp),
        )
        .unwrap();
        gpu.binary(
            op,
            view(&a.gpu, &all, &qp),
            view(&b.gpu, &all, &qp),
            LimbsMut::unchecked(&mut out.gpu, &all, &qp),
        )
        .unwrap();
        compare(label, &out, &all, &qp);
        let mut acc = pair(&cpu, &gpu, total, &random_words(&cpu_ctx, &qp, 4));
        cpu.binary_assign(
            op,
            LimbsMut::unchecked(&mut acc.cpu, &all, &qp),
            view(&b.cpu, &all, &qp),
        )
        .unwrap();
        gpu.binary_assign(
            op,
            LimbsMut::unchecked(&mut acc.gpu, &all, &qp),
            view(&b.gpu, &all, &qp),
        )
        .unwrap();
        compare(&format!("{label}_assign"), &acc, &all, &qp);
    }
    let mut acc = pair(&cpu, &gpu, total, &random_words(&cpu_ctx, &qp, 5));
    cpu.mul_add_assign(
        LimbsMut::unchecked(&mut acc.cpu, &all, &qp),
        view(&a.cpu, &all, &qp),
        view(&b.cpu, &all, &qp),
    )
    .unwrap();
    gpu.mul_add_assign(
        LimbsMut::unchecked(&mut acc.gpu, &all, &qp),
        view(&a.gpu, &all, &qp),
        view(&b.gpu, &all, &qp),
    )
    .unwrap();
    compare("mul_add_assign", &acc, &all, &qp);
    cpu.negate(LimbsMut::unchecked(&mut acc.cpu, &all, &qp))
        .unwrap();
    gpu.negate(LimbsMut::unchecked(&mut acc.gpu, &all, &qp))
        .unwrap();
    compare("negate", &acc, &all, &qp);
    let scalars: Vec<u64> = (0..total as u64)
        .map(|i| 0x1234_5678_9abc_u64.wrapping_mul(i + 7))
        .collect();
    for (op, label) in [(BinaryOp::Add, "scalar add"), (BinaryOp::Mul, "scalar mul")] {
        cpu.scalar_assign(op, LimbsMut::unchecked(&mut acc.cpu, &all, &qp), &scalars)
            .unwrap();
        gpu.scalar_assign(op, LimbsMut::unchecked(&mut acc.gpu, &all, &qp), &scalars)
            .unwrap();
        compare(label, &acc, &all, &qp);
    }
    // acc += x·s per limb (relinearisation's P·d onto the inner product).
    {
        let scalars: Vec<u64> = random_words(&cpu_ctx, &qp, 6)
            .into_iter()
            .step_by(n)
            .collect();
        let mut acc = pair(&cpu, &gpu, total, &random_words(&cpu_ctx, &qp, 7));
        cpu.scalar_mul_add_assign(
            LimbsMut::unchecked(&mut acc.cpu, &all, &qp),
            view(&a.cpu, &all, &qp),
            &scalars,
        )
        .unwrap();
        gpu.scalar_mul_add_assign(
            LimbsMut::unchecked(&mut acc.gpu, &all, &qp),
            view(&a.gpu, &all, &qp),
            &scalars,
        )
        .unwrap();
        compare("scalar_mul_add_assign", &acc, &all, &qp);
    }
    // Copy into a permutation of limbs.
    let mut out = poisoned(&cpu, &gpu, total);
    let reversed: Vec<usize> = (0..total).rev().collect();
    cpu.copy(
        view(&a.cpu, &all, &qp),
        LimbsMut::unchecked(&mut out.cpu, &reversed, &qp),
    )
    .unwrap();
    gpu.copy(
        view(&a.gpu, &all, &qp),
        LimbsMut::unchecked(&mut out.gpu, &reversed, &qp),
    )
    .unwrap();
    compare("copy (permuted limbs)", &out, &reversed, &qp);

    // Rescale at several levels (NTT-form inputs).
    for l in [q_count - 1, q_count / 2, 1] {
        let moduli: Vec<usize> = (0..=l).collect();
        let positions: Vec<usize> = (0..=l).collect();
        let mut out = poisoned(&cpu, &gpu, l);
        let kept: Vec<usize> = (0..l).collect();
        cpu.rescale(
            Limbs::unchecked(&a.cpu, &positions, &moduli),
            LimbsMut::unchecked(&mut out.cpu, &kept, &kept),
        )
        .unwrap();
        gpu.rescale(
            Limbs::unchecked(&a.gpu, &positions, &moduli),
            LimbsMut::unchecked(&mut out.gpu, &kept, &kept),
        )
        .unwrap();
        compare(&format!("rescale at level {l}"), &out, &kept, &kept);
    }
    // ModDown from Q_l ∪ P at two levels.
    for l in [q_count - 1, 3.min(q_count - 1)] {
        let qp_l = params.qp_indices(Level(l)).expect("a level of the chain");
        let positions: Vec<usize> = (0..=l).chain(q_count..total).collect();
        let q: Vec<usize> = (0..=l).collect();
        let mut out = poisoned(&cpu, &gpu, l + 1);
        cpu.mod_down(
            Limbs::unchecked(&a.cpu, &positions, &qp_l),
            p_count,
            LimbsMut::unchecked(&mut out.cpu, &q, &q),
        )
        .unwrap();
        gpu.mod_down(
            Limbs::unchecked(&a.gpu, &positions, &qp_l),
            p_count,
            LimbsMut::unchecked(&mut out.gpu, &q, &q),
        )
        .unwrap();
        compare(&format!("mod_down at level {l}"), &out, &q, &q);
    }
    // ModDown with the addition after it (relinearisation), and with the
    // addend read through an automorphism (rotations, conjugation).
    let rotations = [
        GaloisElement::rotation(3, n),
        GaloisElement::rotation(-29, n),
        GaloisElement::conjugation(n),
    ];
    for galois in [None, Some(rotations[0]), Some(rotations[2])] {
        let l = q_count - 1;
        let qp_l = params.qp_indices(Level(l)).expect("a level of the chain");
        let positions: Vec<usize> = (0..=l).chain(q_count..total).collect();
        let q: Vec<usize> = (0..=l).collect();
        let mut out = poisoned(&cpu, &gpu, l + 1);
        cpu.mod_down_add(
            Limbs::unchecked(&a.cpu, &positions, &qp_l),
            p_count,
            Addend::through(Limbs::unchecked(&b.cpu, &q, &q), galois),
            LimbsMut::unchecked(&mut out.cpu, &q, &q),
        )
        .unwrap();
        gpu.mod_down_add(
            Limbs::unchecked(&a.gpu, &positions, &qp_l),
            p_count,
            Addend::through(Limbs::unchecked(&b.gpu, &q, &q), galois),
            LimbsMut::unchecked(&mut out.gpu, &q, &q),
        )
        .unwrap();
        compare(
            &format!("mod_down_add at level {l} (through {galois:?})"),
            &out,
            &q,
            &q,
        );
    }
    // The addition through an automorphism on its own.
    for g in rotations {
        let mut acc = pair(&cpu, &gpu, total, &random_words(&cpu_ctx, &qp, 4));
        cpu.add_automorphism_assign(
            LimbsMut::unchecked(&mut acc.cpu, &all, &qp),
            view(&a.cpu, &all, &qp),
            g,
        )
        .unwrap();
        gpu.add_automorphism_assign(
            LimbsMut::unchecked(&mut acc.gpu, &all, &qp),
            view(&a.gpu, &all, &qp),
            g,
        )
        .unwrap();
        compare(&format!("add_automorphism_assign ({g:?})"), &acc, &all, &qp);
    }
    // ModUp of the first and the last digit at the top level, with and
    // without the digit's NTT form.
    let alpha = params.alpha();
    let digits = params.digits_at(level);
    for (j, with_ntt) in [(0usize, true), (digits - 1, false)] {
        let start = j * alpha;
        let end = (start + alpha).min(q_count);
        let d_pos: Vec<usize> = (start..end).collect();
        let d_mod = d_pos.clone();
        let mut out = poisoned(&cpu, &gpu, total);
        let digit_ntt_cpu = Limbs::unchecked(&b.cpu, &d_pos, &d_mod);
        let digit_ntt_gpu = Limbs::unchecked(&b.gpu, &d_pos, &d_mod);
        cpu.mod_up(
            Limbs::unchecked(&a.cpu, &d_pos, &d_mod),
            with_ntt.then_some(digit_ntt_cpu),
            LimbsMut::unchecked(&mut out.cpu, &all, &qp),
        )
        .unwrap();
        gpu.mod_up(
            Limbs::unchecked(&a.gpu, &d_pos, &d_mod),
            with_ntt.then_some(digit_ntt_gpu),
            LimbsMut::unchecked(&mut out.gpu, &all, &qp),
        )
        .unwrap();
        compare(
            &format!("mod_up digit {j} (ntt given: {with_ntt})"),
            &out,
            &all,
            &qp,
        );
    }
    // The batched forms: both parts of a rescale, of a key switch's
    // ModDown (with an addend for the first part only, as a rotation, and
    // for both, as relinearisation), and the whole decomposition (at the
    // top level and at one whose last digit is shorter).
    for l in [q_count - 1, q_count / 2] {
        let moduli: Vec<usize> = (0..=l).collect();
        let kept: Vec<usize> = (0..l).collect();
        let (mut o0, mut o1) = (poisoned(&cpu, &gpu, l), poisoned(&cpu, &gpu, l));
        for (backend, x0, x1, d0, d1) in [
            (&cpu, &a.cpu, &b.cpu, &mut o0.cpu, &mut o1.cpu),
            (&gpu, &a.gpu, &b.gpu, &mut o0.gpu, &mut o1.gpu),
        ] {
            backend
                .rescale_pair(
                    [view(x0, &moduli, &moduli), view(x1, &moduli, &moduli)],
                    [
                        LimbsMut::new(be(backend), d0, &kept).unwrap(),
                        LimbsMut::new(be(backend), d1, &kept).unwrap(),
                    ],
                )
                .unwrap();
        }
        compare(
            &format!("rescale_pair part 0 at level {l}"),
            &o0,
            &kept,
            &kept,
        );
        compare(
            &format!("rescale_pair part 1 at level {l}"),
            &o1,
            &kept,
            &kept,
        );
    }
    // Each part's addend: none, as it is (`None` inside), or through an
    // automorphism.
    for (l, adds) in [
        (q_count - 1, [Some(None), None]),
        (3.min(q_count - 1), [Some(None), Some(None)]),
        (q_count - 1, [Some(Some(rotations[1])), None]),
        (
            q_count / 2,
            [Some(Some(rotations[0])), Some(Some(rotations[2]))],
        ),
    ] {
        let qp_l = params.qp_indices(Level(l)).expect("a level of the chain");
        let positions: Vec<usize> = (0..=l).chain(q_count..total).collect();
        let q: Vec<usize> = (0..=l).collect();
        let (mut o0, mut o1) = (poisoned(&cpu, &gpu, l + 1), poisoned(&cpu, &gpu, l + 1));
        for (backend, x0, x1, e, d0, d1) in [
            (&cpu, &a.cpu, &b.cpu, &a.cpu, &mut o0.cpu, &mut o1.cpu),
            (&gpu, &a.gpu, &b.gpu, &a.gpu, &mut o0.gpu, &mut o1.gpu),
        ] {
            let addend = |add: Option<Option<GaloisElement>>| {
                add.map(|galois| Addend::through(view(e, &q, &q), galois))
            };
            backend
                .mod_down_pair(
                    [view(x0, &positions, &qp_l), view(x1, &positions, &qp_l)],
                    p_count,
                    [addend(adds[0]), addend(adds[1])],
                    [
                        LimbsMut::new(be(backend), d0, &q).unwrap(),
                        LimbsMut::new(be(backend), d1, &q).unwrap(),
                    ],
                )
                .unwrap();
        }
        compare(
            &format!("mod_down_pair part 0 at level {l} ({adds:?})"),
            &o0,
            &q,
            &q,
        );
        compare(
            &format!("mod_down_pair part 1 at level {l} ({adds:?})"),
            &o1,
            &q,
            &q,
        );
    }
    // Four ModDowns in one launch, as a batch of hoisted rotations: each
    // part's addend through its own automorphism, or none.
    {
        let l = q_count - 1;
        let qp_l = params.qp_indices(Level(l)).expect("a level of the chain");
        let positions: Vec<usize> = (0..=l).chain(q_count..total).collect();
        let q: Vec<usize> = (0..=l).collect();
        let galois = [
            Some(Some(rotations[0])),
            None,
            Some(None),
            Some(Some(rotations[1])),
        ];
        let mut outs: Vec<Pair> = (0..4).map(|_| poisoned(&cpu, &gpu, l + 1)).collect();
        for (backend, x0, x1, e, on_gpu) in [
            (&cpu, &a.cpu, &b.cpu, &b.cpu, false),
            (&gpu, &a.gpu, &b.gpu, &b.gpu, true),
        ] {
            let x: Vec<Limbs<'_>> = [x0, x1, x0, x1]
                .into_iter()
                .map(|x| view(x, &positions, &qp_l))
                .collect();
            let addend: Vec<Option<Addend<'_>>> = galois
                .iter()
                .map(|add| add.map(|g| Addend::through(view(e, &q, &q), g)))
                .collect();
            let mut out: Vec<LimbsMut<'_>> = outs
                .iter_mut()
                .map(|o| {
                    let d = if on_gpu { &mut o.gpu } else { &mut o.cpu };
                    LimbsMut::new(be(backend), d, &q).unwrap()
                })
                .collect();
            backend
                .mod_down_many(&x, p_count, &addend, &mut out)
                .unwrap();
        }
        for (z, o) in outs.iter().enumerate() {
            compare(
                &format!("mod_down_many part {z} at level {l} ({:?})", galois[z]),
                o,
                &q,
                &q,
            );
        }
    }
    for l in [q_count - 1, (q_count / 2) | 1] {
        let qp_l = params.qp_indices(Level(l)).expect("a level of the chain");
        let q: Vec<usize> = (0..=l).collect();
        let digits = params.digits_at(Level(l));
        let mut outs: Vec<Pair> = (0..digits)
            .map(|_| poisoned(&cpu, &gpu, qp_l.len()))
            .collect();
        let positions: Vec<usize> = (0..qp_l.len()).collect();
        for (backend, c, gpu_side) in [(&cpu, &a.cpu, false), (&gpu, &a.gpu, true)] {
            let mut views: Vec<LimbsMut<'_>> = outs
                .iter_mut()
                .map(|o| {
                    let buffer = if gpu_side { &mut o.gpu } else { &mut o.cpu };
                    LimbsMut::unchecked(buffer, &positions, &qp_l)
                })
                .collect();
            backend
                .decompose_mod_up(view(c, &q, &q), alpha, &mut views)
                .unwrap();
        }
        for (j, o) in outs.iter().enumerate() {
            compare(
                &format!("decompose_mod_up digit {j} of {digits} at level {l}"),
                o,
                &positions,
                &qp_l,
            );
        }
    }
    // Automorphisms.
    for (g, label) in [
        (GaloisElement::rotation(1, n), "rotation 1"),
        (GaloisElement::rotation(-37, n), "rotation -37"),
        (GaloisElement::conjugation(n), "conjugation"),
    ] {
        let mut out = poisoned(&cpu, &gpu, total);
        cpu.automorphism(
            view(&a.cpu, &all, &qp),
            g,
            LimbsMut::unchecked(&mut out.cpu, &all, &qp),
        )
        .unwrap();
        gpu.automorphism(
            view(&a.gpu, &all, &qp),
            g,
            LimbsMut::unchecked(&mut out.gpu, &all, &qp),
        )
        .unwrap();
        compare(label, &out, &all, &qp);
    }
    // Spread of one limb (ModRaise's core).
    let mut out = poisoned(&cpu, &gpu, q_count);
    let q: Vec<usize> = (0..q_count).collect();
    cpu.spread_centered(
        Limbs::unchecked(&a.cpu, &[0], &[0]),
        LimbsMut::unchecked(&mut out.cpu, &q, &q),
    )
    .unwrap();
    gpu.spread_centered(
        Limbs::unchecked(&a.gpu, &[0], &[0]),
        LimbsMut::unchecked(&mut out.gpu, &q, &q),
    )
    .unwrap();
    compare("spread_centered", &out, &q, &q);
    // The fused inner product over three digits, and the tensor.
    let extra: Vec<Pair> = (0..4)
        .map(|s| pair(&cpu, &gpu, total, &random_words(&cpu_ctx, &qp, 10 + s)))
        .collect();
    let mut o0 = poisoned(&cpu, &gpu, total);
    let mut o1 = poisoned(&cpu, &gpu, total);
    {
        let d_cpu = [
            view(&a.cpu, &all, &qp),
            view(&b.cpu, &all, &qp),
            view(&extra[0].cpu, &all, &qp),
        ];
        let k_cpu = [
            view(&extra[1].cpu, &all, &qp),
            view(&extra[2].cpu, &all, &qp),
            view(&extra[3].cpu, &all, &qp),
        ];
        let d_gpu = [
            view(&a.gpu, &all, &qp),
            view(&b.gpu, &all, &qp),
            view(&extra[0].gpu, &all, &qp),
        ];
        let k_gpu = [
            view(&extra[1].gpu, &all, &qp),
            view(&extra[2].gpu, &all, &qp),
            view(&extra[3].gpu, &all, &qp),
        ];
        cpu.key_switch_inner_product(
            &d_cpu,
            &k_cpu,
            &d_cpu,
            LimbsMut::unchecked(&mut o0.cpu, &all, &qp),
            LimbsMut::unchecked(&mut o1.cpu, &all, &qp),
        )
        .unwrap();
        gpu.key_switch_inner_product(
            &d_gpu,
            &k_gpu,
            &d_gpu,
            LimbsMut::unchecked(&mut o0.gpu, &all, &qp),
            LimbsMut::unchecked(&mut o1.gpu, &all, &qp),
        )
        .unwrap();
    }
    compare("key_switch_inner_product (first sum)", &o0, &all, &qp);
    compare("key_switch_inner_product (second sum)", &o1, &all, &qp);
    // The same over rotated digits (hoisted rotations): the GPU gathers
    // through the permutation, the CPU rotates into temporaries.
    for (g, label) in [
        (GaloisElement::rotation(5, n), "rotation 5"),
        (GaloisElement::conjugation(n), "conjugation"),
    ] {
        let mut o0 = poisoned(&cpu, &gpu, total);
        let mut o1 = poisoned(&cpu, &gpu, total);
        let d_cpu = [view(&a.cpu, &all, &qp), view(&b.cpu, &all, &qp)];
        let k_cpu = [
            view(&extra[1].cpu, &all, &qp),
            view(&extra[2].cpu, &all, &qp),
        ];
        let d_gpu = [view(&a.gpu, &all, &qp), view(&b.gpu, &all, &qp)];
        let k_gpu = [
            view(&extra[1].gpu, &all, &qp),
            view(&extra[2].gpu, &all, &qp),
        ];
        cpu.key_switch_inner_product_galois(
            &d_cpu,
            g,
            &k_cpu,
            &d_cpu,
            LimbsMut::unchecked(&mut o0.cpu, &all, &qp),
            LimbsMut::unchecked(&mut o1.cpu, &all, &qp),
        )
        .unwrap();
        gpu.key_switch_inner_product_galois(
            &d_gpu,
            g,
            &k_gpu,
            &d_gpu,
            LimbsMut::unchecked(&mut o0.gpu, &all, &qp),
            LimbsMut::unchecked(&mut o1.gpu, &all, &qp),
        )
        .unwrap();
        compare(
            &format!("key_switch_inner_product_galois {label} (first sum)"),
            &o0,
            &all,
            &qp,
        );
        compare(
            &format!("key_switch_inner_product_galois {label} (second sum)"),
            &o1,
            &all,
            &qp,
        );
    }
    // Out-of-place inverse NTT from scattered source limbs into a permuted
    // destination; the source must stay unchanged.
    {
        let src_pos: Vec<usize> = vec![total - 1, 1, 3, 0];
        let src_mod: Vec<usize> = src_pos.iter().map(|&p| qp[p]).collect();
        let dst_pos: Vec<usize> = vec![2, 0, 3, 1];
        let mut out = poisoned(&cpu, &gpu, 4);
        cpu.ntt_inverse_into(
            Limbs::unchecked(&a.cpu, &src_pos, &src_mod),
            LimbsMut::unchecked(&mut out.cpu, &dst_pos, &src_mod),
        )
        .unwrap();
        gpu.ntt_inverse_into(
            Limbs::unchecked(&a.gpu, &src_pos, &src_mod),
            LimbsMut::unchecked(&mut out.gpu, &dst_pos, &src_mod),
        )
        .unwrap();
        compare("ntt_inverse_into (scattered)", &out, &dst_pos, &src_mod);
        compare("ntt_inverse_into leaves its source", &a, &all, &qp);
    }
    let mut d: Vec<Pair> = (0..3).map(|_| poisoned(&cpu, &gpu, total)).collect();
    {
        let [d0, d1, d2] = &mut d[..] else {
            unreachable!()
        };
        cpu.tensor(
            view(&a.cpu, &all, &qp),
            view(&b.cpu, &all, &qp),
            view(&extra[0].cpu, &all, &qp),
            view(&extra[1].cpu, &all, &qp),
            LimbsMut::unchecked(&mut d0.cpu, &all, &qp),
            LimbsMut::unchecked(&mut d1.cpu, &all, &qp),
            LimbsMut::unchecked(&mut d2.cpu, &all, &qp),
        )
        .unwrap();
        gpu.tensor(
            view(&a.gpu, &all, &qp),
            view(&b.gpu, &all, &qp),
            view(&extra[0].gpu, &all, &qp),
            view(&extra[1].gpu, &all, &qp),
            LimbsMut::unchecked(&mut d0.gpu, &all, &qp),
            LimbsMut::unchecked(&mut d1.gpu, &all, &qp),
            LimbsMut::unchecked(&mut d2.gpu, &all, &qp),
        )
        .unwrap();
    }
    for (i, p) in d.iter().enumerate() {
        compare(&format!("tensor d{i}"), p, &all, &qp);
    }
}

#[test]
fn gpu_primitives_match_cpu_logn12() {
    primitives(
        "gpu_primitives_match_cpu_logn12",
        Preset::TestFGb,
        NttRows::Radix8,
    );
}

#[test]
fn gpu_primitives_match_cpu_logn16() {
    primitives(
        "gpu_primitives_match_cpu_logn16",
        Preset::FGb,
        NttRows::Radix8,
    );
}

#[test]
fn gpu_primitives_match_cpu_logn17() {
    primitives(
        "gpu_primitives_match_cpu_logn17",
        Preset::FVb,
        NttRows::Radix8,
    );
}

// The same with the 16-point rows kernels (`NttRows::Radix16`).

#[test]
fn gpu_primitives_match_cpu_logn12_rows16() {
    primitives(
        "gpu_primitives_match_cpu_logn12_rows16",
        Preset::TestFGb,
        NttRows::Radix16,
    );
}

#[test]
fn gpu_primitives_match_cpu_logn16_rows16() {
    primitives(
        "gpu_primitives_match_cpu_logn16_rows16",
        Preset::FGb,
        NttRows::Radix16,
    );
}

#[test]
fn gpu_primitives_match_cpu_logn17_rows16() {
    primitives(
        "gpu_primitives_match_cpu_logn17_rows16",
        Preset::FVb,
        NttRows::Radix16,
    );
}

fn parts(ct: &Ciphertext) -> (Vec<u64>, Vec<u64>) {
    (
        ct.parts().0.to_words().unwrap(),
        ct.parts().1.to_words().unwrap(),
    )
}

/// Every evaluator operation with the same seeds on both devices:
/// bit-identical ciphertexts, and decryptions within the CPU's tolerance.
fn evaluator(name: &str, preset: Preset, min_bits: f64, rows: NttRows) {
    let Some((cpu_ctx, gpu_ctx)) = contexts(name, preset) else {
        return;
    };
    gpu_ctx.backend().set_ntt_rows(rows);
    let slots = cpu_ctx.params().slots();
    let request = KeySetRequest {
        relinearization: true,
        conjugation: true,
        rotations: vec![1, -3, 5, 16],
        ..Default::default()
    };
    struct Side {
        ctx: Context,
        secret: SecretKey,
        public: PublicKey,
        eval: Evaluator,
        encryptor: Encryptor,
    }
    let side = |ctx: &Context| {
        let keygen = KeyGenerator::with_seed(ctx, seed32(77));
        let secret = keygen.secret_key().unwrap();
        let public = keygen.public_key(&secret).unwrap();
        let keys = keygen.key_set(&secret, &request).unwrap();
        Side {
            eval: Evaluator::with_keys(ctx, Arc::new(keys)),
            encryptor: Encryptor::with_seed(ctx, seed32(78)),
            ctx: ctx.clone(),
            secret,
            public,
        }
    };
    let (c, g) = (side(&cpu_ctx), side(&gpu_ctx));
    assert_eq!(
        c.secret.poly().to_words().unwrap(),
        g.secret.poly().to_words().unwrap(),
        "secret keys"
    );
    assert_eq!(
        c.public.parts().0.to_words().unwrap(),
        g.public.parts().0.to_words().unwrap(),
        "public keys"
    );
    let mut rng = seeded_rng(79);
    let (x, y) = (unit_disk(&mut rng, slots), unit_disk(&mut rng, slots));
    let encrypt = |s: &Side, v: &[Complex64]| {
        s.encryptor
            .encrypt(&Encoder::new(&s.ctx).encode(v).unwrap(), &s.public)
            .unwrap()
    };
    let (cx, gx) = (encrypt(&c, &x), encrypt(&g, &x));
    let (cy, gy) = (encrypt(&c, &y), encrypt(&g, &y));
    assert_eq!(gx.device(), Device::Gpu(0));
    assert_eq!(parts(&cx), parts(&gx), "{name}: encryption");
    let check = |label: &str, a: Ciphertext, b: Ciphertext, expected: &[Complex64]| {
        assert_eq!(parts(&a), parts(&b), "{name}: {label} differs");
        let out = Encoder::new(&gpu_ctx)
            .decode(&Decryptor::new(&gpu_ctx).decrypt(&b, &g.secret).unwrap())
            .unwrap();
        let bits = -max_abs_error(&out, expected).log2();
        println!(
            "{name}: {label:<22} level {:>2} bit-identical, {bits:.2} bits",
            b.level()
        );
        assert!(bits >= min_bits, "{name}: {label}: {bits:.2} bits");
    };
    let xy: Vec<Complex64> = x.iter().zip(&y).map(|(a, b)| a * b).collect();
    // x·y + y·y + x·y relinearised once (lazy relinearisation).
    let lazy: Vec<Complex64> = x.iter().zip(&y).map(|(a, b)| 2.0 * a * b + b * b).collect();
    let sum_of = |s: &Side, x: &Ciphertext, y: &Ciphertext| {
        let addend = s.eval.mult_without_rescale(x, y).unwrap();
        let sum = s
            .eval
            .mult_sum_without_rescale(&[(x, y), (y, y)], Some(&addend))
            .unwrap();
        s.eval.rescale(&sum).unwrap()
    };
    check(
        "mult_sum_without_rescale",
        sum_of(&c, &cx, &cy),
        sum_of(&g, &gx, &gy),
        &lazy,
    );
    // The same sum relinearised and rescaled in one ModDown (by P·q_l).
    let fused_sum_of = |s: &Side, x: &Ciphertext, y: &Ciphertext| {
        let addend = s.eval.mult_without_rescale(x, y).unwrap();
        let mut sum = s.eval.tensor(x, y).unwrap();
        s.eval
            .add_tensored_assign(&mut sum, &s.eval.tensor(y, y).unwrap())
            .unwrap();
        s.eval.relinearize_rescale_with(sum, Some(&addend)).unwrap()
    };
    check(
        "relinearize_rescale_with",
        fused_sum_of(&c, &cx, &cy),
        fused_sum_of(&g, &gx, &gy),
        &lazy,
    );
    check(
        "mult",
        c.eval.mult(&cx, &cy).unwrap(),
        g.eval.mult(&gx, &gy).unwrap(),
        &xy,
    );
    check(
        "add",
        c.eval.add(&cx, &cy).unwrap(),
        g.eval.add(&gx, &gy).unwrap(),
        &x.iter().zip(&y).map(|(a, b)| a + b).collect::<Vec<_>>(),
    );
    check(
        "sub",
        c.eval.sub(&cx, &cy).unwrap(),
        g.eval.sub(&gx, &gy).unwrap(),
        &x.iter().zip(&y).map(|(a, b)| a - b).collect::<Vec<_>>(),
    );
    let k = Complex64::new(0.25, -0.5);
    check(
        "mult_const",
        c.eval.mult_const(&cx, k).unwrap(),
        g.eval.mult_const(&gx, k).unwrap(),
        &x.iter().map(|a| a * k).collect::<Vec<_>>(),
    );
    check(
        "add_const",
        c.eval.add_const(&cx, k).unwrap(),
        g.eval.add_const(&gx, k).unwrap(),
        &x.iter().map(|a| a + k).collect::<Vec<_>>(),
    );
    let low = Level(cx.level().0 - 2);
    check(
        "mult_const_at_level",
        c.eval
            .mult_const_at_level(&cx, Complex64::new(0.25, 0.0), Scale(2f64.powi(20)), low)
            .unwrap(),
        g.eval
            .mult_const_at_level(&gx, Complex64::new(0.25, 0.0), Scale(2f64.powi(20)), low)
            .unwrap(),
        &x.iter().map(|a| a * 0.25).collect::<Vec<_>>(),
    );
    check(
        "mult_by_i",
        c.eval.mult_by_i(&cx).unwrap(),
        g.eval.mult_by_i(&gx).unwrap(),
        &x.iter().map(|a| a * Complex64::i()).collect::<Vec<_>>(),
    );
    check(
        "mult_integer",
        c.eval.mult_integer(&cx, 3).unwrap(),
        g.eval.mult_integer(&gx, 3).unwrap(),
        &x.iter().map(|a| a * 3.0).collect::<Vec<_>>(),
    );
    check(
        "conjugate",
        c.eval.conjugate(&cx).unwrap(),
        g.eval.conjugate(&gx).unwrap(),
        &x.iter().map(|a| a.conj()).collect::<Vec<_>>(),
    );
    let rot = |v: &[Complex64], k: i64| -> Vec<Complex64> {
        let n = v.len() as i64;
        (0..n)
            .map(|j| v[((j + k).rem_euclid(n)) as usize])
            .collect()
    };
    for steps in [1i64, -3, 17] {
        check(
            &format!("rotate {steps}"),
            c.eval.rotate(&cx, steps).unwrap(),
            g.eval.rotate(&gx, steps).unwrap(),
            &rot(&x, steps),
        );
    }
    // Six steps: two batches of ModDowns on the GPU (four rotations, then
    // two), one step of 0 (a copy) among them.
    let hoisted = [1i64, 5, 0, 16, -3, 1];
    let hc = c.eval.rotate_hoisted(&cx, &hoisted).unwrap();
    let hg = g.eval.rotate_hoisted(&gx, &hoisted).unwrap();
    assert_eq!(hg.len(), hoisted.len());
    for ((a, b), k) in hc.into_iter().zip(hg).zip(hoisted) {
        check(&format!("hoisted rotate {k}"), a, b, &rot(&x, k));
    }
    // A linear transform's inner sum in one pass (`mult_plain_sum`): ten
    // products (two launches of at most eight on the GPU), then three more
    // added in; against the CPU, which takes them one at a time.
    let sum_rng = seeded_rng(81);
    let weights: Vec<Vec<Complex64>> = {
        let mut r = sum_rng;
        (0..13).map(|_| unit_disk(&mut r, slots)).collect()
    };
    let sums = |s: &Side, a: &Ciphertext, b: &Ciphertext| {
        let encoder = Encoder::new(&s.ctx);
        let plains: Vec<Plaintext> = weights
            .iter()
            .map(|w| {
                encoder
                    .encode_at(w, a.level(), Scale(2f64.powi(40)), slots)
                    .unwrap()
            })
            .collect();
        let terms: Vec<(&Ciphertext, &Plaintext)> = plains
            .iter()
            .enumerate()
            .map(|(i, p)| (if i % 2 == 0 { a } else { b }, p))
            .collect();
        let mut sum = s.eval.mult_plain_sum(&terms[..10]).unwrap();
        let first = sum.try_clone().unwrap();
        s.eval
            .mult_plain_sum_add_assign(&mut sum, &terms[10..])
            .unwrap();
        (first, sum)
    };
    let ((c10, c13), (g10, g13)) = (sums(&c, &cx, &cy), sums(&g, &gx, &gy));
    let weighted = |count: usize| -> Vec<Complex64> {
        (0..slots)
            .map(|j| {
                (0..count)
                    .map(|t| weights[t][j] * if t % 2 == 0 { x[j] } else { y[j] })
                    .sum()
            })
            .collect()
    };
    check("mult_plain_sum of 10", c10, g10, &weighted(10));
    check("... plus 3 added in", c13, g13, &weighted(13));
    // Double hoisting (`ExtendedCiphertext`): rotations kept in Q ∪ P,
    // products by extended plaintexts (expanded from compact form by the
    // batched expansion over P limbs, and encoded), a rotation in Q ∪ P
    // (ModDown of one part), a sum, and the final ModDown pair.
    let ext_steps = [0i64, 1, 5, 16];
    let diag_rng = seeded_rng(80);
    let diagonals: Vec<Vec<Complex64>> = {
        let mut r = diag_rng;
        ext_steps.iter().map(|_| unit_disk(&mut r, slots)).collect()
    };
    let extended = |s: &Side, ct: &Ciphertext| {
        let encoder = Encoder::new(&s.ctx);
        let level = ct.level();
        let scale = Scale(2f64.powi(40));
        let class = MemoryClass::Temporary;
        let rotated = s.eval.rotate_hoisted_extended(ct, &ext_steps).unwrap();
        let compact: Vec<_> = diagonals
            .iter()
            .map(|d| {
                encoder
                    .encode_compact_at_class(d, level, scale, slots, class)
                    .unwrap()
            })
            .collect();
        let expanded = encoder
            .expand_extended(&compact.iter().collect::<Vec<_>>(), class)
            .unwrap();
        let encoded = encoder
            .encode_extended_at_class(&diagonals[1], level, scale, slots, class)
            .unwrap();
        let mut words: Vec<(Vec<u64>, Vec<u64>)> = rotated
            .iter()
            .map(|e| {
                (
                    e.parts().0.to_words().unwrap(),
                    e.parts().1.to_words().unwrap(),
                )
            })
            .collect();
        words.extend(
            expanded
                .iter()
                .map(|p| (p.poly().unwrap().to_words().unwrap(), Vec::new())),
        );
        assert_eq!(
            expanded[1].poly().unwrap().to_words().unwrap(),
            encoded.poly().unwrap().to_words().unwrap(),
            "{name}: extended expansion equals extended encoding"
        );
        let mut acc = s
            .eval
            .mult_plain_extended(&rotated[0], &expanded[0])
            .unwrap();
        for (x, p) in rotated.iter().zip(&expanded).skip(1) {
            s.eval
                .mult_plain_extended_add_assign(&mut acc, x, p)
                .unwrap();
        }
        let mut twice = s.eval.rotate_extended(&acc, 16).unwrap();
        s.eval.add_extended_assign(&mut twice, &acc).unwrap();
        (words, s.eval.mod_down_extended(&twice).unwrap())
    };
    let ((cw, cout), (gw, gout)) = (extended(&c, &cx), extended(&g, &gx));
    for (i, (a, b)) in cw.iter().zip(&gw).enumerate() {
        assert!(a == b, "{name}: extended value {i} differs");
    }
    let mut sum = vec![Complex64::new(0.0, 0.0); slots];
    for (&k, d) in ext_steps.iter().zip(&diagonals) {
        for ((s, a), b) in sum.iter_mut().zip(d).zip(rot(&x, k)) {
            *s += a * b;
        }
    }
    let want: Vec<Complex64> = rot(&sum, 16).iter().zip(&sum).map(|(a, b)| a + b).collect();
    check("double-hoisted sum, rotation, mod_down", cout, gout, &want);
    let low_c = c.eval.level_down(&cx, Level(3)).unwrap();
    let low_g = g.eval.level_down(&gx, Level(3)).unwrap();
    check(
        "level_down",
        low_c.try_clone().unwrap(),
        low_g.try_clone().unwrap(),
        &x,
    );
    let zero_c = c.eval.level_down(&cx, Level(0)).unwrap();
    let zero_g = g.eval.level_down(&gx, Level(0)).unwrap();
    let top = cpu_ctx.params().max_level();
    let (rc, rg) = (
        c.eval.mod_raise(&zero_c, top).unwrap(),
        g.eval.mod_raise(&zero_g, top).unwrap(),
    );
    assert_eq!(parts(&rc), parts(&rg), "{name}: mod_raise differs");
    println!("{name}: mod_raise bit-identical");
    // Transfers: to_host of the GPU result equals the CPU result, and back.
    let host = gx.to_host().unwrap();
    assert_eq!(host.device(), Device::Cpu);
    assert_eq!(parts(&host), parts(&cx));
    let back = host.to_device().unwrap();
    assert_eq!(back.device(), Device::Gpu(0));
    assert_eq!(parts(&back), parts(&gx));
    // Operands on different devices are a typed error.
    assert!(matches!(
        g.eval.add(&gx, &host).map(|_| ()),
        Err(hemem_ckks::Error::Operand(
            hemem_ckks::OperandError::DeviceMismatch { .. }
        ))
    ));
}

#[test]
fn gpu_evaluator_matches_cpu_logn12() {
    evaluator(
        "gpu_evaluator_matches_cpu_logn12",
        Preset::TestFGb,
        20.0,
        NttRows::Radix8,
    );
}

#[test]
fn gpu_evaluator_matches_cpu_fgb() {
    evaluator(
        "gpu_evaluator_matches_cpu_fgb",
        Preset::FGb,
        25.0,
        NttRows::Radix8,
    );
}

#[test]
fn gpu_evaluator_matches_cpu_logn12_rows16() {
    evaluator(
        "gpu_evaluator_matches_cpu_logn12_rows16",
        Preset::TestFGb,
        20.0,
        NttRows::Radix16,
    );
}

#[test]
fn gpu_evaluator_matches_cpu_fgb_rows16() {
    evaluator(
        "gpu_evaluator_matches_cpu_fgb_rows16",
        Preset::FGb,
        25.0,
        NttRows::Radix16,
    );
}

// ---------------------------------------------------------------------------
// Seeded switching keys: the counter-based generator of `a_j` on the device
// (`ckks_prf.cu`) against the CPU's, and the fused seeded inner product.

/// Real NTT primes for degree `n`: the largest 42-, 50-, 55-, 58- and
/// 61-bit ones (rejections about 2^-20 or rarer), and the smallest 45- and
/// 59-bit ones (about half the first candidates rejected, so the device's
/// retry path runs for every other coefficient).
fn seeded_moduli(n: usize) -> Vec<hemem_ckks::zq::Modulus> {
    use hemem_ckks::zq::primes::{PrimeGenerator, is_prime};
    let two_n = 2 * n as u64;
    let low = |bits: u32| {
        let mut p = (1u64 << (bits - 1)) + 1;
        while !is_prime(p) {
            p += two_n;
        }
        p
    };
    let mut q: Vec<u64> = [42u32, 50, 55, 58, 61]
        .iter()
        .map(|&b| PrimeGenerator::new(b, two_n).next().unwrap())
        .collect();
    q.insert(2, low(45));
    q.push(low(59));
    q.into_iter()
        .map(|q| hemem_ckks::zq::Modulus::new(q).unwrap())
        .collect()
}

/// A CPU backend and a GPU backend over `moduli` at degree `n`.
fn seeded_backends(
    name: &str,
    n: usize,
    moduli: &[hemem_ckks::zq::Modulus],
) -> Option<(Arc<dyn Backend>, Arc<dyn Backend>)> {
    let device = gpu_or_skip(name)?;
    let cpu = hemem_ckks::backend::CpuBackend::new(n, moduli).unwrap();
    let allocator =
        hemem_memory::Allocator::gpu(&device, &hemem_memory::MemoryConfig::default()).unwrap();
    // The launch mode follows HEMEM_DEPENDENT_LAUNCH, as the contexts' do.
    let launch = hemem_memory::MemoryConfig::from_env()
        .unwrap()
        .dependent_launch;
    let gpu = hemem_ckks::backend::GpuBackend::new(device, allocator, cpu.plans(), launch).unwrap();
    Some((Arc::new(cpu), Arc::new(gpu)))
}

/// Device generation equals host generation bit for bit, for several digits,
/// through a view whose positions and modulus order are shuffled (the stream
/// follows the global modulus index, not the position).
fn uniform_from_seed_matches_cpu(name: &str, log_n: u32) {
    let n = 1usize << log_n;
    let moduli = seeded_moduli(n);
    let Some((cpu, gpu)) = seeded_backends(name, n, &moduli) else {
        return;
    };
    let limbs = moduli.len();
    let mut rng = seeded_rng(u64::from(log_n) << 8);
    // Position p of the buffer holds modulus (p * 3 + 1) % limbs.
    let positions: Vec<usize> = (0..limbs).rev().collect();
    let order: Vec<usize> = positions.iter().map(|&p| (p * 3 + 1) % limbs).collect();
    for (digit, prf) in [
        (0usize, SeedPrf::ChaCha12),
        (1, SeedPrf::ChaCha20),
        (4, SeedPrf::ChaCha20),
        (15, SeedPrf::ChaCha12),
    ] {
        let mut bytes = [0u8; 32];
        rng.fill_bytes(&mut bytes);
        let seed = UniformSeed::new(bytes, prf);
        let out = poisoned(&cpu, &gpu, limbs);
        let (mut c, mut g) = (out.cpu, out.gpu);
        let view = |buffer| LimbsMut::unchecked(buffer, &positions, &order);
        cpu.uniform_from_seed(&seed, digit, view(&mut c)).unwrap();
        gpu.uniform_from_seed(&seed, digit, view(&mut g)).unwrap();
        let host = download(&cpu, &c, &positions, &order);
        assert_same(
            &format!("{name}: digit {digit}"),
            &host,
            &download(&gpu, &g, &positions, &order),
            n,
        );
        // And the spec itself, coefficient by coefficient, on a sample.
        let generator = hemem_ckks::sampling::SeededUniform::new(&seed);
        for (l, &m) in order.iter().enumerate() {
            let q = moduli[m].value();
            for k in (0..n).step_by(n / 64 + 1).chain([n - 1]) {
                assert_eq!(
                    host[l * n + k],
                    generator.coefficient(digit, m, q, k as u64),
                    "{name}: digit {digit} modulus {m} coefficient {k}"
                );
            }
        }
        println!(
            "{name}: digit {digit} ({}): {limbs} limbs bit-identical",
            prf.name()
        );
    }
}

#[test]
fn gpu_uniform_from_seed_matches_cpu_logn12() {
    uniform_from_seed_matches_cpu("gpu_uniform_from_seed_matches_cpu_logn12", 12);
}

#[test]
fn gpu_uniform_from_seed_matches_cpu_logn13() {
    uniform_from_seed_matches_cpu("gpu_uniform_from_seed_matches_cpu_logn13", 13);
}

#[test]
fn gpu_uniform_from_seed_matches_cpu_logn14() {
    uniform_from_seed_matches_cpu("gpu_uniform_from_seed_matches_cpu_logn14", 14);
}

#[test]
fn gpu_uniform_from_seed_matches_cpu_logn15() {
    uniform_from_seed_matches_cpu("gpu_uniform_from_seed_matches_cpu_logn15", 15);
}

#[test]
fn gpu_uniform_from_seed_matches_cpu_logn16() {
    uniform_from_seed_matches_cpu("gpu_uniform_from_seed_matches_cpu_logn16", 16);
}

/// Views of every limb of each pair's CPU or GPU buffer.
fn pair_views<'a>(list: &'a [Pair], gpu: bool, all: &'a [usize]) -> Vec<Limbs<'a>> {
    list.iter()
        .map(|p| Limbs::unchecked(if gpu { &p.gpu } else { &p.cpu }, all, all))
        .collect()
}

/// The fused seeded inner product (with and without a Galois element; 3
/// digits, and 9 so the kernel's mid-sum reduction runs) equals the CPU's
/// expansion followed by its inner product, and the device's own expansion
/// followed by the stored-key kernel. Views the kernel does not fit take
/// the fallback and agree too.
fn seeded_inner_product_matches_cpu(name: &str, log_n: u32) {
    let n = 1usize << log_n;
    let moduli = seeded_moduli(n);
    let Some((cpu, gpu)) = seeded_backends(name, n, &moduli) else {
        return;
    };
    let limbs = moduli.len();
    let all: Vec<usize> = (0..limbs).collect();
    let table: Vec<u64> = moduli.iter().map(|m| m.value()).collect();
    let mut rng = seeded_rng(0x5eed_0000 + u64::from(log_n));
    let mut random = |count: usize| -> Vec<Pair> {
        (0..count)
            .map(|_| {
                let words: Vec<u64> = table
                    .iter()
                    .flat_map(|&q| (0..n).map(|_| rng.next_u64() % q).collect::<Vec<_>>())
                    .collect();
                pair(&cpu, &gpu, limbs, &words)
            })
            .collect()
    };
    let two_n = 2 * n as u64;
    for (count, prf) in [
        (3usize, SeedPrf::ChaCha12),
        (9, SeedPrf::ChaCha12),
        (9, SeedPrf::ChaCha20),
    ] {
        let digits = random(count);
        let b = random(count);
        let seed = UniformSeed::new(seed32(count as u64 + u64::from(log_n)), prf);
        for galois in [None, Some(GaloisElement(5)), Some(GaloisElement(two_n - 1))] {
            let (mut o0, mut o1) = (poisoned(&cpu, &gpu, limbs), poisoned(&cpu, &gpu, limbs));
            cpu.key_switch_inner_product_seeded(
                &pair_views(&digits, false, &all),
                galois,
                &pair_views(&b, false, &all),
                &seed,
                LimbsMut::new(be(&cpu), &mut o0.cpu, &all).unwrap(),
                LimbsMut::new(be(&cpu), &mut o1.cpu, &all).unwrap(),
            )
            .unwrap();
            gpu.key_switch_inner_product_seeded(
                &pair_views(&digits, true, &all),
                galois,
                &pair_views(&b, true, &all),
                &seed,
                LimbsMut::new(be(&gpu), &mut o0.gpu, &all).unwrap(),
                LimbsMut::new(be(&gpu), &mut o1.gpu, &all).unwrap(),
            )
            .unwrap();
            let label = format!("{name}: {count} digits, {}, galois {galois:?}", prf.name());
            let c0 = download(&cpu, &o0.cpu, &all, &all);
            let c1 = download(&cpu, &o1.cpu, &all, &all);
            assert_same(
                &format!("{label}: out0"),
                &c0,
                &download(&gpu, &o0.gpu, &all, &all),
                n,
            );
            assert_same(
                &format!("{label}: out1"),
                &c1,
                &download(&gpu, &o1.gpu, &all, &all),
                n,
            );
            // The device's expansion and stored-key kernel give the same sums.
            let a: Vec<hemem_memory::Buffer> = (0..count)
                .map(|j| {
                    let mut buffer = gpu.allocate(MemoryClass::Temporary, limbs, false).unwrap();
                    gpu.uniform_from_seed(
                        &seed,
                        j,
                        LimbsMut::new(be(&gpu), &mut buffer, &all).unwrap(),
                    )
                    .unwrap();
                    buffer
                })
                .collect();
            let a_views: Vec<Limbs<'_>> = a
                .iter()
                .map(|x| Limbs::new(be(&cpu), x, &all).unwrap())
                .collect();
            let (mut e0, mut e1) = (poisoned(&cpu, &gpu, limbs), poisoned(&cpu, &gpu, limbs));
            let (d, bv) = (pair_views(&digits, true, &all), pair_views(&b, true, &all));
            let (out0, out1) = (
                LimbsMut::new(be(&gpu), &mut e0.gpu, &all).unwrap(),
                LimbsMut::new(be(&gpu), &mut e1.gpu, &all).unwrap(),
            );
            match galois {
                Some(g) => gpu.key_switch_inner_product_galois(&d, g, &bv, &a_views, out0, out1),
                None => gpu.key_switch_inner_product(&d, &bv, &a_views, out0, out1),
            }
            .unwrap();
            assert_same(
                &format!("{label}: expanded out1"),
                &c1,
                &download(&gpu, &e1.gpu, &all, &all),
                n,
            );
            println!("{label}: bit-identical (fused and expanded)");
        }
        // Outputs at different positions: the fused kernel does not fit
        // them and the fallback (expansion, then the inner product by parts)
        // must agree too.
        let reversed: Vec<usize> = all.iter().rev().copied().collect();
        let (mut o0, mut o1) = (poisoned(&cpu, &gpu, limbs), poisoned(&cpu, &gpu, limbs));
        for (backend, side, o0, o1) in [
            (&cpu, false, &mut o0.cpu, &mut o1.cpu),
            (&gpu, true, &mut o0.gpu, &mut o1.gpu),
        ] {
            backend
                .key_switch_inner_product_seeded(
                    &pair_views(&digits, side, &all),
                    None,
                    &pair_views(&b, side, &all),
                    &seed,
                    LimbsMut::unchecked(o0, &reversed, &all),
                    LimbsMut::new(be(backend), o1, &all).unwrap(),
                )
                .unwrap();
        }
        for (what, o, positions) in [("out0", &o0, &reversed), ("out1", &o1, &all)] {
            assert_same(
                &format!("{name}: {count} digits, {}, fallback {what}", prf.name()),
                &download(&cpu, &o.cpu, positions, &all),
                &download(&gpu, &o.gpu, positions, &all),
                n,
            );
        }
        println!(
            "{name}: {count} digits, {}: fallback bit-identical",
            prf.name()
        );
    }
}

#[test]
fn gpu_seeded_inner_product_matches_cpu_logn12() {
    seeded_inner_product_matches_cpu("gpu_seeded_inner_product_matches_cpu_logn12", 12);
}

#[test]
fn gpu_seeded_inner_product_matches_cpu_logn16() {
    seeded_inner_product_matches_cpu("gpu_seeded_inner_product_matches_cpu_logn16", 16);
}

/// Keys generated on the device (their `a_j` by the device generator) equal
/// the CPU's, and a compressed key's key switch on the GPU (the fused
/// kernel) equals the CPU's and the stored key's, for relinearisation,
/// rotations (single and hoisted) and conjugation, at two levels.
#[test]
fn gpu_compressed_key_switch_matches_cpu_logn12() {
    let name = "gpu_compressed_key_switch_matches_cpu_logn12";
    let Some((cpu_ctx, gpu_ctx)) = contexts(name, Preset::TestFGb) else {
        return;
    };
    let request = KeySetRequest {
        relinearization: true,
        conjugation: true,
        rotations: vec![1, 5],
        ..Default::default()
    };
    let slots = cpu_ctx.params().slots();
    let x = unit_disk(&mut seeded_rng(301), slots);
    let run = |ctx: &Context, compress: bool| {
        let keygen = KeyGenerator::with_seed(ctx, seed32(300));
        let secret = keygen.secret_key().unwrap();
        let public = keygen.public_key(&secret).unwrap();
        let mut keys = keygen.key_set(&secret, &request).unwrap();
        // Keys are made compressed: expand them (on the device for the GPU
        // context) to compare their a_j, and to have stored keys.
        keys.keys_mut().for_each(|k| k.expand().unwrap());
        // Every key in full (b and a): the device generated its a_j.
        let key_bytes: Vec<Vec<u8>> = keys
            .keys()
            .map(|k| hemem_ckks::serialize::ToBytes::to_bytes(k).unwrap())
            .collect();
        if compress {
            keys.keys_mut().for_each(SwitchingKey::compress);
        }
        let eval = Evaluator::with_keys(ctx, Arc::new(keys));
        let top = Encryptor::with_seed(ctx, seed32(302))
            .encrypt(&Encoder::new(ctx).encode(&x).unwrap(), &public)
            .unwrap();
        let product = eval.mult(&top, &top).unwrap();
        let lower = eval
            .level_down(&product, Level(product.level().0 - 1))
            .unwrap();
        let mut out = Vec::new();
        for ct in [&top, &lower] {
            out.push(parts(&eval.mult(ct, ct).unwrap()));
            out.push(parts(&eval.rotate(ct, 5).unwrap()));
            out.push(parts(&eval.conjugate(ct).unwrap()));
            for r in eval.rotate_hoisted(ct, &[1, 5]).unwrap() {
                out.push(parts(&r));
            }
        }
        (key_bytes, out)
    };
    let (cpu_keys, reference) = run(&cpu_ctx, false);
    let (gpu_keys, gpu_stored) = run(&gpu_ctx, false);
    assert!(cpu_keys == gpu_keys, "{name}: device-generated keys differ");
    println!("{name}: keys generated on the device are bit-identical");
    assert!(reference == gpu_stored, "{name}: stored keys differ");
    let (_, gpu_compressed) = run(&gpu_ctx, true);
    assert!(
        reference == gpu_compressed,
        "{name}: compressed keys on the GPU differ"
    );
    let (_, cpu_compressed) = run(&cpu_ctx, true);
    assert!(
        reference == cpu_compressed,
        "{name}: compressed keys on the CPU differ"
    );
    println!("{name}: compressed key switches bit-identical (CPU, GPU fused, stored)");
}

/// Key files through a GPU: keys made on the GPU are saved a few limbs at a
/// time through a host staging buffer, and load (uploaded polynomial by
/// polynomial) to the same bytes on either backend.
#[test]
fn gpu_key_files_round_trip_through_device_staging() {
    let Some((cpu, gpu)) = contexts(
        "gpu_key_files_round_trip_through_device_staging",
        Preset::TestFGb,
    ) else {
        return;
    };
    let request = KeySetRequest {
        relinearization: true,
        conjugation: true,
        rotations: vec![1, -3],
        ..Default::default()
    };
    let make = |context: &Context| {
        let keygen = KeyGenerator::with_seed(context, seed32(91));
        let secret = keygen.secret_key().unwrap();
        let public = keygen.public_key(&secret).unwrap();
        let keys = keygen.key_set(&secret, &request).unwrap();
        (secret, public, keys)
    };
    let (cpu_secret, cpu_public, cpu_keys) = make(&cpu);
    let (gpu_secret, gpu_public, gpu_keys) = make(&gpu);
    let mut from_cpu = Vec::new();
    cpu_keys.save(&mut from_cpu).unwrap();
    let mut from_gpu = Vec::new();
    gpu_keys.save(&mut from_gpu).unwrap();
    assert_eq!(from_gpu, from_cpu, "the same keys from either backend");
    let on_gpu = KeySet::load(&gpu, from_cpu.as_slice()).unwrap();
    assert_eq!(on_gpu.to_bytes_compressed().unwrap(), from_cpu);
    assert_eq!(
        gpu_public.to_bytes().unwrap(),
        cpu_public.to_bytes().unwrap()
    );
    let public = PublicKey::from_bytes(&gpu, &cpu_public.to_bytes().unwrap()).unwrap();
    assert_eq!(public.to_bytes().unwrap(), cpu_public.to_bytes().unwrap());
    assert_eq!(
        *gpu_secret.to_bytes().unwrap(),
        *cpu_secret.to_bytes().unwrap()
    );
    let secret = SecretKey::from_bytes(&gpu, &cpu_secret.to_bytes().unwrap()).unwrap();
    assert_eq!(secret.coefficients(), cpu_secret.coefficients());
}

/// Random integer-valued `f64` bits for compact expansion: small and huge
/// magnitudes (up to 2^900, the wide reduction), both signs.
/// `words` in a new buffer of `backend`'s allocator.
fn upload(backend: &Arc<dyn Backend>, words: &[u64]) -> hemem_memory::Buffer {
    let allocator = backend.allocator();
    let mut b = allocator
        .allocate(MemoryClass::BootstrapConstant, words.len() * 8)
        .unwrap();
    allocator.upload(&mut b, 0, words).unwrap();
    b
}

/// A buffer's words, downloaded.
fn buffer_words(backend: &Arc<dyn Backend>, buffer: &hemem_memory::Buffer) -> Vec<u64> {
    let mut words = vec![0u64; buffer.words()];
    backend.allocator().download(buffer, 0, &mut words).unwrap();
    words
}

fn compact_words(count: usize, seed: u64) -> Vec<u64> {
    let mut rng = seeded_rng(seed);
    (0..count)
        .map(|i| {
            let mantissa = (rng.next_u64() >> 11) | 1;
            let shift = match i % 3 {
                0 => 0,
                1 => (rng.next_u64() % 16) as i32,
                _ => (rng.next_u64() % 900) as i32,
            };
            let sign = if rng.next_u64() & 1 == 0 { 1.0 } else { -1.0 };
            (sign * mantissa as f64 * 2f64.powi(shift)).to_bits()
        })
        .collect()
}

/// Compact expansion, GPU against CPU: one part in coefficient form, then
/// batches (more parts than one launch takes, and views that differ) in
/// NTT form, every output poisoned first; then the encoder's compact
/// plaintexts expanded on both devices and against direct encoding.
fn compact_expansion(name: &str, preset: Preset) {
    let Some((cpu_ctx, gpu_ctx)) = contexts(name, preset) else {
        return;
    };
    let cpu = Arc::clone(cpu_ctx.host_backend());
    let gpu = Arc::clone(gpu_ctx.backend());
    let params = cpu_ctx.params().clone();
    let n = params.degree().get();
    let level = params.max_level();
    let q = params.q_indices(level).expect("a level of the chain");
    let limbs = q.len();
    // One part, coefficient form, at every gap down to a single slot.
    for (i, log_gap) in [0u32, 1, 3, n.trailing_zeros() - 1].into_iter().enumerate() {
        let gap = 1usize << log_gap;
        let words = compact_words(n / gap, 500 + i as u64);
        let (c, g) = (upload(&cpu, &words), upload(&gpu, &words));
        let out = poisoned(&cpu, &gpu, limbs);
        let mut out = out;
        cpu.expand_coefficients(&c, gap, LimbsMut::new(be(&cpu), &mut out.cpu, &q).unwrap())
            .unwrap();
        gpu.expand_coefficients(&g, gap, LimbsMut::new(be(&gpu), &mut out.gpu, &q).unwrap())
            .unwrap();
        let positions: Vec<usize> = (0..limbs).collect();
        assert_same(
            &format!("expand_coefficients gap {gap}"),
            &download(&cpu, &out.cpu, &positions, &q),
            &download(&gpu, &out.gpu, &positions, &q),
            n,
        );
    }
    // Batches in NTT form: 5 parts, 19 parts (two launches), and views with
    // different positions (the per-part fallback); then polynomials in X^gap
    // of few points (2 to 4096, transformed at that size and repeated:
    // `expand_periodic`) and of 8192 points (past the kernel's limit, the
    // full transform), with 19 parts and with shifted views.
    let few = |points: usize| (n / points.min(n)).max(1);
    for (parts, gap, shifted) in [
        (5usize, 1usize, false),
        (19, 2, false),
        (3, 4, true),
        (5, few(64), false),
        (19, few(2048), false),
        (3, few(4096), true),
        (2, few(2), false),
        (4, few(8192), false),
    ] {
        let words: Vec<Vec<u64>> = (0..parts)
            .map(|p| compact_words(n / gap, 600 + p as u64))
            .collect();
        let cpu_in: Vec<_> = words.iter().map(|w| upload(&cpu, w)).collect();
        let gpu_in: Vec<_> = words.iter().map(|w| upload(&gpu, w)).collect();
        let mut outs: Vec<Pair> = (0..parts)
            .map(|_| poisoned(&cpu, &gpu, limbs + 1))
            .collect();
        let position_sets: Vec<Vec<usize>> = (0..parts)
            .map(|p| {
                let start = usize::from(shifted && p % 2 == 1);
                (start..start + limbs).collect()
            })
            .collect();
        {
            let mut cpu_views: Vec<LimbsMut<'_>> = outs
                .iter_mut()
                .zip(&position_sets)
                .map(|(o, pos)| LimbsMut::unchecked(&mut o.cpu, pos, &q))
                .collect();
            let refs: Vec<&hemem_memory::Buffer> = cpu_in.iter().collect();
            cpu.expand_compact(&refs, gap, &mut cpu_views).unwrap();
        }
        {
            let mut gpu_views: Vec<LimbsMut<'_>> = outs
                .iter_mut()
                .zip(&position_sets)
                .map(|(o, pos)| LimbsMut::unchecked(&mut o.gpu, pos, &q))
                .collect();
            let refs: Vec<&hemem_memory::Buffer> = gpu_in.iter().collect();
            gpu.expand_compact(&refs, gap, &mut gpu_views).unwrap();
        }
        for (p, (o, pos)) in outs.iter().zip(&position_sets).enumerate() {
            assert_same(
                &format!("expand_compact {parts} parts, part {p}"),
                &download(&cpu, &o.cpu, pos, &q),
                &download(&gpu, &o.gpu, pos, &q),
                n,
            );
        }
    }
    // The encoder: compact plaintexts on each device, expanded, against the
    // CPU's direct encoding, at several levels and slot counts.
    let (ce, ge) = (Encoder::new(&cpu_ctx), Encoder::new(&gpu_ctx));
    let mut rng = seeded_rng(700);
    for (log_slots, l) in [(params.slots().trailing_zeros(), level.0), (4, 3), (0, 1)] {
        let slots = 1usize << log_slots;
        let level = Level(l);
        let values = unit_disk(&mut rng, slots);
        let scale = Scale(2f64.powf(30.0 + (rng.next_u64() % 30) as f64));
        let class = MemoryClass::BootstrapConstant;
        let direct = ce
            .encode_at_class(&values, level, scale, slots, class)
            .unwrap();
        let from_cpu = ce
            .encode_compact_at_class(&values, level, scale, slots, class)
            .unwrap();
        let from_gpu = ge
            .encode_compact_at_class(&values, level, scale, slots, class)
            .unwrap();
        assert_eq!(from_gpu.device(), Device::Gpu(0));
        let expected = direct.poly().unwrap().to_words().unwrap();
        assert_same(
            "compact plaintext, cpu",
            &expected,
            &from_cpu
                .expand()
                .unwrap()
                .poly()
                .unwrap()
                .to_words()
                .unwrap(),
            n,
        );
        let expanded = ge
            .expand(&[&from_gpu, &from_gpu], MemoryClass::Temporary)
            .unwrap();
        for e in &expanded {
            assert_eq!(e.device(), Device::Gpu(0));
            assert_same(
                "compact plaintext, gpu",
                &expected,
                &e.poly().unwrap().to_words().unwrap(),
                n,
            );
        }
        // Moved to the host (where it expands on the CPU) and back to the
        // GPU (the hand-written swap's path): the same limbs both ways.
        let host = from_gpu.to_host().unwrap();
        assert_eq!(host.device(), Device::Cpu);
        assert_same(
            "compact plaintext moved to the host",
            &expected,
            &host.expand().unwrap().poly().unwrap().to_words().unwrap(),
            n,
        );
        let back = host.to_device().unwrap();
        assert_eq!(back.device(), Device::Gpu(0));
        assert_same(
            "compact plaintext moved back to the gpu",
            &expected,
            &back.expand().unwrap().poly().unwrap().to_words().unwrap(),
            n,
        );
    }
}

#[test]
fn gpu_compact_expansion_matches_cpu_logn12() {
    compact_expansion("gpu_compact_expansion_matches_cpu_logn12", Preset::TestFGb);
}

#[test]
fn gpu_compact_expansion_matches_cpu_logn16() {
    compact_expansion("gpu_compact_expansion_matches_cpu_logn16", Preset::FGb);
}

/// Periodic plaintexts, GPU against CPU: compact words (2 to 4096 points a
/// limb) expanded to their periodic form on each device, checked against
/// each other and against the full expansion's values; then sums of eleven
/// products (two launches) mixing periodic and full second operands, fresh
/// and accumulated, against each other and against the CPU's sum over the
/// full expansions. Outputs are poisoned first.
fn periodic_products(name: &str, preset: Preset) {
    let Some((cpu_ctx, gpu_ctx)) = contexts(name, preset) else {
        return;
    };
    let cpu = Arc::clone(cpu_ctx.host_backend());
    let gpu = Arc::clone(gpu_ctx.backend());
    let params = cpu_ctx.params().clone();
    let n = params.degree().get();
    let q = params
        .q_indices(params.max_level())
        .expect("a level of the chain");
    let limbs = q.len();
    let all: Vec<usize> = (0..limbs).collect();
    let mut periodic = Vec::new();
    let mut full = Vec::new();
    for (i, points) in [2usize, 64, 2048, 4096].into_iter().enumerate() {
        let points = points.min(n / 2);
        let gap = n / points;
        let words = compact_words(points, 800 + i as u64);
        let (c, g) = (upload(&cpu, &words), upload(&gpu, &words));
        let poison = vec![POISON; limbs * points];
        let (mut pc, mut pg) = (upload(&cpu, &poison), upload(&gpu, &poison));
        cpu.expand_periodic(&[&c], gap, &q, &mut [&mut pc]).unwrap();
        gpu.expand_periodic(&[&g], gap, &q, &mut [&mut pg]).unwrap();
        let stored = buffer_words(&cpu, &pc);
        assert_same(
            &format!("expand_periodic, {points} points"),
            &stored,
            &buffer_words(&gpu, &pg),
            points,
        );
        let mut f = poisoned(&cpu, &gpu, limbs);
        cpu.expand_compact(
            &[&c],
            gap,
            &mut [LimbsMut::new(be(&cpu), &mut f.cpu, &q).unwrap()],
        )
        .unwrap();
        gpu.expand_compact(
            &[&g],
            gap,
            &mut [LimbsMut::new(be(&gpu), &mut f.gpu, &q).unwrap()],
        )
        .unwrap();
        let expanded = download(&cpu, &f.cpu, &all, &q);
        for (j, &v) in expanded.iter().enumerate() {
            let (limb, k) = (j / n, j % n);
            assert_eq!(v, stored[limb * points + k / gap], "{points} points, {j}");
        }
        periodic.push((pc, pg, gap.trailing_zeros()));
        full.push(f);
    }
    let a: Vec<Pair> = (0..11)
        .map(|t| pair(&cpu, &gpu, limbs, &random_words(&cpu_ctx, &q, 900 + t)))
        .collect();
    for accumulate in [false, true] {
        let start = random_words(&cpu_ctx, &q, 950);
        let mut out = if accumulate {
            pair(&cpu, &gpu, limbs, &start)
        } else {
            poisoned(&cpu, &gpu, limbs)
        };
        let mut reference = pair(&cpu, &gpu, limbs, &start);
        let terms = |gpu_side: bool| -> Vec<(Limbs<'_>, PeriodicLimbs<'_>)> {
            let backend = if gpu_side { &gpu } else { &cpu };
            (0..a.len())
                .map(|t| {
                    let x = if gpu_side { &a[t].gpu } else { &a[t].cpu };
                    let x = Limbs::new(be(backend), x, &q).unwrap();
                    let i = (3 * t + 1) % full.len();
                    let b = if t % 3 == 0 {
                        let f = if gpu_side { &full[i].gpu } else { &full[i].cpu };
                        Limbs::new(be(backend), f, &q).unwrap().into()
                    } else {
                        let (pc, pg, log_gap) = &periodic[i];
                        let p = if gpu_side { pg } else { pc };
                        PeriodicLimbs::new(be(backend), p, &q, *log_gap).unwrap()
                    };
                    (x, b)
                })
                .collect()
        };
        cpu.mul_sum_periodic(
            LimbsMut::new(be(&cpu), &mut out.cpu, &q).unwrap(),
            &terms(false),
            accumulate,
        )
        .unwrap();
        gpu.mul_sum_periodic(
            LimbsMut::new(be(&gpu), &mut out.gpu, &q).unwrap(),
            &terms(true),
            accumulate,
        )
        .unwrap();
        let got = download(&cpu, &out.cpu, &all, &q);
        assert_same(
            &format!("mul_sum_periodic, accumulate {accumulate}"),
            &got,
            &download(&gpu, &out.gpu, &all, &q),
            n,
        );
        let full_terms: Vec<(Limbs<'_>, Limbs<'_>)> = (0..a.len())
            .map(|t| {
                let f = &full[(3 * t + 1) % full.len()].cpu;
                (
                    Limbs::new(be(&cpu), &a[t].cpu, &q).unwrap(),
                    Limbs::new(be(&cpu), f, &q).unwrap(),
                )
            })
            .collect();
        cpu.mul_sum(
            LimbsMut::new(be(&cpu), &mut reference.cpu, &q).unwrap(),
            &full_terms,
            accumulate,
        )
        .unwrap();
        assert_eq!(got, download(&cpu, &reference.cpu, &all, &q));
    }
}

#[test]
fn gpu_periodic_products_match_cpu_logn12() {
    periodic_products("gpu_periodic_products_match_cpu_logn12", Preset::TestFGb);
}

#[test]
fn gpu_periodic_products_match_cpu_logn16() {
    periodic_products("gpu_periodic_products_match_cpu_logn16", Preset::FGb);
}

/// Every backend entry point that takes views, called with a view naming
/// modulus `count` (one past the table): each result, by operation name.
/// `automorphism` and `copy` read no modulus table.
fn unknown_modulus_results(backend: &Arc<dyn Backend>) -> Vec<(&'static str, Result<()>)> {
    let count = backend.moduli().len();
    let n = backend.degree();
    let bad = [0, count];
    let last = [count];
    let good = [0];
    let pos = [0, 1];
    let buf = || backend.allocate(MemoryClass::Temporary, 2, false).unwrap();
    let (a, b, c, d) = (buf(), buf(), buf(), buf());
    let (mut o0, mut o1, mut o2) = (buf(), buf(), buf());
    let read = |buffer| Limbs::unchecked(buffer, &pos, &bad);
    fn write<'a>(buffer: &'a mut hemem_memory::Buffer, moduli: &'a [usize]) -> LimbsMut<'a> {
        LimbsMut::unchecked(buffer, &[0, 1][..moduli.len()], moduli)
    }
    let mut results = vec![
        ("ntt_forward", backend.ntt_forward(write(&mut o0, &bad))),
        ("ntt_inverse", backend.ntt_inverse(write(&mut o0, &bad))),
        (
            "ntt_inverse_into",
            backend.ntt_inverse_into(read(&a), write(&mut o0, &bad)),
        ),
        (
            "binary",
            backend.binary(BinaryOp::Add, read(&a), read(&b), write(&mut o0, &bad)),
        ),
        (
            "binary_assign",
            backend.binary_assign(BinaryOp::Mul, write(&mut o0, &bad), read(&a)),
        ),
        (
            "mul_add_assign",
            backend.mul_add_assign(write(&mut o0, &bad), read(&a), read(&b)),
        ),
        ("negate", backend.negate(write(&mut o0, &bad))),
        (
            "scalar_assign",
            backend.scalar_assign(BinaryOp::Mul, write(&mut o0, &bad), &[1, 1]),
        ),
        (
            "automorphism",
            backend.automorphism(read(&a), GaloisElement(5), write(&mut o0, &bad)),
        ),
        ("rescale", backend.rescale(read(&a), write(&mut o0, &good))),
        (
            "mod_down",
            backend.mod_down(read(&a), 1, write(&mut o0, &good)),
        ),
        (
            "spread_centered",
            backend.spread_centered(Limbs::unchecked(&a, &[1], &last), write(&mut o0, &good)),
        ),
        (
            "mod_up",
            backend.mod_up(
                Limbs::unchecked(&a, &[0], &good),
                None,
                write(&mut o0, &bad),
            ),
        ),
        (
            "uniform_from_seed",
            backend.uniform_from_seed(
                &UniformSeed::new([7; 32], SeedPrf::default()),
                0,
                write(&mut o0, &bad),
            ),
        ),
        (
            "tensor",
            backend.tensor(
                read(&a),
                read(&b),
                read(&c),
                read(&d),
                write(&mut o0, &bad),
                write(&mut o1, &bad),
                write(&mut o2, &bad),
            ),
        ),
        (
            "key_switch_inner_product",
            backend.key_switch_inner_product(
                &[read(&a)],
                &[read(&b)],
                &[read(&c)],
                write(&mut o0, &bad),
                write(&mut o1, &bad),
            ),
        ),
        (
            "key_switch_inner_product_seeded",
            backend.key_switch_inner_product_seeded(
                &[read(&a)],
                None,
                &[read(&b)],
                &UniformSeed::new([7; 32], SeedPrf::default()),
                write(&mut o0, &bad),
                write(&mut o1, &bad),
            ),
        ),
    ];
    {
        let mut outs = [write(&mut o0, &bad), write(&mut o1, &bad)];
        results.push((
            "decompose_mod_up",
            backend.decompose_mod_up(read(&a), 1, &mut outs),
        ));
    }
    let compact = backend
        .allocator()
        .allocate(MemoryClass::Temporary, n * 8)
        .unwrap();
    results.push((
        "expand_coefficients",
        backend.expand_coefficients(&compact, 1, write(&mut o0, &bad)),
    ));
    results.push((
        "mul_sum_periodic",
        backend.mul_sum_periodic(write(&mut o0, &bad), &[(read(&a), read(&b).into())], false),
    ));
    let mut periodic = backend
        .allocator()
        .allocate(MemoryClass::Temporary, 2 * 2 * 8)
        .unwrap();
    results.push((
        "expand_periodic",
        backend.expand_periodic(&[&compact], n / 2, &bad, &mut [&mut periodic]),
    ));
    results.push(("copy", backend.copy(read(&a), write(&mut o0, &bad))));
    results
}

/// Asserts that every listed operation failed with the out-of-range index.
fn assert_unknown_modulus_rejected(
    backend: &Arc<dyn Backend>,
    results: &[(&'static str, Result<()>)],
) {
    let count = backend.moduli().len();
    for (what, result) in results {
        assert_eq!(
            result,
            &Err(Error::LengthMismatch {
                expected: count,
                actual: count + 1,
            }),
            "{what}: modulus index {count} of {count}"
        );
    }
}

#[test]
fn cpu_backend_rejects_unknown_modulus() {
    let params =
        Parameters::from_preset_with(Preset::TestFGb, SecurityCheck::AllowInsecure).unwrap();
    let context = Context::new(params, DeviceSelection::Cpu).unwrap();
    let backend = Arc::clone(context.backend());
    let results = unknown_modulus_results(&backend);
    // The CPU checks indices where it reads its tables: operations that
    // read none accept any index.
    let (unchecked, checked): (Vec<_>, Vec<_>) = results
        .into_iter()
        .partition(|(what, _)| ["automorphism", "copy"].contains(what));
    assert_eq!(unchecked.len(), 2);
    assert_unknown_modulus_rejected(&backend, &checked);
}

#[test]
fn gpu_backend_rejects_unknown_modulus() {
    let Some((_, gpu_ctx)) = contexts("gpu_backend_rejects_unknown_modulus", Preset::TestFGb)
    else {
        return;
    };
    let backend = Arc::clone(gpu_ctx.backend());
    let results = unknown_modulus_results(&backend);
    assert_unknown_modulus_rejected(&backend, &results);
    // Nothing was queued: the stream is still usable.
    backend.synchronize().unwrap();
}

/// On either backend, a view whose position lies beyond its buffer or whose
/// modulus index lies beyond the backend's table cannot be made: the checked
/// constructors return the typed error before any kernel could see it.
fn views_out_of_range_are_typed_errors(backend: &Arc<dyn Backend>) {
    let count = backend.moduli().len();
    let mut buffer = backend.allocate(MemoryClass::Temporary, 2, false).unwrap();
    let mismatch = |expected, actual| Err(Error::LengthMismatch { expected, actual });
    assert_eq!(
        Limbs::with_positions(be(backend), &buffer, &[0, 2], &[0, 1]).map(|_| ()),
        mismatch(2, 3)
    );
    assert_eq!(
        LimbsMut::with_positions(be(backend), &mut buffer, &[1, 0], &[count, 0]).map(|_| ()),
        mismatch(count, count + 1)
    );
    assert_eq!(
        Limbs::new(be(backend), &buffer, &[0, count]).map(|_| ()),
        mismatch(count, count + 1)
    );
    assert!(LimbsMut::new(be(backend), &mut buffer, &[0, count - 1]).is_ok());
}

#[test]
fn cpu_views_out_of_range_are_typed_errors() {
    let params =
        Parameters::from_preset_with(Preset::TestFGb, SecurityCheck::AllowInsecure).unwrap();
    let context = Context::new(params, DeviceSelection::Cpu).unwrap();
    views_out_of_range_are_typed_errors(context.backend());
}

#[test]
fn gpu_views_out_of_range_are_typed_errors() {
    let Some((_, gpu_ctx)) = contexts("gpu_views_out_of_range_are_typed_errors", Preset::TestFGb)
    else {
        return;
    };
    views_out_of_range_are_typed_errors(gpu_ctx.backend());
    gpu_ctx.synchronize().unwrap();
}
