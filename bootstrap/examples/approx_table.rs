//! Prints the approximation errors of EvalMod options (BOOTSTRAP-NOTES
//! §3.2), in x-units, `log2`:
//!
//! ```text
//! cargo run -p hemem-bootstrap --release --example approx_table
//! ```
//!
//! "f64" is the largest `|f(x) − sin(2πx)/(2π)|` of the circuit evaluated in
//! f64 around every integer `|I| < K` at `|ε| ≤ 2^−ρ` (its floor near
//! `2^−45` is f64's: Clenshaw plus the double angles); "bound" is twice the
//! exact Chebyshev tail times the double angles' gain, free of rounding.

use std::f64::consts::PI;

use hemem_bootstrap::approx::arcsine::ArcsineFit;
use hemem_bootstrap::eval_mod::{EvalMod, EvalModConfig};

fn main() -> Result<(), hemem_bootstrap::Error> {
    println!("cosine and double angles: max |f(x) − sin(2πx)/2π| (log2, x-units)");
    println!(
        "{:>4} {:>4} {:>3} {:>6} {:>9} {:>9} {:>9} {:>9}",
        "K", "d", "r", "depth", "f64 ρ=7", "f64 ρ=10", "f64 ρ=14", "bound"
    );
    for (k, d, r) in [
        (16u32, 31usize, 3u32),
        (16, 63, 2),
        (16, 63, 3),
        (23, 63, 3),
        (25, 63, 2),
        (25, 95, 2),
        (25, 127, 1),
        (32, 63, 3),
        (33, 63, 3),
        (40, 63, 3),
        (40, 127, 2),
        (41, 63, 3),
    ] {
        let em = EvalMod::new(EvalModConfig::cosine(k, d, r))?;
        print!("{k:>4} {d:>4} {r:>3} {:>6}", em.depth());
        for rho in [7, 10, 14] {
            let e = em.approximation_error(2f64.powi(-rho), 16);
            print!(" {:>9.2}", e.versus_sine_log2());
        }
        println!(" {:>9.2}", em.approximation_bound().log2());
    }
    println!();
    println!("with arcsine: max |f(x) − ε| (log2, x-units; add ρ for message units)");
    for (k, d, r, deg) in [
        (32u32, 63usize, 3u32, 3usize),
        (40, 127, 2, 3),
        (33, 63, 3, 7),
    ] {
        for rho in [6, 7, 8, 9, 10, 11, 12] {
            let eps = 2f64.powi(-rho);
            let base = EvalModConfig::cosine(k, d, r);
            let taylor = EvalMod::new(base.with_arcsine(deg, ArcsineFit::Taylor))?;
            let s_max = (2.0 * PI * eps * 1.0625).sin();
            let fit = EvalMod::new(base.with_arcsine(deg, ArcsineFit::Interpolated { s_max }))?;
            let plain = EvalMod::new(base)?;
            println!(
                "K={k} d={d} r={r} arcsine {deg}, ρ={rho:>2}: plain sine {:>7.2}  Taylor {:>7.2}  interpolated {:>7.2}",
                plain.approximation_error(eps, 64).versus_identity_log2(),
                taylor.approximation_error(eps, 64).versus_identity_log2(),
                fit.approximation_error(eps, 64).versus_identity_log2(),
            );
        }
    }
    Ok(())
}
