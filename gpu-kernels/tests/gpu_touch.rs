//! The touch kernels write the pattern the host expects and find every
//! changed word, in pooled and managed memory.

use hemem_gpu_kernels::launch::touch;
use hemem_gpu_kernels::{TestKernels, pattern_word};
use hemem_memory::testing::gpu_or_skip;
use hemem_memory::{
    Allocator, BudgetSetting, ByteSize, MemoryClass, MemoryConfig, Placement, PolicyConfig,
};

#[test]
fn gpu_touch_kernels_write_and_verify_the_pattern() {
    let Some(device) = gpu_or_skip("gpu_touch_kernels_write_and_verify_the_pattern") else {
        return;
    };
    let kernels = TestKernels::load(&device).expect("PTX loads");
    let config = MemoryConfig {
        policy: PolicyConfig::Static,
        budget: BudgetSetting::Bytes(ByteSize::GIB),
        ..MemoryConfig::default()
    };
    let allocator = Allocator::gpu(&device, &config).expect("allocator");
    for (class, placement) in [
        (MemoryClass::Temporary, Placement::DevicePool),
        (MemoryClass::Ciphertext, Placement::Managed),
    ] {
        let mut b = allocator.allocate(class, (1 << 20) + 24).expect("alloc");
        assert_eq!(b.placement(), placement);
        touch::fill(&kernels, &allocator, &mut b, 42).expect("fill");
        assert_eq!(
            touch::count_mismatches(&kernels, &allocator, &b, 42).expect("verify"),
            0
        );
        assert_eq!(
            touch::count_mismatches(&kernels, &allocator, &b, 43).expect("verify"),
            b.words() as u64
        );
        let mut back = vec![0u64; b.words()];
        allocator.download(&b, 0, &mut back).expect("download");
        let wrong = back
            .iter()
            .enumerate()
            .filter(|&(i, &w)| w != pattern_word(42, i as u64))
            .count();
        assert_eq!(wrong, 0, "{placement}: host and device patterns differ");
        allocator.upload(&mut b, 1000, &[7, 8]).expect("upload");
        assert_eq!(
            touch::count_mismatches(&kernels, &allocator, &b, 42).expect("verify"),
            2
        );
        touch::read(&kernels, &allocator, &b).expect("read");
    }
    assert_eq!(device.take_deferred_error(), None);
}
