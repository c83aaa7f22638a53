//! Progress bars on the terminal: drawn on standard error, and only when it
//! is a terminal and the output is not `--json`. The library reports
//! progress through [`hemem_ckks::progress::Progress`]; this module is the
//! one place that draws it.

use std::io::IsTerminal as _;

use hemem_ckks::progress::Progress;
use indicatif::{ProgressBar, ProgressStyle};

/// Status lines on standard error, silent with `--json` (whose standard
/// output is the one object).
#[derive(Debug, Clone, Copy)]
pub struct Status {
    json: bool,
}

impl Status {
    /// Lines unless `json`.
    pub fn new(json: bool) -> Self {
        Self { json }
    }

    /// Writes `msg` as a line.
    pub fn say(self, msg: &str) {
        if !self.json {
            eprintln!("{msg}");
        }
    }
}

/// A bar with `message` before it, or a hidden one (every call a no-op)
/// when `json` is set or standard error is not a terminal.
pub fn bar(message: &str, json: bool) -> ProgressBar {
    if json || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(0);
    if let Ok(style) =
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(message.to_owned());
    bar
}

/// A [`Progress`] observer that moves `bar`.
pub fn observer(bar: &ProgressBar) -> impl Fn(u64, u64) + Sync + '_ {
    move |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    }
}

/// Runs `work` with a bar named `message` that it reports to, then clears
/// the bar (so the lines printed after it stay tidy).
pub fn with_bar<T>(message: &str, json: bool, work: impl FnOnce(&dyn Progress) -> T) -> T {
    let bar = bar(message, json);
    let result = work(&observer(&bar));
    bar.finish_and_clear();
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_hides_the_bar_and_the_observer_moves_it() {
        let hidden = bar("keys", true);
        assert!(hidden.is_hidden());
        let seen = with_bar("keys", true, |progress| {
            progress.update(1, 3);
            7
        });
        assert_eq!(seen, 7);
        // A bar that is not drawn still counts.
        let counted = ProgressBar::hidden();
        observer(&counted)(2, 5);
        assert_eq!((counted.position(), counted.length()), (2, Some(5)));
    }
}
