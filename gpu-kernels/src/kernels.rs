//! [`Kernels`]: the CKKS PTX modules loaded once into a device's context;
//! [`TestKernels`]: the touch and micro-benchmark modules, which only tests
//! and `hemem bench alloc` load.

use std::fmt;
use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx;
use hemem_memory::{DependentLaunch, GpuDevice};

use crate::{Error, Result};

/// The committed PTX a CKKS context loads, by module name (`ptx/<name>.ptx`,
/// from `cuda/<name>.cu`).
pub const PTX_MODULES: [(&str, &str); 5] = [
    ("ckks_ntt", include_str!("../ptx/ckks_ntt.ptx")),
    ("ckks_arith", include_str!("../ptx/ckks_arith.ptx")),
    ("ckks_convert", include_str!("../ptx/ckks_convert.ptx")),
    ("ckks_prf", include_str!("../ptx/ckks_prf.ptx")),
    ("ckks_encode", include_str!("../ptx/ckks_encode.ptx")),
];

/// The same CKKS modules compiled for compute capability 9.0
/// (`ptx/sm90/<name>.ptx`): every kernel starts with
/// `griddepcontrol.wait` / `launch_dependents`, so that it can be launched
/// with programmatic dependent launch. Loaded instead of [`PTX_MODULES`]
/// where [`Kernels::dependent_launch`] is on.
pub const PTX_MODULES_SM90: [(&str, &str); 5] = [
    ("ckks_ntt", include_str!("../ptx/sm90/ckks_ntt.ptx")),
    ("ckks_arith", include_str!("../ptx/sm90/ckks_arith.ptx")),
    ("ckks_convert", include_str!("../ptx/sm90/ckks_convert.ptx")),
    ("ckks_prf", include_str!("../ptx/sm90/ckks_prf.ptx")),
    ("ckks_encode", include_str!("../ptx/sm90/ckks_encode.ptx")),
];

/// The committed PTX of the test and micro-benchmark kernels (buffer touch
/// and verify, chunked addition and butterfly): loaded only by
/// [`TestKernels::load`], never into a CKKS context.
pub const TEST_PTX_MODULES: [(&str, &str); 2] = [
    ("touch", include_str!("../ptx/touch.ptx")),
    ("bench", include_str!("../ptx/bench.ptx")),
];

/// The CKKS kernels (`cuda/ckks_*.cu`).
#[derive(Debug, Clone)]
pub(crate) struct Ckks {
    /// Forward columns phase, `log M` = 5 ..= 8.
    pub(crate) ntt_fwd_cols: [CudaFunction; 4],
    /// Inverse columns phase, `log M` = 5 ..= 8.
    pub(crate) ntt_inv_cols: [CudaFunction; 4],
    /// Forward rows phase, `log M` = 5 ..= 9.
    pub(crate) ntt_fwd_rows: [CudaFunction; 5],
    /// Inverse rows phase, `log M` = 5 ..= 9.
    pub(crate) ntt_inv_rows: [CudaFunction; 5],
    /// Forward rows phase, 16 points per thread, `log M` = 5 ..= 9.
    pub(crate) ntt_fwd_rows16: [CudaFunction; 5],
    /// Inverse rows phase, 16 points per thread, `log M` = 5 ..= 9.
    pub(crate) ntt_inv_rows16: [CudaFunction; 5],
    pub(crate) binary_op: CudaFunction,
    pub(crate) mul_add: CudaFunction,
    pub(crate) mul_sum: CudaFunction,
    pub(crate) negate: CudaFunction,
    pub(crate) scalar_op: CudaFunction,
    pub(crate) scalar_mul_add: CudaFunction,
    pub(crate) sub_then_scale: CudaFunction,
    pub(crate) copy_limbs: CudaFunction,
    pub(crate) tensor: CudaFunction,
    pub(crate) key_switch_inner_product: CudaFunction,
    pub(crate) automorphism: CudaFunction,
    pub(crate) base_convert: CudaFunction,
    pub(crate) spread_centered: CudaFunction,
    pub(crate) uniform_from_seed: CudaFunction,
    pub(crate) key_switch_inner_product_seeded: CudaFunction,
    pub(crate) expand_compact: CudaFunction,
    pub(crate) expand_periodic: CudaFunction,
}

/// The buffer touch and verify kernels (`cuda/touch.cu`).
#[derive(Debug, Clone)]
pub(crate) struct Touch {
    pub(crate) fill: CudaFunction,
    pub(crate) verify: CudaFunction,
    pub(crate) read: CudaFunction,
}

/// The micro-benchmark's kernels (`cuda/bench.cu`).
#[derive(Debug, Clone)]
pub(crate) struct Bench {
    pub(crate) chunk_add: CudaFunction,
    pub(crate) butterfly8: CudaFunction,
}

/// The CKKS kernels of this crate ([`PTX_MODULES`]), loaded into one
/// device's context: what the GPU backend, and so every user, loads. Load it
/// once per device and share it (it is `Send + Sync`; clones share the
/// modules).
#[derive(Clone)]
pub struct Kernels {
    pub(crate) device: GpuDevice,
    pub(crate) ckks: Ckks,
    /// Whether launches use programmatic dependent launch (the sm_90 PTX).
    pub(crate) dependent: bool,
    _modules: Vec<Arc<CudaModule>>,
}

impl fmt::Debug for Kernels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kernels")
            .field("device", &self.device.ordinal())
            .field("dependent_launch", &self.dependent)
            .finish_non_exhaustive()
    }
}

/// The test and micro-benchmark kernels ([`TEST_PTX_MODULES`]: buffer touch
/// and verify, chunked addition and butterfly), loaded into one device's
/// context, apart from [`Kernels`] so that a CKKS context never carries
/// them. For the GPU tests and `hemem bench alloc`.
#[derive(Clone)]
pub struct TestKernels {
    pub(crate) device: GpuDevice,
    pub(crate) touch: Touch,
    pub(crate) bench: Bench,
    _modules: Vec<Arc<CudaModule>>,
}

impl fmt::Debug for TestKernels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestKernels")
            .field("device", &self.device.ordinal())
            .finish_non_exhaustive()
    }
}

impl TestKernels {
    /// Loads the touch and benchmark modules into `device`'s context.
    ///
    /// # Errors
    /// [`Error::Load`], as [`Kernels::load`].
    pub fn load(device: &GpuDevice) -> Result<Self> {
        let [(touch_name, touch_ptx), (bench_name, bench_ptx)] = TEST_PTX_MODULES;
        let touch_module = load(device, touch_name, touch_ptx)?;
        let bench_module = load(device, bench_name, bench_ptx)?;
        Ok(Self {
            device: device.clone(),
            touch: Touch {
                fill: function(&touch_module, "touch_fill")?,
                verify: function(&touch_module, "touch_verify")?,
                read: function(&touch_module, "touch_read")?,
            },
            bench: Bench {
                chunk_add: function(&bench_module, "bench_chunk_add")?,
                butterfly8: function(&bench_module, "bench_chunk_butterfly8")?,
            },
            _modules: vec![touch_module, bench_module],
        })
    }

    /// The device the kernels are loaded on.
    pub fn device(&self) -> &GpuDevice {
        &self.device
    }
}

fn load(device: &GpuDevice, module: &'static str, ptx: &'static str) -> Result<Arc<CudaModule>> {
    device
        .context()
        .load_module(Ptx::from_src(ptx))
        .map_err(|error| Error::Load { module, error })
}

fn function(module: &Arc<CudaModule>, name: &'static str) -> Result<CudaFunction> {
    module.load_function(name).map_err(|error| Error::Load {
        module: name,
        error,
    })
}

/// The NTT kernels by phase size (`cuda/ckks_ntt.cu`).
const NTT_FWD_COLS: [&str; 4] = [
    "ntt_fwd_cols_5",
    "ntt_fwd_cols_6",
    "ntt_fwd_cols_7",
    "ntt_fwd_cols_8",
];
const NTT_INV_COLS: [&str; 4] = [
    "ntt_inv_cols_5",
    "ntt_inv_cols_6",
    "ntt_inv_cols_7",
    "ntt_inv_cols_8",
];
const NTT_FWD_ROWS: [&str; 5] = [
    "ntt_fwd_rows_5",
    "ntt_fwd_rows_6",
    "ntt_fwd_rows_7",
    "ntt_fwd_rows_8",
    "ntt_fwd_rows_9",
];
const NTT_INV_ROWS: [&str; 5] = [
    "ntt_inv_rows_5",
    "ntt_inv_rows_6",
    "ntt_inv_rows_7",
    "ntt_inv_rows_8",
    "ntt_inv_rows_9",
];

const NTT_FWD_ROWS16: [&str; 5] = [
    "ntt_fwd_rows16_5",
    "ntt_fwd_rows16_6",
    "ntt_fwd_rows16_7",
    "ntt_fwd_rows16_8",
    "ntt_fwd_rows16_9",
];
const NTT_INV_ROWS16: [&str; 5] = [
    "ntt_inv_rows16_5",
    "ntt_inv_rows16_6",
    "ntt_inv_rows16_7",
    "ntt_inv_rows16_8",
    "ntt_inv_rows16_9",
];

fn functions<const K: usize>(
    module: &Arc<CudaModule>,
    names: [&'static str; K],
) -> Result<[CudaFunction; K]> {
    let list = names
        .iter()
        .map(|name| function(module, name))
        .collect::<Result<Vec<_>>>()?;
    list.try_into().map_err(|_| Error::Load {
        module: "ckks_ntt",
        error: cudarc::driver::DriverError(cudarc::driver::sys::CUresult::CUDA_ERROR_NOT_FOUND),
    })
}

impl Kernels {
    /// Loads the CKKS modules into `device`'s context (the driver
    /// JIT-compiles the PTX for the card the first time; it caches the
    /// result). The test kernels are not among them ([`TestKernels`]).
    /// With `launch` enabled for the card
    /// ([`DependentLaunch::enabled_for`]) they are the sm_90 modules
    /// ([`PTX_MODULES_SM90`]) and every launch uses programmatic dependent
    /// launch; otherwise the sm_75 ones ([`PTX_MODULES`]) and plain launches.
    ///
    /// # Errors
    /// [`Error::Memory`] with `DependentLaunchUnsupported` for
    /// [`DependentLaunch::On`] on a card older than compute capability 9.0;
    /// [`Error::Load`] (an old driver refuses PTX 9.0 with
    /// `CUDA_ERROR_UNSUPPORTED_PTX_VERSION`).
    pub fn load(device: &GpuDevice, launch: DependentLaunch) -> Result<Self> {
        let dependent = launch.enabled_for(device.info().compute_capability)?;
        let modules = if dependent {
            PTX_MODULES_SM90
        } else {
            PTX_MODULES
        };
        let [
            (ntt_name, ntt_ptx),
            (arith_name, arith_ptx),
            (convert_name, convert_ptx),
            (prf_name, prf_ptx),
            (encode_name, encode_ptx),
        ] = modules;
        let ntt = load(device, ntt_name, ntt_ptx)?;
        let arith = load(device, arith_name, arith_ptx)?;
        let convert = load(device, convert_name, convert_ptx)?;
        let prf = load(device, prf_name, prf_ptx)?;
        let encode = load(device, encode_name, encode_ptx)?;
        Ok(Self {
            device: device.clone(),
            ckks: Ckks {
                ntt_fwd_cols: functions(&ntt, NTT_FWD_COLS)?,
                ntt_inv_cols: functions(&ntt, NTT_INV_COLS)?,
                ntt_fwd_rows: functions(&ntt, NTT_FWD_ROWS)?,
                ntt_inv_rows: functions(&ntt, NTT_INV_ROWS)?,
                ntt_fwd_rows16: functions(&ntt, NTT_FWD_ROWS16)?,
                ntt_inv_rows16: functions(&ntt, NTT_INV_ROWS16)?,
                binary_op: function(&arith, "binary_op")?,
                mul_add: function(&arith, "mul_add")?,
                mul_sum: function(&arith, "mul_sum")?,
                negate: function(&arith, "negate")?,
                scalar_op: function(&arith, "scalar_op")?,
                scalar_mul_add: function(&arith, "scalar_mul_add")?,
                sub_then_scale: function(&arith, "sub_then_scale")?,
                copy_limbs: function(&arith, "copy_limbs")?,
                tensor: function(&arith, "tensor")?,
                key_switch_inner_product: function(&arith, "key_switch_inner_product")?,
                automorphism: function(&arith, "automorphism")?,
                base_convert: function(&convert, "base_convert")?,
                spread_centered: function(&convert, "spread_centered")?,
                uniform_from_seed: function(&prf, "uniform_from_seed")?,
                key_switch_inner_product_seeded: function(&prf, "key_switch_inner_product_seeded")?,
                expand_compact: function(&encode, "expand_compact")?,
                expand_periodic: function(&ntt, "expand_periodic")?,
            },
            dependent,
            _modules: vec![ntt, arith, convert, prf, encode],
        })
    }

    /// The device the kernels are loaded on.
    pub fn device(&self) -> &GpuDevice {
        &self.device
    }

    /// Whether every launch uses programmatic dependent launch.
    pub fn dependent_launch(&self) -> bool {
        self.dependent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernels of a PTX module: each `.entry`'s name and body.
    fn entries(ptx: &str) -> Vec<(&str, &str)> {
        ptx.split(".entry ")
            .skip(1)
            .map(|chunk| (chunk.split('(').next().unwrap_or(""), chunk))
            .collect()
    }

    /// Whether a PTX instruction reads or writes memory other than the
    /// kernel's parameters and its own stack: any `ld`/`st` (generic or
    /// with a state space, `ldu` included) but `ld.param`, `ld.local`,
    /// `st.local`; atomics and reductions; asynchronous copies, bulk
    /// operations and prefetches.
    fn touches_memory(instruction: &str) -> bool {
        let op = instruction.split_whitespace().next().unwrap_or("");
        let private = ["ld.param", "ld.local", "st.local"]
            .iter()
            .any(|p| op.starts_with(p));
        let memory = [
            "ld.", "ld ", "ldu", "st.", "atom", "red.", "cp.", "prefetch", "multimem",
        ]
        .iter()
        .any(|p| op.starts_with(p) || op == p.trim_end_matches(['.', ' ']));
        memory && !private
    }

    /// Whether a PTX instruction can leave the straight-line start of a
    /// kernel: a branch, a return or exit, a predicated instruction, a call.
    fn leaves_straight_line(instruction: &str) -> bool {
        let op = instruction
            .split_whitespace()
            .next()
            .unwrap_or("")
            .trim_end_matches(';');
        op.starts_with('@')
            || ["bra", "ret", "exit", "call", "brx"]
                .iter()
                .any(|p| op == *p || op.starts_with(&format!("{p}.")))
    }

    #[test]
    fn sm90_ptx_has_the_same_kernels_each_waiting_before_it_touches_memory() {
        for ((name, plain), (name90, ptx)) in PTX_MODULES.into_iter().zip(PTX_MODULES_SM90) {
            assert_eq!(name, name90);
            assert!(ptx.contains(".version 9.0"), "{name}");
            assert!(ptx.contains(".target sm_90"), "{name}");
            assert!(!plain.contains("griddepcontrol"), "{name}: sm_75 PTX");
            let kernels = entries(ptx);
            let names = |list: &[(&str, &str)]| list.iter().map(|(k, _)| k.to_string()).collect();
            let plain_names: Vec<String> = names(&entries(plain));
            assert_eq!(names(&kernels), plain_names, "{name}");
            assert!(!kernels.is_empty(), "{name}");
            for (kernel, body) in kernels {
                // The body's instructions in order, up to the wait: none may
                // touch memory or leave the straight line (so text order is
                // execution order), and the trigger follows the wait.
                let code = body.split_once('{').map_or("", |(_, code)| code);
                let instructions: Vec<&str> = code
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with("//") && !l.starts_with('.'))
                    .collect();
                let wait = instructions
                    .iter()
                    .position(|i| i.starts_with("griddepcontrol.wait"));
                let trigger = instructions
                    .iter()
                    .position(|i| i.starts_with("griddepcontrol.launch_dependents"));
                let (Some(wait), Some(trigger)) = (wait, trigger) else {
                    panic!("{name}: {kernel} lacks the wait or the trigger");
                };
                assert!(wait < trigger, "{name}: {kernel} triggers before it waits");
                for before in instructions.iter().take(wait) {
                    assert!(
                        !touches_memory(before) && !leaves_straight_line(before),
                        "{name}: {kernel}: {before:?} before the wait"
                    );
                }
            }
        }
    }

    #[test]
    fn the_memory_and_control_checks_recognise_what_they_must() {
        for touching in [
            "ld.global.nc.u64 %rd1, [%rd2];",
            "ld.u64 %rd1, [%rd2];",
            "ld.v2.u64 {%rd1, %rd2}, [%rd3];",
            "st.v2.u64 [%rd1], {%rd2, %rd3};",
            "st.shared.u64 [%r1], %rd2;",
            "ld.shared.u64 %rd1, [%r2];",
            "ldu.global.u64 %rd1, [%rd2];",
            "atom.global.add.u64 %rd1, [%rd2], 1;",
            "red.global.add.u64 [%rd1], 1;",
            "cp.async.ca.shared.global [%r1], [%rd1], 16;",
            "prefetch.global.L2 [%rd1];",
        ] {
            assert!(touches_memory(touching), "{touching}");
        }
        for private in [
            "ld.param.u64 %rd1, [binary_op_param_0];",
            "st.local.u64 [%rd1], %rd2;",
            "ld.local.u64 %rd1, [%rd2];",
            "mov.u32 %r1, %ctaid.y;",
            "mul.wide.u32 %rd1, %r1, 8;",
        ] {
            assert!(!touches_memory(private), "{private}");
        }
        for leaving in ["@%p1 bra $L__BB0_2;", "bra.uni $L__BB0_3;", "ret;", "exit;"] {
            assert!(leaves_straight_line(leaving), "{leaving}");
        }
        assert!(!leaves_straight_line("add.s64 %rd1, %rd2, %rd3;"));
    }

    #[test]
    fn embedded_ptx_targets_sm_75_with_isa_9_0_and_names_every_kernel() {
        for (name, ptx) in PTX_MODULES.into_iter().chain(TEST_PTX_MODULES) {
            assert!(ptx.contains(".version 9.0"), "{name}");
            assert!(ptx.contains(".target sm_75"), "{name}");
            assert!(!ptx.contains('\0'), "{name}");
        }
        // What a CKKS context loads holds no test kernel.
        for (name, ptx) in PTX_MODULES {
            for kernel in ["touch_", "bench_"] {
                assert!(
                    !ptx.contains(&format!(".entry {kernel}")),
                    "{name}: {kernel}"
                );
            }
        }
        let [(_, touch), (_, bench)] = TEST_PTX_MODULES;
        let [(_, ntt), (_, arith), (_, convert), (_, prf), (_, encode)] = PTX_MODULES;
        for kernel in NTT_FWD_COLS
            .iter()
            .chain(&NTT_INV_COLS)
            .chain(&NTT_FWD_ROWS)
            .chain(&NTT_INV_ROWS)
        {
            assert!(ntt.contains(&format!(".entry {kernel}(")), "{kernel}");
        }
        assert!(ntt.contains(".entry expand_periodic("));
        for kernel in [
            "binary_op",
            "mul_add",
            "mul_sum",
            "negate",
            "scalar_op",
            "scalar_mul_add",
            "sub_then_scale",
            "copy_limbs",
            "tensor",
            "key_switch_inner_product",
            "automorphism",
        ] {
            assert!(arith.contains(&format!(".entry {kernel}(")), "{kernel}");
        }
        for kernel in ["base_convert", "spread_centered"] {
            assert!(convert.contains(&format!(".entry {kernel}(")), "{kernel}");
        }
        for kernel in ["uniform_from_seed", "key_switch_inner_product_seeded"] {
            assert!(prf.contains(&format!(".entry {kernel}(")), "{kernel}");
        }
        assert!(encode.contains(".entry expand_compact("));
        for kernel in ["touch_fill", "touch_verify", "touch_read"] {
            assert!(touch.contains(&format!(".entry {kernel}(")), "{kernel}");
        }
        for kernel in ["bench_chunk_add", "bench_chunk_butterfly8"] {
            assert!(bench.contains(&format!(".entry {kernel}(")), "{kernel}");
        }
    }
}
