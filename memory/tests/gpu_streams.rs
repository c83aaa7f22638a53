//! Freeing on one stream and reusing on another is ordered by events.

use hemem_memory::testing::gpu_or_skip;
use hemem_memory::{
    Allocator, BudgetSetting, ByteSize, MemoryClass, MemoryConfig, PolicyConfig, StreamId,
};

const MIB: usize = 1 << 20;

#[test]
fn gpu_cross_stream_hand_over_and_reuse_are_ordered() {
    let Some(device) = gpu_or_skip("gpu_cross_stream_hand_over_and_reuse_are_ordered") else {
        return;
    };
    let config = MemoryConfig {
        policy: PolicyConfig::Device,
        budget: BudgetSetting::Bytes(ByteSize::GIB),
        ..MemoryConfig::default()
    };
    let allocator = Allocator::gpu(&device, &config).expect("allocator");
    for round in 0..4u64 {
        // Written on the compute stream, handed to the copy stream, read and
        // freed there.
        let mut a = allocator
            .allocate_on(MemoryClass::Temporary, 8 * MIB, false, StreamId::Compute)
            .expect("alloc");
        let words: Vec<u64> = (0..a.words() as u64).map(|i| i ^ round).collect();
        allocator.upload(&mut a, 0, &words).expect("upload");
        allocator.hand_over(&mut a, StreamId::Copy).expect("event");
        assert_eq!(a.stream(), Some(StreamId::Copy));
        let mut back = vec![0u64; a.words()];
        allocator
            .download(&a, 0, &mut back)
            .expect("download on copy");
        assert!(back == words);
        drop(a);
        // The pool may hand the same block out on the compute stream; the
        // driver orders the reuse after the free on the copy stream.
        let mut b = allocator
            .allocate_on(MemoryClass::Temporary, 8 * MIB, false, StreamId::Compute)
            .expect("alloc");
        allocator.zero(&mut b).expect("zero");
        let mut back = vec![1u64; b.words()];
        allocator.download(&b, 0, &mut back).expect("download");
        assert!(back.iter().all(|&w| w == 0));
        // A device copy between buffers of different streams is ordered both ways.
        let mut c = allocator
            .allocate_on(MemoryClass::Temporary, 8 * MIB, false, StreamId::Copy)
            .expect("alloc");
        allocator.copy(&b, 0, &mut c, 0, b.words()).expect("copy");
        drop(b);
        allocator.download(&c, 0, &mut back).expect("download");
        assert!(back.iter().all(|&w| w == 0));
    }
    assert_eq!(device.take_deferred_error(), None);
}
