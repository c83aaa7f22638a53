//! The sweep's axes, records and a cell measured on the CPU.

use hemem_memory::MemoryClass;

use super::*;

#[test]
fn operations_and_budgets_round_trip() {
    for op in Operation::DEFAULT {
        assert_eq!(op.to_string().parse::<Operation>().ok(), Some(op));
    }
    assert_eq!(
        "bootstrap_batch8".parse::<Operation>().ok(),
        Some(Operation::BootstrapBatch(8))
    );
    assert_eq!(
        "inference".parse::<Operation>().ok(),
        Some(Operation::Inference)
    );
    assert_eq!(Operation::Inference.to_string(), "inference");
    for bad in [
        "div",
        "bootstrap_batch0",
        "bootstrap_batch1025",
        "bootstrap_batch4611686018427387904",
        "bootstrap_batch",
        "bootstrap_batchx",
    ] {
        assert!(
            matches!(
                bad.parse::<Operation>(),
                Err(Error::UnknownOperation { .. })
            ),
            "{bad}"
        );
    }
    for b in Budget::DEFAULT {
        assert_eq!(b.to_string().parse::<Budget>().ok(), Some(b));
    }
    assert_eq!(
        Budget::DEFAULT.map(|b| b.to_string()),
        ["2GiB", "4GiB", "6GiB", "none"]
    );
    assert_eq!(
        "2048MiB".parse::<Budget>().ok(),
        Some(Budget(Some(2 << 30)))
    );
    assert_eq!(Budget(Some(1000)).to_string(), "1000B");
    assert_eq!("1000B".parse::<Budget>().ok(), Some(Budget(Some(1000))));
    for bad in ["0", "lots", ""] {
        assert!(matches!(
            bad.parse::<Budget>(),
            Err(Error::InvalidBudget { .. })
        ));
    }
    assert_eq!(Budget::NONE.setting(), BudgetSetting::Auto);
}

#[test]
fn sweep_policies_round_trip_and_map_to_memory_policies() {
    for p in SweepPolicy::MEMORY {
        assert_eq!(p.to_string().parse::<SweepPolicy>().ok(), Some(p));
        assert_eq!(SweepPolicy::Memory(p.memory_policy()), p);
    }
    let swap: SweepPolicy = " manual-swap".parse().expect("manual-swap");
    assert_eq!(swap, SweepPolicy::ManualSwap);
    assert_eq!(swap.to_string(), "manual-swap");
    assert_eq!(swap.memory_policy(), PolicyKind::Device);
    assert!(swap.runs(Operation::Inference));
    for op in Operation::DEFAULT {
        assert!(!swap.runs(op), "{op}");
        assert!(SweepPolicy::Memory(PolicyKind::Static).runs(op));
    }
    assert_eq!(SweepPolicy::from(PolicyKind::Planned), PolicyKind::Planned);
    for bad in ["manual", "swap", "lru", ""] {
        assert!(
            matches!(
                bad.parse::<SweepPolicy>(),
                Err(Error::UnknownSweepPolicy { .. })
            ),
            "{bad}"
        );
    }
}

#[test]
fn a_manual_swap_cell_of_another_operation_fails_cleanly() {
    let cell = Cell {
        preset: Preset::TestFTb,
        budget: Budget::NONE,
        policy: SweepPolicy::ManualSwap,
        operation: Operation::Rotate,
    };
    let settings = CellSettings {
        device: DeviceSelection::Cpu,
        warmup: 0,
        iterations: 1,
        ..CellSettings::default()
    };
    let record = run_cell(&cell, &settings, &TraceFiles::default());
    assert_eq!(record.status, CellStatus::Failed);
    assert!(record.reason.contains("inference"), "{}", record.reason);
    assert_eq!(record.key(), ["test-FTb", "none", "manual-swap", "rotate"]);
}

#[test]
fn errors_become_statuses() {
    let over = Error::Ckks(hemem_ckks::Error::Memory(hemem_memory::Error::OverBudget {
        requested: 1 << 30,
        placing: None,
        budget: 2 << 30,
        in_use: Box::default(),
    }));
    assert_eq!(CellStatus::of_error(&over), CellStatus::OverBudget);
    let oom = Error::Memory(hemem_memory::Error::OutOfMemory {
        requested: 8,
        placement: hemem_memory::Placement::DevicePool,
        class: MemoryClass::Temporary,
    });
    assert_eq!(CellStatus::of_error(&oom), CellStatus::OutOfMemory);
    assert_eq!(CellStatus::of_error(&Error::Font), CellStatus::Failed);
}

#[test]
fn a_profiled_cell_without_a_recording_fails_cleanly() {
    let cell = Cell {
        preset: Preset::TestFTb,
        budget: Budget::NONE,
        policy: PolicyKind::Profiled.into(),
        operation: Operation::Add,
    };
    let settings = CellSettings {
        device: DeviceSelection::Cpu,
        warmup: 0,
        iterations: 1,
        ..CellSettings::default()
    };
    let record = run_cell(&cell, &settings, &TraceFiles::default());
    assert_eq!(record.status, CellStatus::Failed);
    assert!(record.reason.contains("trace"), "{}", record.reason);
}

#[test]
fn a_cpu_cell_is_measured_and_leaves_gpu_counters_empty() {
    let cell = Cell {
        preset: Preset::TestFTb,
        budget: "2GiB".parse().expect("budget"),
        policy: PolicyKind::Device.into(),
        operation: Operation::Mult,
    };
    let settings = CellSettings {
        device: DeviceSelection::Cpu,
        warmup: 1,
        iterations: 3,
        ..CellSettings::default()
    };
    let record = run_cell(&cell, &settings, &TraceFiles::default());
    assert_eq!(record.status, CellStatus::Ok, "{}", record.reason);
    assert_eq!(record.device, "cpu");
    let (min, median, max) = (
        record.min_ms.expect("min"),
        record.median_ms.expect("median"),
        record.max_ms.expect("max"),
    );
    assert!(min <= median && median <= max);
    assert_eq!(record.gpu_page_faults, None);
    assert_eq!(record.peak_device_resident_bytes, None);
    assert_eq!(record.to_device_bytes, None);
    assert_eq!(record.key(), ["test-FTb", "2GiB", "device", "mult"]);
}
