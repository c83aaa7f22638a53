//! What `hemem bootstrap` reports on one device: the figures of the run
//! ([`Report`], one JSON object with `--json`) and the lines it prints
//! without.

use hemem_memory::Residency;
use serde::Serialize;

use super::super::report::{human_bytes, print_by_class};
use super::runs::{ChainStep, Measured};

/// The run's figures (`--json` prints them as one object).
#[derive(Debug, Serialize)]
pub(super) struct Report {
    /// Where `--record-trace` wrote the run's allocation trace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_written: Option<String>,
    /// Where the `profiled` policy's replay first departed from its
    /// recording (with `--on-divergence static`; placement by class after).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_divergence: Option<String>,
    pub preset: String,
    pub device: String,
    pub memory_policy: String,
    pub slots: usize,
    pub complex: bool,
    pub iterations: usize,
    /// Ciphertexts per bootstrap call (`--batch`); `bootstrap_ms` is per
    /// ciphertext.
    pub batch: usize,
    /// The most ciphertexts run together after the budget refused larger
    /// batches (`bootstrap_many` halves a refused batch); absent when the
    /// whole batch fit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sub_batch: Option<usize>,
    /// Generating the keys and encoding the DFT diagonals (without `--keys`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_setup_ms: Option<f64>,
    /// Loading the key files (with `--keys`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_load_ms: Option<f64>,
    /// Encoding the DFT diagonals after loading the keys (with `--keys`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub constant_setup_ms: Option<f64>,
    /// Bytes of the bootstrap key file (with `--keys`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_file_bytes: Option<u64>,
    pub median_ms: f64,
    pub max_abs_error: f64,
    pub precision_bits: f64,
    pub output_level: usize,
    pub keys: usize,
    pub key_set_bytes: usize,
    /// Bytes of DFT diagonals held, as stored.
    pub constant_bytes: usize,
    /// The same diagonals' bytes if they were kept encoded.
    pub constant_encoded_bytes: usize,
    /// `compact`, `encoded` or `mixed` (what `fit` resolved to).
    pub diagonal_storage: &'static str,
    /// With `--batch`: how many ciphertexts share each expansion of a
    /// compact diagonal (1 when every diagonal is compact).
    pub shared_expansions: usize,
    /// Keys whose uniform halves `fit` stored (0 with any other
    /// `--diagonals`; `--expand-keys` stores every key's beforehand).
    pub keys_expanded: usize,
    /// The function that expanded the generated keys' seeds (`ChaCha12`,
    /// `ChaCha20`); none for keys loaded from a file.
    pub uniform_prf: Option<&'static str>,
    /// `single` or `double` hoisting in the linear transforms.
    pub hoisting: &'static str,
    /// The DFTs' BSGS ratio (log2).
    pub log_bsgs_ratio: i32,
    pub sse: bool,
    pub peak_bytes_by_class: serde_json::Map<String, serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_device_bytes_by_class: Option<serde_json::Map<String, serde_json::Value>>,
    /// GPU runs: the same peak when key setup (keys, diagonals, tables)
    /// ended, before the first bootstrap.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub setup_peak_device_resident_bytes: Option<u64>,
    /// GPU runs: the most bytes the device pool held at once by the pool's
    /// own count (the physical pages the paged pool created; the driver's
    /// `CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH` for its pool); under `planned`,
    /// everything hemem holds on the device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool_peak_bytes: Option<u64>,
    /// GPU runs: the residency manager's figures (see
    /// [`ResidencyFigures`]).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub residency: Option<ResidencyFigures>,
    /// The process's peak resident set (Linux `VmHWM`), host memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_rss_bytes: Option<u64>,
    /// With `--chain`: every bootstrap of the chain.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub chain: Vec<ChainStep>,
    /// With `--chain`: the first bootstrap's bits minus the worst one's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chain_spread_bits: Option<f64>,
    /// Each bootstrap's figures.
    #[serde(flatten)]
    pub measured: Measured,
}

impl Report {
    /// Prints the report: one JSON object with `json`, else a few lines.
    pub(super) fn print(&self, json: bool) -> anyhow::Result<()> {
        if json {
            out!("{}", serde_json::to_string_pretty(self)?);
            return Ok(());
        }
        out!(
            "{} bootstrap of {} {} slots on {}: median {:.1} ms over {} run{}, {:.2} bits (max error {:.3e}), output level {}",
            self.preset,
            self.slots,
            if self.complex { "complex" } else { "real" },
            self.device,
            self.median_ms,
            self.iterations,
            if self.iterations == 1 { "" } else { "s" },
            self.precision_bits,
            self.max_abs_error,
            self.output_level
        );
        let setup = match (self.key_setup_ms, self.key_load_ms) {
            (Some(ms), _) => format!("key setup {:.1} s", ms / 1e3),
            (None, Some(ms)) => format!(
                "keys loaded in {:.2} s, diagonals encoded in {:.1} s",
                ms / 1e3,
                self.constant_setup_ms.unwrap_or(0.0) / 1e3
            ),
            (None, None) => String::new(),
        };
        out!(
            "{setup}; {} keys, {}{}; constants {} ({}, {} encoded); SSE {}",
            self.keys,
            human_bytes(self.key_set_bytes as u64),
            match self.keys_expanded {
                0 => String::new(),
                n => format!(" ({n} stored in full)"),
            },
            human_bytes(self.constant_bytes as u64),
            self.diagonal_storage,
            human_bytes(self.constant_encoded_bytes as u64),
            if self.sse { "yes" } else { "no" }
        );
        if let Some(spread) = self.chain_spread_bits {
            out!(
                "chain of {}: every bootstrap within {spread:.2} bits of the first",
                self.chain.len()
            );
        }
        print_by_class("peak memory by class:", &self.peak_bytes_by_class)?;
        if let Some(rss) = self.peak_rss_bytes {
            out!("peak resident set (host): {}", human_bytes(rss));
        }
        if let Some(r) = &self.residency {
            out!(
                "peak device-resident bytes: {} (budget {})",
                human_bytes(r.peak_device_resident_bytes),
                human_bytes(r.device_budget_bytes)
            );
        }
        if let Some(path) = &self.trace_written {
            out!("allocation trace written to {path}");
        }
        if let Some(divergence) = &self.policy_divergence {
            out!("the profiled replay left its recording ({divergence}); placed by class after");
        }
        Ok(())
    }
}

/// The residency manager's figures at the end of a GPU run (present where
/// it manages a budget).
#[derive(Debug, Serialize)]
pub(super) struct ResidencyFigures {
    /// GPU runs: the most device-resident bytes the residency manager saw
    /// (pool footprint plus resident managed bytes), against the budget.
    pub peak_device_resident_bytes: u64,
    pub device_budget_bytes: u64,
    /// `planned`: bytes of the streamed objects (keys and diagonals, held in
    /// pinned host memory), and of those fetched ahead of use in the run.
    pub streamed_bytes: u64,
    pub prefetched_bytes: u64,
    /// `planned`: the most pool bytes held at once by everything but the
    /// streamed objects (ciphertexts, temporaries, tables).
    pub others_peak_bytes: u64,
    /// `planned`: the streamed bytes kept resident across bootstraps, and the
    /// largest operation's streamed bytes.
    pub stable_bytes: u64,
    pub largest_step_bytes: u64,
    /// `planned`: the bytes per bootstrap the look-ahead's split is
    /// simulated to fetch, and the floor (Belady's demand schedule over all
    /// the room the budget leaves the streamed objects).
    pub planned_fetch_bytes: u64,
    pub floor_fetch_bytes: u64,
    /// `planned`, where the recorded bootstrap was timed on the device: the
    /// stall model's bootstrap under the chosen split (compute and the
    /// waits for copies, ms), its stalls, the window split's bootstrap in
    /// the same model, and the copy rate the model took (GB/s; measured on
    /// the recorded run, or the PCIe Gen5 default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub planned_run_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub planned_stall_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_run_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_copy_gbps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_copy_rate_measured: Option<bool>,
    /// `planned`: the last timed bootstrap that followed its plan
    /// (`HEMEM_TIME_RUNS=1` times every one), as the device measured it:
    /// its operations' compute and the waits for fetches between them
    /// (ms), the stalls `planned_stall_ms` predicts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_compute_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_wait_ms: Option<f64>,
    /// `planned`: how the recorded order is split (`belady`: per gap
    /// between uses; `window`: a stable set and a sliding window; `stalls`:
    /// the window's split improved on the stall model; `auto`: `stalls`
    /// for one bootstrap, `belady` for a batch), and the plan the recording
    /// was split with (`auto` resolved).
    pub streaming_plan: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split_plan: Option<&'static str>,
    /// `planned`: bootstraps whose operations departed from the recorded
    /// order (the look-ahead stopped there), and the step of the last one.
    pub plan_departures: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_departure_step: Option<usize>,
    /// `planned`: uses of keys or diagonals read in place from pinned host
    /// memory (no device room could be made), and their bytes.
    pub zero_copy_uses: u64,
    pub zero_copy_bytes: u64,
    /// `planned`: the streaming arena's bytes and chunks at the end.
    pub arena_bytes: u64,
    pub arena_chunks: u64,
    /// Times the pool refused a request its accounting had room for.
    pub pool_refusals: u64,
    /// Requests placed after a trim, after a wait for the streams, after
    /// evictions.
    pub refusals_resolved_after: [u64; 3],
    /// The residency manager's eviction order (GPU runs).
    pub eviction: &'static str,
}

impl ResidencyFigures {
    pub(super) fn of(residency: &Residency) -> Self {
        let u = residency.usage();
        Self {
            peak_device_resident_bytes: u.peak_device,
            device_budget_bytes: u.budget,
            streamed_bytes: u.streamed_allocated,
            prefetched_bytes: u.prefetched_bytes,
            others_peak_bytes: u.others_peak,
            stable_bytes: u.stable_bytes,
            largest_step_bytes: u.largest_step_bytes,
            planned_fetch_bytes: u.planned_bytes,
            floor_fetch_bytes: u.floor_bytes,
            planned_run_ms: u.planned_run_ns.map(ms),
            planned_stall_ms: u.planned_stall_ns.map(ms),
            window_run_ms: u.window_run_ns.map(ms),
            model_copy_gbps: u.model_copy_rate.map(|r| r as f64 / 1e9),
            model_copy_rate_measured: u.model_copy_rate_measured,
            measured_compute_ms: u.measured_compute_ns.map(ms),
            measured_wait_ms: u.measured_wait_ns.map(ms),
            streaming_plan: u.streaming_plan.name(),
            split_plan: u.split_plan.map(|p| p.name()),
            plan_departures: u.departures,
            last_departure_step: u.last_departure,
            zero_copy_uses: u.zero_copy_uses,
            zero_copy_bytes: u.zero_copy_bytes,
            arena_bytes: u.arena_bytes,
            arena_chunks: u.arena_chunks,
            pool_refusals: u.pool_refusals,
            refusals_resolved_after: u.refusals_resolved_after,
            eviction: residency.eviction().name(),
        }
    }
}

/// Nanoseconds in milliseconds.
fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}
