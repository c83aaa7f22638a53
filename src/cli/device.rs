//! `--device` and `--gpu`: where a command runs, parsed in one place for
//! every command that runs a workload (flattened into each command's
//! arguments).

use hemem_ckks::backend::DeviceSelection;

/// Where a command runs.
///
/// The default device is the CPU; the benchmark commands, which measure
/// the GPU, change it to `gpu` with
/// `#[command(mut_arg("device", |a| a.default_value("gpu")))]`.
#[derive(Debug, Clone, clap::Args)]
pub struct DeviceArgs {
    /// Where to run: cpu, gpu (GPU 0, or --gpu N), gpu:N, or auto (the GPU
    /// when one is usable, else the CPU).
    #[arg(long, default_value = "cpu")]
    device: DeviceSelection,
    /// The GPU to use with --device gpu (the same as --device gpu:N).
    #[arg(long, value_name = "N")]
    gpu: Option<usize>,
}

impl DeviceArgs {
    /// The device asked for: `--device`, with `--gpu N` picking the GPU.
    ///
    /// # Errors
    /// `--gpu` with `--device cpu` or `auto` (there is no GPU to pick), or
    /// with `--device gpu:M` for another `M`.
    pub fn selection(&self) -> anyhow::Result<DeviceSelection> {
        match (self.device, self.gpu) {
            (device, None) => Ok(device),
            // `gpu` parses as GPU 0: `--gpu N` picks another.
            (DeviceSelection::Gpu(m), Some(n)) if m == 0 || m == n => Ok(DeviceSelection::Gpu(n)),
            (device, Some(n)) => {
                anyhow::bail!("--gpu {n} needs --device gpu (or gpu:{n}), not {device}")
            }
        }
    }
}

/// A `--devices` entry: a GPU ordinal (`0`), or any `--device` name
/// (`cpu`, `gpu:N`), so that CPU contexts can stand in for devices.
///
/// # Errors
/// The device parser's message, for clap.
pub fn parse_listed(s: &str) -> Result<DeviceSelection, String> {
    match s.trim().parse::<usize>() {
        Ok(ordinal) => Ok(DeviceSelection::Gpu(ordinal)),
        Err(_) => s.trim().parse().map_err(|e| format!("{e}")),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;
    use hemem_ckks::backend::DeviceSelection;
    use rand_chacha::ChaCha8Rng;
    use rand_core::{Rng as _, SeedableRng as _};

    use super::DeviceArgs;

    /// A command with only the device arguments, as each subcommand
    /// flattens them.
    #[derive(Debug, clap::Parser)]
    struct Probe {
        #[command(flatten)]
        device: DeviceArgs,
    }

    fn parse(args: &[&str]) -> anyhow::Result<DeviceSelection> {
        let probe = Probe::try_parse_from(std::iter::once("probe").chain(args.iter().copied()))?;
        probe.device.selection()
    }

    #[test]
    fn devices_parse_into_selections() {
        assert_eq!(parse(&[]).unwrap(), DeviceSelection::Cpu);
        assert_eq!(parse(&["--device", "cpu"]).unwrap(), DeviceSelection::Cpu);
        assert_eq!(parse(&["--device", "auto"]).unwrap(), DeviceSelection::Auto);
        assert_eq!(
            parse(&["--device", "gpu"]).unwrap(),
            DeviceSelection::Gpu(0)
        );
        // Random ordinals, written both ways, agree.
        let seed = 0x15_de71ce;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        for _ in 0..16 {
            let n = (rng.next_u64() % 64) as usize;
            let by_name = parse(&["--device", &format!("gpu:{n}")]).unwrap();
            let by_flag = parse(&["--device", "gpu", "--gpu", &n.to_string()]).unwrap();
            assert_eq!(by_name, DeviceSelection::Gpu(n), "seed {seed}");
            assert_eq!(by_flag, by_name, "seed {seed}");
            assert_eq!(
                parse(&["--device", &format!("gpu:{n}"), "--gpu", &n.to_string()]).unwrap(),
                by_name,
                "seed {seed}"
            );
        }
    }

    /// A `--devices` entry is an ordinal or a `--device` name, the same
    /// device either way.
    #[test]
    fn listed_devices_take_ordinals_and_names() {
        let mut rng = ChaCha8Rng::seed_from_u64(0x15_11575);
        for _ in 0..16 {
            let n = (rng.next_u64() % 64) as usize;
            let by_ordinal = super::parse_listed(&format!(" {n}")).unwrap();
            assert_eq!(by_ordinal, DeviceSelection::Gpu(n));
            assert_eq!(
                super::parse_listed(&format!("gpu:{n}")).unwrap(),
                by_ordinal
            );
        }
        assert_eq!(super::parse_listed("cpu").unwrap(), DeviceSelection::Cpu);
        assert!(super::parse_listed("-1").is_err());
        assert!(super::parse_listed("tpu").is_err());
    }

    #[test]
    fn contradictions_and_unknown_devices_are_refused() {
        for args in [
            &["--device", "cpu", "--gpu", "1"][..],
            &["--device", "auto", "--gpu", "0"],
            &["--device", "gpu:2", "--gpu", "3"],
            &["--device", "tpu"],
            &["--device", "gpu:x"],
            &["--gpu", "-1"],
        ] {
            assert!(parse(args).is_err(), "{args:?}");
        }
    }
}
