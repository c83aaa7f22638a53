//! `hemem params`: the preset table, or a saved parameter set.

use std::io::Read;
use std::path::PathBuf;

use anyhow::Context as _;
use hemem_bootstrap::BootstrapKeys;
use hemem_bootstrap::schedule::BootstrapSchedule;
use hemem_ckks::params::{Parameters, Preset, SecurityCheck};
use serde::Serialize;

use super::report::human_bytes;

/// Arguments of `hemem params`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print a JSON array instead of a table.
    #[arg(long)]
    json: bool,
    /// Report a saved parameter set (hemem's binary format) instead of the
    /// presets. Its security is decided again, as for parameters built by
    /// hand: nothing in the file can claim it.
    #[arg(long, value_name = "PATH")]
    file: Option<PathBuf>,
    /// With `--file`: accept insecure parameters (reported as 0 bits).
    #[arg(long, requires = "file")]
    allow_insecure: bool,
}

/// Parameter files are a few hundred bytes; read no more than this.
const MAX_FILE_BYTES: u64 = 1 << 20;

#[derive(Debug, Serialize)]
struct Row {
    name: String,
    log_n: u32,
    log_slots: u32,
    q_primes: usize,
    special_primes: usize,
    dnum: usize,
    log_qp: u32,
    enc_level: usize,
    post_bootstrap_level: Option<usize>,
    hamming_weight: usize,
    security_bits: u32,
    security_source: &'static str,
    switching_key_bytes: u64,
    bootstrap_key_set_bytes: Option<u64>,
    /// What hemem stores for the recommended schedule: compressed,
    /// level-aware keys (SSE keys included).
    bootstrap_key_set_stored_bytes: Option<u64>,
}

fn row(p: &Parameters) -> Row {
    Row {
        name: p.name().to_owned(),
        log_n: p.degree().log2(),
        log_slots: p.log_slots(),
        q_primes: p.q_moduli().len(),
        special_primes: p.p_moduli().len(),
        dnum: p.dnum().get(),
        log_qp: p.log_qp(),
        enc_level: p.enc_level().get(),
        post_bootstrap_level: p.post_bootstrap_level().map(|l| l.get()),
        hamming_weight: p.hamming_weight(),
        security_bits: p.security().bits,
        security_source: p.security().source,
        switching_key_bytes: p.switching_key_bytes(),
        bootstrap_key_set_bytes: p.bootstrap_key_set_bytes(),
        bootstrap_key_set_stored_bytes: BootstrapSchedule::recommended(p)
            .and_then(|s| BootstrapKeys::planned_bytes(&s, p))
            .ok(),
    }
}

/// Loads a parameter file, under the security check `args` asks for.
fn load(path: &PathBuf, allow_insecure: bool) -> anyhow::Result<Parameters> {
    let file = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let check = if allow_insecure {
        SecurityCheck::AllowInsecure
    } else {
        SecurityCheck::Enforce
    };
    Parameters::load(file.take(MAX_FILE_BYTES), check)
        .with_context(|| format!("loading {}", path.display()))
}

/// Prints every HEaaN preset, or the parameter set of `--file`.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let rows = match &args.file {
        Some(path) => vec![row(&load(path, args.allow_insecure)?)],
        None => Preset::HEAAN
            .into_iter()
            .map(|preset| Parameters::from_preset(preset).map(|p| row(&p)))
            .collect::<Result<Vec<_>, _>>()?,
    };
    if args.json {
        out!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    out!(
        "{:<6} {:>6} {:>6} {:>7} {:>7} {:>5} {:>7} {:>4} {:>8} {:>4} {:>9} {:>12} {:>14} {:>12}",
        "preset",
        "log N",
        "slots",
        "Q (L+1)",
        "special",
        "dnum",
        "log QP",
        "enc",
        "post-BTS",
        "h",
        "security",
        "swk size",
        "BTS key set",
        "stored"
    );
    for r in &rows {
        out!(
            "{:<6} {:>6} {:>6} {:>7} {:>7} {:>5} {:>7} {:>4} {:>8} {:>4} {:>9} {:>12} {:>14} {:>12}",
            r.name,
            r.log_n,
            format!("2^{}", r.log_slots),
            r.q_primes,
            r.special_primes,
            r.dnum,
            r.log_qp,
            r.enc_level,
            r.post_bootstrap_level.map_or("-".into(), |l| l.to_string()),
            r.hamming_weight,
            format!("{} bits", r.security_bits),
            human_bytes(r.switching_key_bytes),
            r.bootstrap_key_set_bytes.map_or("-".into(), human_bytes),
            r.bootstrap_key_set_stored_bytes
                .map_or("-".into(), human_bytes),
        );
    }
    out!("");
    out!(
        "security: the HEaaN presets' claimed level, for their exact structure only (sparse secrets;"
    );
    out!(
        "the uniform-ternary HE-standard table bounds log QP: 1747 at N=2^16, 3523 at 2^17, 868 at"
    );
    out!("2^15; it judges everything else). Bootstrapping key set:");
    out!("38 (FG), 42 (FV) or 34 (FT) rotation keys plus relinearisation and conjugation keys,");
    out!("full size; `stored` is what hemem keeps for its recommended schedule: compressed keys");
    out!(
        "(the uniform halves regenerated from a seed) made for the highest level each is used at."
    );
    Ok(())
}
