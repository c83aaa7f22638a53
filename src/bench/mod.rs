//! The benchmark engines behind `hemem bench`: library code the CLI only
//! parses arguments for, so that tests (and other programs) drive them too.
//!
//! * [`oversub`] — the oversubscription sweep (the hybrid-UM paper's
//!   Figures 11 and 12 and more): presets × budgets × policies × operations,
//!   each cell in its own process with a time limit, to CSV, markdown and PNG.
//! * [`bm_bootstrap`] — the paper's BM-bootstrap: every bootstrappable preset
//!   in sequence as one workload, its allocation trace, and a sweep of the
//!   `profiled` policy's cap on peak pooled bytes (Figure 10).
//! * [`measure`] and [`workload`] — what they (and `hemem bootstrap`) share.

pub mod bm_bootstrap;
pub mod measure;
pub mod oversub;
pub mod workload;

/// The most ciphertexts one benchmarked batch takes (`hemem bootstrap
/// --batch`, the sweep's `bootstrap_batchB`): each is a copy of the input
/// held on the host and the device at once, and a batch the budget refuses
/// is halved anyway, so a larger count only asks for memory no machine has
/// (a batch of 2^30 aborted allocating 24 GB of ciphertext handles).
pub const MAX_BATCH: usize = 1024;
