//! The residency manager on the GPU: managed buffers larger together than
//! the budget, touched in turn, stay under it and keep their contents.

use hemem_memory::testing::gpu_or_skip;
use hemem_memory::{
    Allocator, BudgetSetting, Buffer, ByteSize, MemoryClass, MemoryConfig, Placement, PolicyConfig,
};

const MIB: usize = 1 << 20;

fn pattern(seed: u64, words: usize) -> Vec<u64> {
    (0..words as u64)
        .map(|i| (seed.wrapping_mul(0x100_0000_01B3) ^ i).wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .collect()
}

#[test]
fn gpu_evicted_buffers_come_back_word_for_word() {
    let Some(device) = gpu_or_skip("gpu_evicted_buffers_come_back_word_for_word") else {
        return;
    };
    for policy in [PolicyConfig::Static, PolicyConfig::Managed] {
        let name = policy.kind().name();
        let budget = 256 * ByteSize::MIB;
        let config = MemoryConfig {
            policy,
            budget: BudgetSetting::Bytes(budget),
            ..MemoryConfig::default()
        };
        let allocator = Allocator::gpu(&device, &config).expect(name);
        // 6 × 64 MiB = 384 MiB of managed buffers under a 256 MiB budget;
        // keys are read-mostly, so their evictions unset the advice first.
        let classes = [MemoryClass::Ciphertext, MemoryClass::EvaluationKey];
        let mut buffers: Vec<Buffer> = (0..6)
            .map(|i| {
                let class = classes
                    .get(i % 2)
                    .copied()
                    .unwrap_or(MemoryClass::Ciphertext);
                allocator.allocate(class, 64 * MIB).expect("managed")
            })
            .collect();
        for (i, b) in buffers.iter_mut().enumerate() {
            assert_eq!(b.placement(), Placement::Managed);
            let words = b.words();
            allocator
                .upload(b, 0, &pattern(i as u64, words))
                .expect("upload");
            let usage = allocator.residency_usage().expect("gpu");
            assert!(usage.device_bytes() <= budget, "{name}: {usage:?}");
        }
        for round in 0..3 {
            for (i, b) in buffers.iter().enumerate() {
                let _guard = allocator.prepare(&[b]).expect("fits");
                let usage = allocator.residency_usage().expect("gpu");
                assert!(
                    usage.device_bytes() <= budget,
                    "{name} round {round}: {usage:?}"
                );
                assert_eq!(
                    allocator.residency().and_then(|r| r.is_resident(b.id())),
                    Some(true),
                    "{name}: buffer {i} resident while declared"
                );
            }
        }
        for (i, b) in buffers.iter().enumerate() {
            let mut back = vec![0u64; b.words()];
            allocator.download(b, 0, &mut back).expect("download");
            let expected = pattern(i as u64, b.words());
            let wrong = back.iter().zip(&expected).filter(|(a, e)| a != e).count();
            assert_eq!(wrong, 0, "{name}: buffer {i} has {wrong} wrong words");
        }
        let s = allocator.statistics().placement(Placement::Managed);
        println!(
            "{name}: {} evictions, {} B to host, {} B back to the device",
            s.evictions, s.prefetched_to_host, s.prefetched_to_device
        );
        assert!(s.evictions > 0, "{name}: the budget forced evictions");
        let usage = allocator.residency_usage().expect("gpu");
        assert!(usage.peak_device <= budget, "{name}: {usage:?}");
        assert_eq!(device.take_deferred_error(), None);
    }
}
