//! Stream ordering across the compute and copy streams, for
//! `compute-sanitizer --tool memcheck --track-stream-ordered-races all`.
//!
//! `gpu_cross_stream_reuse_is_ordered` goes through the library's API, which
//! orders every cross-stream use with events: the sanitizer must report
//! nothing. `gpu_race_unordered_cross_stream_use` (ignored: run it only under
//! the sanitizer, as `scripts/gpu-checks-memory.sh` does) makes the mistake
//! on purpose — a kernel on the copy stream writes pooled memory allocated on
//! the compute stream, and the memory is freed on the compute stream, with no
//! event in between — so the sanitizer must flag it, showing the check works.
#![expect(clippy::expect_used, reason = "test helpers outside #[test] functions")]

use hemem_gpu_kernels::launch::touch;
use hemem_gpu_kernels::{DeviceWordsMut, TestKernels};
use hemem_memory::testing::gpu_or_skip;
use hemem_memory::{
    Allocator, BudgetSetting, ByteSize, MemoryClass, MemoryConfig, PolicyConfig, StreamId,
};

const MIB: usize = 1 << 20;

fn allocator(device: &hemem_memory::GpuDevice) -> Allocator {
    let config = MemoryConfig {
        policy: PolicyConfig::Device,
        budget: BudgetSetting::Bytes(ByteSize::GIB),
        ..MemoryConfig::default()
    };
    Allocator::gpu(device, &config).expect("allocator")
}

#[test]
fn gpu_cross_stream_reuse_is_ordered() {
    let Some(device) = gpu_or_skip("gpu_cross_stream_reuse_is_ordered") else {
        return;
    };
    let kernels = TestKernels::load(&device).expect("PTX loads");
    let allocator = allocator(&device);
    for round in 0..4 {
        let mut a = allocator
            .allocate_on(MemoryClass::Temporary, 4 * MIB, false, StreamId::Compute)
            .expect("alloc");
        touch::fill(&kernels, &allocator, &mut a, round).expect("fill on compute");
        // Hand the buffer to the copy stream: its kernels and its free are
        // ordered there, after the compute stream's fill.
        allocator.hand_over(&mut a, StreamId::Copy).expect("event");
        assert_eq!(
            touch::count_mismatches(&kernels, &allocator, &a, round).expect("verify on copy"),
            0
        );
        drop(a);
        // Reuse on the compute stream of what was freed on the copy stream.
        let mut b = allocator
            .allocate_on(MemoryClass::Temporary, 4 * MIB, false, StreamId::Compute)
            .expect("alloc");
        touch::fill(&kernels, &allocator, &mut b, round + 100).expect("fill");
        assert_eq!(
            touch::count_mismatches(&kernels, &allocator, &b, round + 100).expect("verify"),
            0
        );
    }
    device.synchronize(StreamId::Compute).expect("sync");
    device.synchronize(StreamId::Copy).expect("sync");
    assert_eq!(device.take_deferred_error(), None);
}

#[test]
#[ignore = "deliberately racy: run only under compute-sanitizer (scripts/gpu-checks-memory.sh)"]
fn gpu_race_unordered_cross_stream_use() {
    let Some(device) = gpu_or_skip("gpu_race_unordered_cross_stream_use") else {
        return;
    };
    let kernels = TestKernels::load(&device).expect("PTX loads");
    let allocator = allocator(&device);
    for round in 0..4 {
        let mut a = allocator
            .allocate_on(MemoryClass::Temporary, 4 * MIB, false, StreamId::Compute)
            .expect("alloc");
        let view = DeviceWordsMut::new(&mut a).expect("device buffer");
        // SAFETY: NOT upheld, on purpose: the memory was allocated in the
        // compute stream's order and is written here on the copy stream with
        // no event between them, then freed on the compute stream while the
        // copy stream may still be writing it.
        #[allow(unsafe_code)]
        unsafe { touch::fill_async(&kernels, StreamId::Copy, view, round) }.expect("launch");
        drop(a);
    }
    device.synchronize(StreamId::Copy).expect("sync");
    device.synchronize(StreamId::Compute).expect("sync");
}
