//! `hemem bench alloc`: the allocation micro-benchmark of the reference
//! design (Choi et al., "Hybrid CUDA Unified Memory Management in FHE
//! Workloads"), on the GPU.
//!
//! Under a device budget (default 4 GiB, never above the GPU's free memory):
//!
//! 1. allocation latency: allocate + free pairs, pooled and managed;
//! 2. host→device copy latency into a pooled and a managed buffer (the
//!    allocator's upload, staged through pinned memory);
//! 3. a grid of working sets (50, 100, 150, 200 % of the budget) by pooled
//!    shares (0, 25, 50, 75, 80, 85, 90, 95 %; the rest managed): the working
//!    set is allocated in buffers (pooled ones as `Temporary`, managed ones as
//!    `Ciphertext`, under the static policy), split into batches of about a
//!    quarter of the budget, and two kernels walk every batch's 4 KiB chunks
//!    in a random order — random addition and an 8-point butterfly. Each batch
//!    is declared to the residency manager first, so managed buffers are
//!    prefetched and others evicted: a pass's time includes that traffic.
//!    Combinations whose pooled part cannot fit under the budget beside a
//!    batch are reported as `over_budget` (the `device` policy's failure).
//!
//! Results: `alloc-latency.csv`, `copy-latency.csv`, `bench-alloc.csv` and
//! `bench-alloc.png` in the output folder.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context as _, bail};
use hemem_gpu_kernels::TestKernels;
use hemem_gpu_kernels::launch::bench::{CHUNK_WORDS, ChunkTable};
use hemem_gpu_kernels::launch::touch;
use hemem_memory::{
    Allocator, BudgetSetting, Buffer, ByteSize, ConfigError, GpuDevice, MemoryClass, MemoryConfig,
    Placement, PolicyConfig, StreamId,
};

use crate::cli::report::human_bytes;
use hemem::plot::{self, Panel, Series};

const MIB: u64 = 1 << 20;

/// Arguments of `hemem bench alloc`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Device budget (never above the GPU's free memory).
    #[arg(long, default_value = "4GiB")]
    budget: String,
    /// GPU ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Output folder for the CSV files and the plot.
    #[arg(long, default_value = "bench-alloc")]
    out: PathBuf,
    /// Working sets, in percent of the budget (1 to 10000).
    #[arg(long, value_delimiter = ',', default_value = "50,100,150,200", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    working_sets: Vec<u32>,
    /// Pooled shares of the working set, in percent (0 to 100).
    #[arg(long, value_delimiter = ',', default_value = "0,25,50,75,80,85,90,95", value_parser = clap::value_parser!(u32).range(0..=100))]
    pooled: Vec<u32>,
    /// Measured passes per kernel and combination (after one warm-up pass).
    #[arg(long, default_value_t = 3, value_parser = super::super::at_least_one)]
    passes: usize,
    /// Allocate + free pairs timed per size for pooled memory (managed: at most 50).
    #[arg(long, default_value_t = 1000, value_parser = super::super::at_least_one)]
    alloc_iterations: usize,
}

/// One row of `alloc-latency.csv`.
struct AllocRow {
    placement: Placement,
    bytes: u64,
    iterations: usize,
    mean_us: f64,
    median_us: f64,
    min_us: f64,
}

/// One row of `copy-latency.csv`.
struct CopyRow {
    placement: Placement,
    bytes: u64,
    median_ms: f64,
    gb_per_s: f64,
}

/// One row of `bench-alloc.csv`.
#[derive(Default)]
struct GridRow {
    working_set_pct: u32,
    pooled_pct: u32,
    working_set_bytes: u64,
    pooled_bytes: u64,
    managed_bytes: u64,
    buffers: usize,
    batches: usize,
    status: &'static str,
    alloc_pool_ms: f64,
    alloc_managed_ms: f64,
    add_pass_ms: f64,
    add_kernel_ms: f64,
    butterfly_pass_ms: f64,
    butterfly_kernel_ms: f64,
    htod_bytes_per_pass: f64,
    dtoh_bytes_per_pass: f64,
    evictions_per_pass: f64,
}

fn config(policy: PolicyConfig, budget: u64) -> MemoryConfig {
    MemoryConfig {
        policy,
        budget: BudgetSetting::Bytes(budget),
        pinned_bytes: 0,
        ..MemoryConfig::default()
    }
}

fn median(values: &[f64]) -> f64 {
    hemem::bench::measure::Summary::of(values).map_or(0.0, |s| s.median)
}

fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

fn sync_all(device: &GpuDevice) -> anyhow::Result<()> {
    device.synchronize(StreamId::Compute)?;
    device.synchronize(StreamId::Copy)?;
    if let Some(e) = device.take_deferred_error() {
        return Err(e.into());
    }
    Ok(())
}

fn alloc_latency(
    device: &GpuDevice,
    budget: u64,
    iterations: usize,
) -> anyhow::Result<Vec<AllocRow>> {
    let mut rows = Vec::new();
    for (policy, class, placement, limit) in [
        (
            PolicyConfig::Device,
            MemoryClass::Temporary,
            Placement::DevicePool,
            iterations,
        ),
        (
            PolicyConfig::Managed,
            MemoryClass::Ciphertext,
            Placement::Managed,
            iterations.min(50),
        ),
    ] {
        let allocator = Allocator::gpu(device, &config(policy, budget))?;
        for bytes in [4 << 10, MIB, 64 * MIB, 256 * MIB] {
            if bytes > budget / 2 {
                continue;
            }
            let size = usize::try_from(bytes)?;
            drop(allocator.allocate(class, size)?);
            let mut times = Vec::with_capacity(limit.min(1 << 16));
            for _ in 0..limit.max(1) {
                let t = Instant::now();
                let b = allocator.allocate(class, size)?;
                drop(b);
                times.push(t.elapsed().as_secs_f64() * 1e6);
            }
            let mean_us = mean(&times);
            let min_us = times.iter().copied().fold(f64::MAX, f64::min);
            rows.push(AllocRow {
                placement,
                bytes,
                iterations: times.len(),
                mean_us,
                median_us: median(&times),
                min_us,
            });
        }
        sync_all(device)?;
    }
    Ok(rows)
}

fn copy_latency(device: &GpuDevice, budget: u64) -> anyhow::Result<Vec<CopyRow>> {
    let bytes = (256 * MIB).min(budget / 4);
    let size = usize::try_from(bytes)?;
    let host: Vec<u64> = (0..bytes / 8).collect();
    let mut rows = Vec::new();
    for (policy, class, placement) in [
        (
            PolicyConfig::Device,
            MemoryClass::Temporary,
            Placement::DevicePool,
        ),
        (
            PolicyConfig::Static,
            MemoryClass::Ciphertext,
            Placement::Managed,
        ),
    ] {
        let allocator = Allocator::gpu(device, &config(policy, budget))?;
        let mut buffer = allocator.allocate(class, size)?;
        allocator.upload(&mut buffer, 0, &host)?;
        sync_all(device)?;
        let mut times = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            allocator.upload(&mut buffer, 0, &host)?;
            device.synchronize(StreamId::Compute)?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let median_ms = median(&times);
        rows.push(CopyRow {
            placement,
            bytes,
            median_ms,
            gb_per_s: bytes as f64 / (median_ms * 1e-3) / 1e9,
        });
    }
    Ok(rows)
}

/// Splits `count` items into `parts` near-equal shares.
fn shares(count: usize, parts: usize) -> Vec<usize> {
    let parts = parts.max(1);
    (0..parts)
        .map(|k| count / parts + usize::from(k < count % parts))
        .collect()
}

#[derive(Clone, Copy)]
enum Kernel {
    Add,
    Butterfly,
}

/// Runs one warm-up and `passes` measured passes of `kernel` over every
/// batch; returns (mean pass ms, mean kernel ms, per-pass H→D bytes, D→H
/// bytes, evictions).
fn passes(
    device: &GpuDevice,
    kernels: &TestKernels,
    allocator: &Allocator,
    tables: &mut [ChunkTable<'_>],
    kernel: Kernel,
    passes: usize,
) -> anyhow::Result<(f64, f64, f64, f64, f64)> {
    let (mut pass_ms, mut kernel_ms) = (Vec::new(), Vec::new());
    let before = allocator.statistics().placement(Placement::Managed);
    let mut measured_from = before;
    for pass in 0..=passes {
        if pass == 1 {
            sync_all(device)?;
            measured_from = allocator.statistics().placement(Placement::Managed);
        }
        let start = device.record_timing_event(StreamId::Compute)?;
        let mut spans = Vec::with_capacity(tables.len());
        for table in tables.iter_mut() {
            let _resident = allocator.prepare(&table.buffers())?;
            let k0 = device.record_timing_event(StreamId::Compute)?;
            match kernel {
                Kernel::Add => table.add(kernels)?,
                Kernel::Butterfly => table.butterfly8(kernels)?,
            }
            let k1 = device.record_timing_event(StreamId::Compute)?;
            spans.push((k0, k1));
        }
        let end = device.record_timing_event(StreamId::Compute)?;
        let total = f64::from(start.elapsed_ms(&end)?);
        let mut kernels_total = 0.0;
        for (k0, k1) in &spans {
            kernels_total += f64::from(k0.elapsed_ms(k1)?);
        }
        if pass > 0 {
            pass_ms.push(total);
            kernel_ms.push(kernels_total);
        }
    }
    sync_all(device)?;
    let after = allocator.statistics().placement(Placement::Managed);
    let n = passes.max(1) as f64;
    Ok((
        mean(&pass_ms),
        mean(&kernel_ms),
        (after.prefetched_to_device - measured_from.prefetched_to_device) as f64 / n,
        (after.prefetched_to_host - measured_from.prefetched_to_host) as f64 / n,
        (after.evictions - measured_from.evictions) as f64 / n,
    ))
}

fn grid_row(
    device: &GpuDevice,
    kernels: &TestKernels,
    budget: u64,
    free: u64,
    working_set_pct: u32,
    pooled_pct: u32,
    measured: usize,
) -> anyhow::Result<GridRow> {
    // Buffers of 64 MiB (smaller for small budgets), whole multiples of 8
    // chunks so the butterfly uses every chunk.
    let group = 8 * CHUNK_WORDS as u64 * 8;
    let buffer_bytes = ((64 * MIB).min(budget / 32) / group).max(1) * group;
    let working_set = budget * u64::from(working_set_pct) / 100;
    let buffers = usize::try_from((working_set / buffer_bytes).max(1))?;
    let pooled = (buffers * pooled_pct as usize + 50) / 100;
    let managed = buffers - pooled;
    let mut row = GridRow {
        working_set_pct,
        pooled_pct,
        working_set_bytes: buffers as u64 * buffer_bytes,
        pooled_bytes: pooled as u64 * buffer_bytes,
        managed_bytes: managed as u64 * buffer_bytes,
        buffers,
        ..GridRow::default()
    };
    // Batches of about a quarter of the budget, each with its share of
    // pooled and managed buffers.
    let batches = usize::try_from(row.working_set_bytes.div_ceil(budget / 4).max(1))?;
    row.batches = batches;
    let pooled_shares = shares(pooled, batches);
    let managed_shares = shares(managed, batches);
    let largest_managed = managed_shares.iter().copied().max().unwrap_or(0) as u64 * buffer_bytes;
    // Chunk tables: one word per 4 KiB chunk, pooled, plus rounding.
    let tables = row.working_set_bytes / 512 + batches as u64 * 2 * MIB;
    if row.pooled_bytes + tables + largest_managed > budget {
        row.status = "over_budget";
        return Ok(row);
    }
    if row.working_set_bytes + tables > free.saturating_sub(512 * MIB) {
        row.status = "exceeds_free_memory";
        return Ok(row);
    }
    let allocator = Allocator::gpu(device, &config(PolicyConfig::Static, budget))?;
    let size = usize::try_from(buffer_bytes)?;
    let t = Instant::now();
    let mut pool: Vec<Buffer> = (0..pooled)
        .map(|_| allocator.allocate(MemoryClass::Temporary, size))
        .collect::<Result<_, _>>()?;
    row.alloc_pool_ms = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let mut unified: Vec<Buffer> = (0..managed)
        .map(|_| allocator.allocate(MemoryClass::Ciphertext, size))
        .collect::<Result<_, _>>()?;
    row.alloc_managed_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut groups: Vec<Vec<Buffer>> = Vec::with_capacity(batches);
    for (p, m) in pooled_shares.iter().zip(&managed_shares) {
        let mut batch: Vec<Buffer> = pool.drain(..(*p).min(pool.len())).collect();
        batch.extend(unified.drain(..(*m).min(unified.len())));
        groups.push(batch);
    }
    for (k, batch) in groups.iter_mut().enumerate() {
        for (i, b) in batch.iter_mut().enumerate() {
            touch::fill(kernels, &allocator, b, (k * 1000 + i) as u64)?;
        }
    }
    let mut tables: Vec<ChunkTable<'_>> = groups
        .iter_mut()
        .enumerate()
        .map(|(k, batch)| ChunkTable::new(&allocator, batch, 0xC0FFEE + k as u64))
        .collect::<Result<_, _>>()?;
    let add = passes(
        device,
        kernels,
        &allocator,
        &mut tables,
        Kernel::Add,
        measured,
    )?;
    let butterfly = passes(
        device,
        kernels,
        &allocator,
        &mut tables,
        Kernel::Butterfly,
        measured,
    )?;
    row.add_pass_ms = add.0;
    row.add_kernel_ms = add.1;
    row.butterfly_pass_ms = butterfly.0;
    row.butterfly_kernel_ms = butterfly.1;
    row.htod_bytes_per_pass = (add.2 + butterfly.2) / 2.0;
    row.dtoh_bytes_per_pass = (add.3 + butterfly.3) / 2.0;
    row.evictions_per_pass = (add.4 + butterfly.4) / 2.0;
    let usage = allocator.residency_usage();
    drop(tables);
    drop(groups);
    sync_all(device)?;
    if let Some(u) = usage
        && u.peak_device > budget
    {
        bail!("residency accounting exceeded the budget: {u:?}");
    }
    row.status = "ok";
    Ok(row)
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// CSV text with `header` and one line per row (the `csv` crate quotes
/// whatever needs it); numbers come already formatted, with the precision
/// each column wants.
fn csv_text(
    header: &[&str],
    rows: impl IntoIterator<Item = Vec<String>>,
) -> anyhow::Result<String> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    writer.write_record(header)?;
    for row in rows {
        writer.write_record(&row)?;
    }
    Ok(String::from_utf8(writer.into_inner()?)?)
}

fn grid_csv(budget: u64, rows: &[GridRow]) -> anyhow::Result<String> {
    const HEADER: [&str; 18] = [
        "working_set_pct",
        "pooled_pct",
        "budget_bytes",
        "working_set_bytes",
        "pooled_bytes",
        "managed_bytes",
        "buffers",
        "batches",
        "status",
        "alloc_pool_ms",
        "alloc_managed_ms",
        "add_pass_ms",
        "add_kernel_ms",
        "butterfly_pass_ms",
        "butterfly_kernel_ms",
        "htod_bytes_per_pass",
        "dtoh_bytes_per_pass",
        "evictions_per_pass",
    ];
    csv_text(
        &HEADER,
        rows.iter().map(|r| {
            vec![
                r.working_set_pct.to_string(),
                r.pooled_pct.to_string(),
                budget.to_string(),
                r.working_set_bytes.to_string(),
                r.pooled_bytes.to_string(),
                r.managed_bytes.to_string(),
                r.buffers.to_string(),
                r.batches.to_string(),
                r.status.to_owned(),
                format!("{:.3}", r.alloc_pool_ms),
                format!("{:.3}", r.alloc_managed_ms),
                format!("{:.3}", r.add_pass_ms),
                format!("{:.3}", r.add_kernel_ms),
                format!("{:.3}", r.butterfly_pass_ms),
                format!("{:.3}", r.butterfly_kernel_ms),
                format!("{:.0}", r.htod_bytes_per_pass),
                format!("{:.0}", r.dtoh_bytes_per_pass),
                format!("{:.1}", r.evictions_per_pass),
            ]
        }),
    )
}

fn grid_plot(path: &Path, working_sets: &[u32], rows: &[GridRow]) -> anyhow::Result<()> {
    let panel = |title: &str, value: fn(&GridRow) -> f64| Panel {
        title: title.into(),
        x_label: "pooled share of the working set (%)".into(),
        y_label: "ms per pass (incl. prefetch and eviction)".into(),
        series: working_sets
            .iter()
            .map(|&ws| Series {
                name: format!("working set {ws} % of budget"),
                points: rows
                    .iter()
                    .filter(|r| r.working_set_pct == ws && r.status == "ok")
                    .map(|r| (f64::from(r.pooled_pct), value(r)))
                    .collect(),
            })
            .filter(|s| !s.points.is_empty())
            .collect(),
        x_ticks: |x| format!("{x:.0}"),
    };
    plot::line_panels(
        path,
        &[
            panel("random addition over 4 KiB chunks", |r| r.add_pass_ms),
            panel("8-point butterfly over 4 KiB chunks", |r| {
                r.butterfly_pass_ms
            }),
        ],
    )?;
    Ok(())
}

/// Runs the micro-benchmark.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let ByteSize(budget) = args.budget.parse()?;
    if budget < 64 * MIB {
        bail!("--budget must be at least 64 MiB");
    }
    let device = GpuDevice::open(args.device)?;
    let free = device.memory_info()?.free;
    if budget > free {
        return Err(hemem_memory::Error::from(ConfigError::BudgetTooLarge {
            budget,
            available: free,
        })
        .into());
    }
    let kernels = TestKernels::load(&device)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let info = device.info();
    eprintln!(
        "hemem bench alloc: {} (cc {}, driver {}), {} free, budget {}",
        info.name,
        info.compute_capability,
        info.driver_version,
        human_bytes(free),
        human_bytes(budget)
    );

    let allocs = alloc_latency(&device, budget, args.alloc_iterations)?;
    let csv = csv_text(
        &[
            "placement",
            "bytes",
            "iterations",
            "mean_us",
            "median_us",
            "min_us",
        ],
        allocs.iter().map(|r| {
            vec![
                r.placement.to_string(),
                r.bytes.to_string(),
                r.iterations.to_string(),
                format!("{:.3}", r.mean_us),
                format!("{:.3}", r.median_us),
                format!("{:.3}", r.min_us),
            ]
        }),
    )?;
    write(&args.out.join("alloc-latency.csv"), &csv)?;
    out!("allocation + free (host wall time):");
    out!(
        "  {:<12} {:>10} {:>10} {:>10} {:>10}",
        "placement",
        "bytes",
        "mean µs",
        "median µs",
        "min µs"
    );
    for r in &allocs {
        out!(
            "  {:<12} {:>10} {:>10.2} {:>10.2} {:>10.2}",
            r.placement.name(),
            human_bytes(r.bytes),
            r.mean_us,
            r.median_us,
            r.min_us
        );
    }

    let copies = copy_latency(&device, budget)?;
    let csv = csv_text(
        &["placement", "bytes", "median_ms", "gb_per_s"],
        copies.iter().map(|r| {
            vec![
                r.placement.to_string(),
                r.bytes.to_string(),
                format!("{:.3}", r.median_ms),
                format!("{:.2}", r.gb_per_s),
            ]
        }),
    )?;
    write(&args.out.join("copy-latency.csv"), &csv)?;
    out!("host→device upload (staged through pinned memory, synchronised):");
    for r in &copies {
        out!(
            "  {:<12} {:>10} {:>8.2} ms {:>8.2} GB/s",
            r.placement.name(),
            human_bytes(r.bytes),
            r.median_ms,
            r.gb_per_s
        );
    }

    let mut rows = Vec::new();
    for &ws in &args.working_sets {
        for &share in &args.pooled {
            let row = grid_row(&device, &kernels, budget, free, ws, share, args.passes)?;
            eprintln!(
                "  working set {ws:>3} %, pooled {share:>2} %: {} add {:.1} ms butterfly {:.1} ms",
                row.status, row.add_pass_ms, row.butterfly_pass_ms
            );
            rows.push(row);
        }
    }
    let csv_path = args.out.join("bench-alloc.csv");
    write(&csv_path, &grid_csv(budget, &rows)?)?;
    let png_path = args.out.join("bench-alloc.png");
    grid_plot(&png_path, &args.working_sets, &rows)?;
    out!(
        "working set × pooled share (ms per pass, mean of {} passes):",
        args.passes
    );
    out!(
        "  {:>6} {:>7} {:>13} {:>10} {:>10} {:>10} {:>12}",
        "ws %",
        "pooled %",
        "status",
        "add ms",
        "bfly ms",
        "kernel ms",
        "H→D/pass"
    );
    for r in &rows {
        out!(
            "  {:>6} {:>7} {:>13} {:>10.2} {:>10.2} {:>10.2} {:>12}",
            r.working_set_pct,
            r.pooled_pct,
            r.status,
            r.add_pass_ms,
            r.butterfly_pass_ms,
            r.add_kernel_ms,
            human_bytes(r.htod_bytes_per_pass as u64)
        );
    }
    out!("wrote {} and {}", csv_path.display(), png_path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_split_evenly() {
        assert_eq!(shares(10, 4), vec![3, 3, 2, 2]);
        assert_eq!(shares(0, 3), vec![0, 0, 0]);
        assert_eq!(shares(5, 0), vec![5]);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(mean(&[]), 0.0);
    }

    #[test]
    fn grid_plot_draws_the_ok_rows() {
        let rows: Vec<GridRow> = [(50, 0, 3.0), (50, 50, 2.0), (200, 0, 9.0), (200, 95, 0.0)]
            .into_iter()
            .map(|(ws, share, ms)| GridRow {
                working_set_pct: ws,
                pooled_pct: share,
                add_pass_ms: ms,
                butterfly_pass_ms: 2.0 * ms,
                status: if ms > 0.0 { "ok" } else { "over_budget" },
                ..GridRow::default()
            })
            .collect();
        let dir = std::env::temp_dir().join(format!("hemem-grid-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("grid.png");
        grid_plot(&path, &[50, 200], &rows).expect("plot");
        assert!(std::fs::metadata(&path).is_ok_and(|m| m.len() > 1000));
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn grid_csv_has_one_line_per_row() {
        let rows = [GridRow {
            status: "over_budget",
            ..GridRow::default()
        }];
        let csv = grid_csv(1 << 30, &rows).expect("format");
        assert_eq!(csv.lines().count(), 2);
        let mut reader = csv::Reader::from_reader(csv.as_bytes());
        let header = reader.headers().expect("header").clone();
        let row = reader.records().next().expect("a row").expect("parses");
        assert_eq!((header.len(), row.len()), (18, 18));
        assert_eq!(&row[2], "1073741824");
        assert!(
            csv.lines()
                .nth(1)
                .is_some_and(|l| l.contains("over_budget"))
        );
    }
}
