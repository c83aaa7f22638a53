//! Small helpers shared by subcommands' reports.

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

/// A byte count for people: `150.0 MiB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    let name = UNITS.get(unit).copied().unwrap_or("B");
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {name}")
    }
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
