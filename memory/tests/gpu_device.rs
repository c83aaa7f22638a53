//! Opening a GPU: what it reports, and the typed errors around it.

use hemem_memory::testing::gpu_or_skip;
use hemem_memory::{
    BudgetSetting, ConfigError, DeviceError, DriverVersion, Error, GpuDevice, MemoryConfig,
    StreamId,
};

#[test]
fn without_a_driver_every_entry_point_is_a_typed_error() {
    // Runs everywhere: on a machine without libcuda (CI) this is NoGpu, on
    // the GPU machine it opens the device.
    match GpuDevice::open(0) {
        Ok(device) => assert_eq!(device.ordinal(), 0),
        Err(Error::Device(DeviceError::NoGpu { .. })) => {
            assert!(!hemem_memory::cuda::driver_present() || GpuDevice::count().is_err());
        }
        Err(other) => panic!("unexpected error: {other}"),
    }
}

#[test]
fn gpu_device_reports_what_hemem_needs() {
    let Some(device) = gpu_or_skip("gpu_device_reports_what_hemem_needs") else {
        return;
    };
    let info = device.info();
    println!("{info:?}");
    assert!(info.compute_capability >= hemem_memory::cuda::ComputeCapability::MIN);
    assert!(info.driver_version >= DriverVersion::CUDA_13_0);
    assert!(info.memory_pools);
    assert!(info.total_bytes > 0 && info.free_bytes_at_open <= info.total_bytes);
    let memory = device.memory_info().expect("cuMemGetInfo");
    assert!(memory.free <= memory.total);
    // The two streams are distinct and ordered by events without a device sync.
    let a = device.stream(StreamId::Compute).cu_stream();
    let b = device.stream(StreamId::Copy).cu_stream();
    assert_ne!(a, b);
    device
        .order(StreamId::Compute, StreamId::Copy)
        .expect("event");
    device.synchronize(StreamId::Copy).expect("sync");
    assert_eq!(device.take_deferred_error(), None);
}

#[test]
fn gpu_out_of_range_ordinals_and_oversized_budgets_are_refused() {
    let Some(device) = gpu_or_skip("gpu_out_of_range_ordinals_and_oversized_budgets_are_refused")
    else {
        return;
    };
    let count = GpuDevice::count().expect("count");
    assert_eq!(
        GpuDevice::open(count + 7).map(|_| ()),
        Err(DeviceError::DeviceOutOfRange {
            ordinal: count + 7,
            count
        }
        .into())
    );
    let total = device.info().total_bytes;
    let config = MemoryConfig {
        budget: BudgetSetting::Bytes(2 * total),
        ..MemoryConfig::default()
    };
    assert!(matches!(
        hemem_memory::Allocator::gpu(&device, &config),
        Err(Error::Config(ConfigError::BudgetTooLarge { budget, .. })) if budget == 2 * total
    ));
}
