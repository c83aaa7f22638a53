//! Prints each preset's bootstrap schedule and its simulated precision (the
//! figures of `docs/BOOTSTRAP-SCHEDULE.md`):
//!
//! ```text
//! cargo run -p hemem-bootstrap --release --example schedule_report [--sweep] [PRESET…]
//! ```
//!
//! `--sweep` also simulates the recommended EvalMod at every `ρ` near the
//! chosen one.
//!
//! It builds schedules through the lower-level
//! `BootstrapSchedule::new(params, choice, slots)` on purpose: it compares
//! several choices (the notes', the recommended one, the one without SSE)
//! for each preset, where a program takes `BootstrapSchedule::recommended`.

#![expect(
    clippy::indexing_slicing,
    reason = "a report script over fixed three-level schedules"
)]

use hemem_bootstrap::ckks::params::{Level, Parameters, Preset};
use hemem_bootstrap::eval_mod::EvalMod;
use hemem_bootstrap::schedule::{
    BootstrapSchedule, ScheduleChoice, arcsine_fit, notes_choice, recommended_choice,
    without_sse_choice,
};
use hemem_bootstrap::simulate::{Noise, SimulationOptions, SimulationReport, simulate};

fn lg(x: f64) -> f64 {
    x.log2()
}

fn describe(choice: &ScheduleChoice) -> String {
    let e = choice.eval_mod;
    let asin = e
        .arcsine
        .map_or(String::from("-"), |a| format!("{}", a.degree));
    format!(
        "rho={} K={} d={} r={} asin={} depth={}{}",
        choice.rho,
        e.k,
        e.cosine_degree,
        e.double_angles,
        asin,
        e.depth(),
        if choice.sse { " SSE" } else { "" }
    )
}

/// BOOTSTRAP-NOTES §3.3: ν ≈ 2^−44·(K/16)·2^(60−S_em)·√((h+1)/193)·√(N/2^16).
fn nu_model(params: &Parameters, s: &BootstrapSchedule) -> f64 {
    let k = f64::from(s.choice.eval_mod.k);
    let h = params.hamming_weight() as f64;
    let n = params.degree().get() as f64;
    2f64.powi(-44)
        * (k / 16.0)
        * 2f64.powf(60.0 - lg(s.s_em))
        * ((h + 1.0) / 193.0).sqrt()
        * (n / 65536.0).sqrt()
}

fn sim(
    params: &Parameters,
    s: &BootstrapSchedule,
    complex: bool,
    noise: Noise,
    extra_nu: f64,
    seed: u64,
) -> Result<SimulationReport, hemem_bootstrap::Error> {
    simulate(
        params,
        s,
        &SimulationOptions {
            complex,
            noise,
            extra_nu,
            seed,
            round_plaintexts: true,
            ..SimulationOptions::default()
        },
    )
}

fn run(
    params: &Parameters,
    label: &str,
    choice: ScheduleChoice,
) -> Result<(), hemem_bootstrap::Error> {
    let s = BootstrapSchedule::new(params, choice, None)?;
    let em = EvalMod::new(choice.eval_mod)?;
    let approx = em.approximation_error(2f64.powi(-(choice.rho as i32)), 8);
    let nu = nu_model(params, &s);
    println!(
        "  [{label}] {}  fail 2^{:.1}  approx: f64 vs sine 2^{:.1}, bound 2^{:.1}, total 2^{:.1} (x-units)  nu_model 2^{:.1}  spare {}",
        describe(&choice),
        s.failure_probability_log2(params),
        approx.versus_sine_log2(),
        lg(em.approximation_bound()),
        approx.versus_identity_log2(),
        lg(nu),
        s.spare_levels
    );
    for complex in [false, true] {
        let mut bits = Vec::new();
        let mut rms = Vec::new();
        let mut last = None;
        for seed in 1..=3u64 {
            let r = sim(params, &s, complex, Noise::Modelled, 0.0, seed)?;
            bits.push(r.precision_bits());
            rms.push(-lg(r.rms_error));
            last = Some(r);
        }
        let quiet = sim(params, &s, complex, Noise::None, 0.0, 1)?;
        let model = sim(params, &s, complex, Noise::Modelled, nu, 1)?;
        let min = bits.iter().copied().fold(f64::INFINITY, f64::min);
        let max = bits.iter().copied().fold(0.0, f64::max);
        if let Some(r) = last {
            println!(
                "    {}: noise {:.1}..{:.1} bits (rms {:.1})  noiseless {:.1}  +nu_model {:.1} | StC err 2^{:.1} CtS err 2^{:.1} (x) max|I| {} | out L{} 2^{:.4} | EvalMod mults {} | rotations {}+{} conj {}",
                if complex { "complex" } else { "real   " },
                min,
                max,
                rms.iter().sum::<f64>() / rms.len() as f64,
                quiet.precision_bits(),
                model.precision_bits(),
                lg(r.stc_error),
                lg(r.cts_error),
                r.max_i,
                r.output_level,
                lg(r.output_scale),
                r.eval_mod_counts.mul_relin,
                r.stc_counts.rotations,
                r.cts_counts.rotations,
                r.cts_counts.conjugations,
            );
        }
    }
    Ok(())
}

fn sweep(params: &Parameters, choice: ScheduleChoice) -> Result<(), hemem_bootstrap::Error> {
    print!("  [sweep rho, real, 2 seeds]");
    for rho in choice.rho.saturating_sub(3)..=choice.rho + 3 {
        let mut c = choice;
        c.rho = rho;
        if let Some(a) = c.eval_mod.arcsine.as_mut() {
            a.fit = arcsine_fit(rho);
        }
        let s = BootstrapSchedule::new(params, c, None)?;
        let bits = (1..=2u64)
            .map(|seed| {
                sim(params, &s, false, Noise::Modelled, 0.0, seed).map(|r| r.precision_bits())
            })
            .collect::<Result<Vec<_>, _>>()?;
        let min = bits.iter().copied().fold(f64::INFINITY, f64::min);
        print!("  {rho}: {min:.1}");
    }
    println!();
    Ok(())
}

fn main() -> Result<(), hemem_bootstrap::Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let do_sweep = args.iter().any(|a| a == "--sweep");
    let named: Vec<Preset> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let presets = if named.is_empty() {
        Preset::HEAAN.to_vec()
    } else {
        named
    };
    for preset in presets {
        let params = Parameters::from_preset(preset)?;
        let s = BootstrapSchedule::recommended(&params)?;
        let enc = params.enc_level();
        let delta_in = params.default_scale(enc)?.0;
        let stc = s.stc_scales(&params, delta_in)?;
        let d = s.stc_diagonal_scales(&params, delta_in)?;
        let q = |l: usize| {
            params
                .q_moduli()
                .get(l)
                .map_or(f64::NAN, |m| m.value() as f64)
        };
        println!(
            "{preset}: N=2^{} slots=2^{} L={} post={} h={} keys={} | in L{} 2^{:.2} | StC d 2^{:.2}/{:.2}/{:.2} on q 2^{:.2}/{:.2}/{:.2} -> 2^{:.2}/{:.2}/{:.2} | q0 2^{:.2} | CtS d 2^{:.2}/{:.2}/{:.2} on q 2^{:.2}/{:.2}/{:.2} -> S_em 2^{:.2} (L{}) | S_x 2^{:.2} -> 2^{:.4} (L{}) | hemem rescale rule ok: {}",
            params.degree().log2(),
            s.log_slots,
            s.top_level,
            s.post_level,
            params.hamming_weight(),
            s.rotation_keys()?.len(),
            enc.0,
            lg(delta_in),
            lg(d[0]),
            lg(d[1]),
            lg(d[2]),
            lg(q(3)),
            lg(q(2)),
            lg(q(1)),
            lg(stc[0]),
            lg(stc[1]),
            lg(stc[2]),
            lg(q(0)),
            lg(s.cts_diagonal_scales[0]),
            lg(s.cts_diagonal_scales[1]),
            lg(s.cts_diagonal_scales[2]),
            lg(q(s.top_level)),
            lg(q(s.top_level - 1)),
            lg(q(s.top_level - 2)),
            lg(s.s_em),
            s.eval_mod_level,
            lg(s.s_x),
            lg(params.default_scale(Level(s.post_level))?.0),
            s.post_level,
            s.stc_passes_hemem_rescale_rule(&params, delta_in)?,
        );
        run(&params, "notes", notes_choice(preset))?;
        if recommended_choice(preset) != notes_choice(preset) {
            run(&params, "recommended", recommended_choice(preset))?;
        }
        if let Some(c) = without_sse_choice(preset) {
            run(&params, "no SSE", c)?;
        }
        if do_sweep {
            sweep(&params, recommended_choice(preset))?;
            if let Some(c) = without_sse_choice(preset) {
                sweep(&params, c)?;
            }
        }
    }
    Ok(())
}
