//! The sweep's axes and its loop: enumerate the cells, skip those the CSV
//! already holds, run the rest one by one and append each record at once.

use std::collections::HashSet;
use std::path::Path;

use super::cell::{Budget, Cell, CellRecord, Operation, SweepPolicy};
use super::output::{append_csv, read_csv};
use super::runner::CellRunner;
use crate::{Error, Result};
use hemem_ckks::prelude::Preset;

/// The axes of a sweep; the cells are their product.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepSpec {
    /// Presets (default FGa, FGb, FVb: the paper's).
    pub presets: Vec<Preset>,
    /// Budgets (default 2, 4, 6 GiB and none).
    pub budgets: Vec<Budget>,
    /// Policies (default the memory system's six; `manual-swap` by name).
    pub policies: Vec<SweepPolicy>,
    /// Operations (default add, mult, rotate, conjugate, bootstrap and a
    /// batch of four bootstraps).
    pub operations: Vec<Operation>,
}

impl Default for SweepSpec {
    fn default() -> Self {
        Self {
            presets: vec![Preset::FGa, Preset::FGb, Preset::FVb],
            budgets: Budget::DEFAULT.to_vec(),
            policies: SweepPolicy::MEMORY.to_vec(),
            operations: Operation::DEFAULT.to_vec(),
        }
    }
}

fn unique<T: PartialEq + Copy>(items: &[T]) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(items.len());
    for &item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

impl SweepSpec {
    /// Every cell, preset by preset, then budget, policy and operation
    /// (repeated axis entries once), leaving out the pairs of policy and
    /// operation that do not exist ([`SweepPolicy::runs`]: `manual-swap`
    /// beside an operation other than `inference`).
    ///
    /// # Errors
    /// [`Error::EmptyAxis`] when an axis is empty;
    /// [`Error::ManualSwapUnsupported`] when no cell is left.
    pub fn cells(&self) -> Result<Vec<Cell>> {
        for (axis, empty) in [
            ("presets", self.presets.is_empty()),
            ("budgets", self.budgets.is_empty()),
            ("policies", self.policies.is_empty()),
            ("operations", self.operations.is_empty()),
        ] {
            if empty {
                return Err(Error::EmptyAxis { axis });
            }
        }
        let mut cells = Vec::new();
        for &preset in &unique(&self.presets) {
            for &budget in &unique(&self.budgets) {
                for &policy in &unique(&self.policies) {
                    for &operation in &unique(&self.operations) {
                        if !policy.runs(operation) {
                            continue;
                        }
                        cells.push(Cell {
                            preset,
                            budget,
                            policy,
                            operation,
                        });
                    }
                }
            }
        }
        if cells.is_empty() {
            let operation = self.operations.first().map(Operation::to_string);
            return Err(Error::ManualSwapUnsupported {
                operation: operation.unwrap_or_default(),
            });
        }
        Ok(cells)
    }
}

/// What the sweep tells its observer (the CLI's progress bar).
#[derive(Debug, Clone, Copy)]
pub enum SweepEvent<'a> {
    /// The plan: `total` cells, of which `present` are in the CSV already.
    Planned {
        /// Cells of the sweep.
        total: usize,
        /// Cells skipped because the CSV has them.
        present: usize,
    },
    /// A cell starts (`index` counts from 0 among the cells to run).
    Started {
        /// The cell.
        cell: &'a Cell,
        /// Its index among the cells run now.
        index: usize,
    },
    /// A cell is done and written.
    Finished {
        /// Its record.
        record: &'a CellRecord,
    },
}

/// Runs the cells of `spec` that `csv` does not hold yet with `runner`,
/// appending each record to `csv` as soon as it exists (so an interrupted
/// sweep loses at most the cell it was in); returns every record of the
/// sweep's cells, those read from the CSV first.
///
/// # Errors
/// [`Error::EmptyAxis`]; reading or writing the CSV ([`Error::Csv`],
/// [`Error::Io`]). A cell's own failure is its record's status, not an error.
pub fn run_sweep(
    spec: &SweepSpec,
    runner: &mut dyn CellRunner,
    csv: &Path,
    observer: &mut dyn FnMut(SweepEvent<'_>),
) -> Result<Vec<CellRecord>> {
    let cells = spec.cells()?;
    let wanted: HashSet<[String; 4]> = cells.iter().map(Cell::key).collect();
    let existing = if csv.exists() {
        read_csv(csv)?
    } else {
        Vec::new()
    };
    let mut records: Vec<CellRecord> = existing
        .into_iter()
        .filter(|r| wanted.contains(&r.key()))
        .collect();
    let present: HashSet<[String; 4]> = records.iter().map(CellRecord::key).collect();
    let todo: Vec<&Cell> = cells
        .iter()
        .filter(|c| !present.contains(&c.key()))
        .collect();
    observer(SweepEvent::Planned {
        total: cells.len(),
        present: cells.len() - todo.len(),
    });
    for (index, cell) in todo.into_iter().enumerate() {
        observer(SweepEvent::Started { cell, index });
        let record = runner.run(cell);
        append_csv(csv, &record)?;
        observer(SweepEvent::Finished { record: &record });
        records.push(record);
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use hemem_memory::policy::PolicyKind;

    use super::*;
    use crate::bench::oversub::{CellSettings, CellStatus};

    /// Answers from a table and counts what it was asked to run.
    struct Mock {
        settings: CellSettings,
        ran: Vec<Cell>,
    }

    impl CellRunner for Mock {
        fn run(&mut self, cell: &Cell) -> CellRecord {
            self.ran.push(*cell);
            let status = match (cell.policy.memory_policy(), cell.budget.0) {
                (PolicyKind::Device, Some(_)) if cell.operation.is_bootstrap() => {
                    CellStatus::OverBudget
                }
                (PolicyKind::Managed, _) if cell.operation.is_bootstrap() => CellStatus::Timeout,
                _ => CellStatus::Ok,
            };
            let mut r = CellRecord::unmeasured(cell, &self.settings, status, "");
            if status == CellStatus::Ok {
                r.median_ms = Some(2.0);
                r.min_ms = Some(1.0);
                r.max_ms = Some(3.0);
            }
            r
        }

        fn settings(&self) -> &CellSettings {
            &self.settings
        }
    }

    fn mock() -> Mock {
        Mock {
            settings: CellSettings::default(),
            ran: Vec::new(),
        }
    }

    #[test]
    fn the_default_sweep_is_the_product_of_its_axes() {
        let cells = SweepSpec::default().cells().expect("cells");
        assert_eq!(cells.len(), 3 * 4 * 6 * 6);
        let first = cells.first().expect("one");
        assert_eq!(first.key(), ["FGa", "2GiB", "device", "add"]);
        let last = cells.last().expect("one");
        assert_eq!(last.key(), ["FVb", "none", "planned", "bootstrap_batch4"]);
        let distinct: HashSet<_> = cells.iter().map(Cell::key).collect();
        assert_eq!(distinct.len(), cells.len());
        let twice = SweepSpec {
            presets: vec![Preset::TestFGb, Preset::TestFGb],
            budgets: vec![Budget::NONE],
            policies: vec![PolicyKind::Device.into()],
            operations: vec![Operation::Add, Operation::Add, Operation::Mult],
        };
        assert_eq!(twice.cells().expect("cells").len(), 2);
        let empty = SweepSpec {
            policies: Vec::new(),
            ..SweepSpec::default()
        };
        assert!(matches!(
            empty.cells(),
            Err(Error::EmptyAxis { axis: "policies" })
        ));
    }

    /// `manual-swap` makes cells only beside `inference`, in the policy
    /// order given, and the CSV keys it by its own name; a sweep of it
    /// alone over other operations has no cell and says why.
    #[test]
    fn manual_swap_cells_exist_only_for_inference() {
        let spec = SweepSpec {
            presets: vec![Preset::TestFGb],
            budgets: vec![Budget(Some(4 << 30)), Budget::NONE],
            policies: vec![
                PolicyKind::Profiled.into(),
                SweepPolicy::ManualSwap,
                PolicyKind::Planned.into(),
            ],
            operations: vec![Operation::Inference, Operation::Bootstrap],
        };
        let cells = spec.cells().expect("cells");
        // Per budget: profiled and planned × 2 operations, manual-swap × 1.
        assert_eq!(cells.len(), 2 * 5);
        let swapped: Vec<[String; 4]> = cells
            .iter()
            .filter(|c| c.policy == SweepPolicy::ManualSwap)
            .map(Cell::key)
            .collect();
        assert_eq!(
            swapped,
            [
                ["test-FGb", "4GiB", "manual-swap", "inference"].map(String::from),
                ["test-FGb", "none", "manual-swap", "inference"].map(String::from),
            ]
        );
        let order: Vec<String> = cells.iter().take(5).map(|c| c.key()[2].clone()).collect();
        assert_eq!(
            order,
            ["profiled", "profiled", "manual-swap", "planned", "planned"]
        );
        let only = SweepSpec {
            policies: vec![SweepPolicy::ManualSwap],
            operations: vec![Operation::Add, Operation::Bootstrap],
            ..spec.clone()
        };
        assert!(matches!(
            only.cells(),
            Err(Error::ManualSwapUnsupported { operation }) if operation == "add"
        ));

        // Through the sweep: the mock's OverBudget for `device` applies to
        // manual-swap (it runs under `device`), and the CSV reads back.
        let dir = tempfile::tempdir().expect("dir");
        let csv = dir.path().join("swap.csv");
        let mut runner = mock();
        let records = run_sweep(&spec, &mut runner, &csv, &mut |_| {}).expect("sweep");
        assert_eq!(records.len(), cells.len());
        let swap_4gib = records
            .iter()
            .find(|r| r.policy == "manual-swap" && r.budget == "4GiB")
            .expect("manual-swap at 4GiB");
        assert_eq!(swap_4gib.status, CellStatus::OverBudget);
        assert_eq!(read_csv(&csv).expect("csv"), records);
        let mut runner = mock();
        run_sweep(&spec, &mut runner, &csv, &mut |_| {}).expect("rerun");
        assert!(runner.ran.is_empty(), "a rerun found every cell");
    }

    #[test]
    fn a_rerun_skips_the_cells_the_csv_holds() {
        let dir = tempfile::tempdir().expect("dir");
        let csv = dir.path().join("sweep.csv");
        let small = SweepSpec {
            presets: vec![Preset::TestFGb],
            budgets: vec![Budget(Some(2 << 30)), Budget::NONE],
            policies: vec![PolicyKind::Device.into(), PolicyKind::Managed.into()],
            operations: vec![Operation::Add, Operation::Bootstrap],
        };
        let mut runner = mock();
        let mut events = Vec::new();
        let records = run_sweep(&small, &mut runner, &csv, &mut |e| {
            if let SweepEvent::Planned { total, present } = e {
                events.push((total, present));
            }
        })
        .expect("sweep");
        assert_eq!(records.len(), 8);
        assert_eq!(runner.ran.len(), 8);
        let over = records
            .iter()
            .filter(|r| r.status == CellStatus::OverBudget)
            .count();
        assert_eq!(over, 1, "device, 2GiB, bootstrap");
        assert_eq!(read_csv(&csv).expect("csv"), records);

        // Widen the sweep: only the new cells run, the old ones are kept.
        let wider = SweepSpec {
            policies: vec![
                PolicyKind::Device.into(),
                PolicyKind::Managed.into(),
                PolicyKind::Static.into(),
            ],
            ..small.clone()
        };
        let mut runner = mock();
        let records = run_sweep(&wider, &mut runner, &csv, &mut |e| {
            if let SweepEvent::Planned { total, present } = e {
                events.push((total, present));
            }
        })
        .expect("sweep");
        assert_eq!(runner.ran.len(), 4);
        assert!(runner.ran.iter().all(|c| c.policy == PolicyKind::Static));
        assert_eq!(records.len(), 12);
        assert_eq!(read_csv(&csv).expect("csv").len(), 12);
        assert_eq!(events, [(8, 0), (12, 8)]);

        // The same sweep again runs nothing.
        let mut runner = mock();
        run_sweep(&wider, &mut runner, &csv, &mut |_| {}).expect("sweep");
        assert!(runner.ran.is_empty());
    }
}
