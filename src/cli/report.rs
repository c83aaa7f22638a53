//! Small helpers shared by subcommands' reports.

use hemem_memory::ByteSize;
use num_complex::Complex64;

/// The largest absolute difference between two slot vectors.
pub fn max_abs_error(a: &[Complex64], b: &[Complex64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).norm())
        .fold(0.0, f64::max)
}

/// Bits of precision for a maximum absolute error, `−log2(error)`.
pub fn precision_bits(error: f64) -> f64 {
    if error > 0.0 {
        -error.log2()
    } else {
        f64::INFINITY
    }
}

/// A byte count for people (`150.0 MiB`): the memory crate's
/// [`ByteSize`] display, which is `bytesize`'s, so every size the CLI prints
/// is spelt one way. `--json` reports keep raw integers.
pub fn human_bytes(bytes: u64) -> String {
    ByteSize(bytes).to_string()
}

/// Prints `title`, then one line per class of `by_class` (a report's
/// `peak_bytes_by_class`-style map of byte counts) in human sizes.
///
/// # Errors
/// A closed standard output.
pub fn print_by_class(
    title: &str,
    by_class: &serde_json::Map<String, serde_json::Value>,
) -> anyhow::Result<()> {
    out!("{title}");
    for (class, bytes) in by_class {
        out!("  {class:<20} {}", human_bytes(bytes.as_u64().unwrap_or(0)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(150 << 20), "150.0 MiB");
        assert_eq!(precision_bits(0.25), 2.0);
    }
}
