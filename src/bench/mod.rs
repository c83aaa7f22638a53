//! The benchmark engines behind `hemem bench`: library code the CLI only
//! parses arguments for, so that tests (and other programs) drive them too.
//!
//! * [`oversub`] — the oversubscription sweep (the hybrid-UM paper's
//!   Figures 11 and 12 and more): presets × budgets × policies × operations,
//!   each cell in its own process with a time limit, to CSV, markdown and PNG.
//! * [`measure`] and [`workload`] — what it (and `hemem bootstrap`) shares.

pub mod measure;
pub mod oversub;
pub mod workload;
