//! The oversubscription sweep (`hemem bench oversub`): the hybrid-UM paper's
//! per-operation latencies under a device budget (Choi et al., Figures 11 and
//! 12), every policy side by side.
//!
//! A sweep is the product of four axes ([`SweepSpec`]): presets, device
//! budgets ([`Budget`], `none` for the card's free memory), placement
//! policies and operations ([`Operation`]). Each [`Cell`] runs in a child
//! process ([`ChildProcessRunner`]: the current executable re-invoked as
//! `hemem bench oversub-cell`, which calls [`run_cell`] and prints one JSON
//! line) under a time limit, so a crash, a hang or an out-of-memory kill
//! marks that cell ([`CellStatus`]) and the sweep goes on. Every finished
//! cell is appended to the CSV at once; a rerun with the same CSV skips the
//! cells it holds ([`run_sweep`]). [`output`] turns the rows into a markdown
//! table and PNG figures, also from a CSV alone.

mod cell;
pub mod output;
mod runner;
mod sweep;

pub use cell::{
    Budget, Cell, CellRecord, CellSettings, CellStatus, Operation, SweepPolicy, TraceFiles,
    run_cell,
};
pub use runner::{CellRunner, ChildProcessRunner};
pub use sweep::{SweepEvent, SweepSpec, run_sweep};
