//! Key switches, ModDowns and limb NTTs of SlotToCoeff and CoeffToSlot
//! with single and double hoisting (the simulator's cost model, compact
//! diagonals), and the simulated precision of each:
//!
//! ```text
//! cargo run -p hemem-bootstrap --release --example hoisting_counts [PRESET…]
//! ```

use hemem_bootstrap::arith::OpCounts;
use hemem_bootstrap::hoisting::Hoisting;
use hemem_bootstrap::schedule::BootstrapSchedule;
use hemem_bootstrap::simulate::{SimulationOptions, simulate};
use hemem_ckks::params::{Parameters, Preset, SecurityCheck};

fn row(stage: &str, hoisting: Hoisting, c: &OpCounts) {
    println!(
        "  {stage:<12} {:<7} rotations {:>3}  mod_downs {:>3}  ntt_limbs {:>6}  mul_plain {:>4}  rescales {}",
        hoisting.name(),
        c.rotations,
        c.mod_downs,
        c.ntt_limbs,
        c.mul_plain,
        c.rescales
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut presets: Vec<String> = std::env::args().skip(1).collect();
    if presets.is_empty() {
        presets = vec!["FGb".into(), "FTb".into(), "FVb".into()];
    }
    for name in presets {
        let preset: Preset = name.parse()?;
        let params = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure)?;
        let schedule = BootstrapSchedule::recommended(&params)?;
        println!("{preset}:");
        for hoisting in [Hoisting::Single, Hoisting::Double, Hoisting::Auto] {
            let report = simulate(
                &params,
                &schedule,
                &SimulationOptions {
                    hoisting,
                    ..SimulationOptions::default()
                },
            )?;
            row("SlotToCoeff", hoisting, &report.stc_counts);
            row("CoeffToSlot", hoisting, &report.cts_counts);
            println!(
                "  {:<12} {:<7} {:.2} bits",
                "precision",
                hoisting.name(),
                report.precision_bits()
            );
        }
    }
    Ok(())
}
