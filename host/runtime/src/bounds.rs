//! Bounds on everything a policy controls, enforced where it enters the host.
//!
//! A policy's time and memory are capped per call (see [`super::Limits`]);
//! what it *returns* is bounded here, so no answer can make the host do
//! unbounded work after the call: strings are cut, lists are deduplicated or
//! refused, and log lines are counted per call and per round. Lists the
//! framework checks against its own input (one score per candidate, a
//! permutation of the queue, at most one scale decision per running job) are
//! bounded by those checks; bytes copied out of a call are bounded by the
//! memory cap, since a value must fit in the policy's memory to be returned.

use std::sync::atomic::{AtomicU64, Ordering};

/// Longest policy name, bytes.
pub const MAX_NAME: usize = 64;
/// Longest policy version string, bytes (it must also be semver).
pub const MAX_VERSION: usize = 64;
/// Longest text from a policy the host passes on (a skip, reject or scale
/// reason, a refusal of settings): Kubernetes Event notes are capped at 1 KiB.
pub const MAX_TEXT: usize = 1024;
/// Longest `log` line, bytes; the rest is cut.
pub const MAX_LOG_LINE: usize = 4096;
/// Most `log` lines a single call may write; the rest are counted, not written.
pub const MAX_LOG_LINES_PER_CALL: u64 = 64;
/// Most `log` lines a policy may write in one scheduling round (all calls).
pub const MAX_LOG_LINES_PER_ROUND: u64 = 1024;

/// `text` cut to at most `max` bytes on a character boundary, ending in `…`
/// when cut.
pub fn cut(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max.saturating_sub('…'.len_utf8());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

/// [`inert`], then [`cut`] to [`MAX_TEXT`]: for reasons and messages a
/// policy writes.
pub fn policy_text(text: String) -> String {
    cut(inert(text), MAX_TEXT)
}

/// `text` as data: every character that would act on a terminal or start
/// a line of its own (C0 and C1 controls, DEL, line and paragraph
/// separators, bidirectional overrides) written as an escape (`\n`, `\r`,
/// `\t`, `\u{1b}`), so a policy's text shows as written and never forges a
/// line of Dragon's output or drives the terminal it is read on.
pub fn inert(text: String) -> String {
    if !text.chars().any(acts) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if acts(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Whether `c` does something when printed rather than showing a glyph.
fn acts(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` shown in an error, at most `max` bytes (a borrowed view of [`cut`]).
pub fn preview(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

/// The `log` budget of one policy across its instances: lines written in the
/// current round and lines dropped since the last report of drops.
#[derive(Debug, Default)]
pub(crate) struct LogBudget {
    round_lines: AtomicU64,
    dropped: AtomicU64,
}

impl LogBudget {
    /// Whether one more line may be written, given `call_lines` already
    /// written by the current call; a refused line is counted as dropped.
    pub(crate) fn admit(&self, call_lines: u64) -> bool {
        if call_lines >= MAX_LOG_LINES_PER_CALL
            || self.round_lines.load(Ordering::Relaxed) >= MAX_LOG_LINES_PER_ROUND
        {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        self.round_lines.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Start a new round: returns how many lines were dropped since the last
    /// call to this (or to [`LogBudget::take_dropped`]).
    pub(crate) fn new_round(&self) -> u64 {
        self.round_lines.store(0, Ordering::Relaxed);
        self.take_dropped()
    }

    /// Lines dropped since the last report, reset to zero.
    pub(crate) fn take_dropped(&self) -> u64 {
        self.dropped.swap(0, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inert_text_shows_controls_and_line_breaks_as_escapes() {
        assert_eq!(inert("plain, ünïcode ✓".into()), "plain, ünïcode ✓");
        assert_eq!(
            inert("ok\n  bind forged-pod -> gpu-1\r\x1b[2K\x07\t".into()),
            "ok\\n  bind forged-pod -> gpu-1\\r\\u{1b}[2K\\u{7}\\t"
        );
        // C1 controls, DEL, separators and bidirectional overrides too.
        assert_eq!(
            inert("a\u{85}b\u{7f}c\u{2028}d\u{202e}e".into()),
            "a\\u{85}b\\u{7f}c\\u{2028}d\\u{202e}e"
        );
        // A reason is escaped before it is cut.
        let long = policy_text("\n".repeat(MAX_TEXT));
        assert!(long.len() <= MAX_TEXT && !long.contains('\n'), "{long}");
    }

    #[test]
    fn cut_keeps_short_text_and_cuts_long_text_on_a_character_boundary() {
        assert_eq!(cut("abc".into(), 10), "abc");
        let long = "é".repeat(1000); // 2 bytes each
        let c = cut(long, 101);
        assert!(c.len() <= 101, "{}", c.len());
        assert!(c.ends_with('…'));
        assert!(preview(&"x".repeat(10_000_000), 64).len() < 100);
    }

    #[test]
    fn log_lines_are_capped_per_call_and_per_round_and_drops_counted() {
        let b = LogBudget::default();
        let written = (0..1000).filter(|&i| b.admit(i)).count() as u64;
        assert_eq!(written, MAX_LOG_LINES_PER_CALL);
        assert_eq!(b.take_dropped(), 1000 - MAX_LOG_LINES_PER_CALL);
        // Many calls, each under its own cap, run into the round's.
        let mut written = 0;
        for _ in 0..100 {
            written += (0..MAX_LOG_LINES_PER_CALL).filter(|&i| b.admit(i)).count() as u64;
        }
        assert_eq!(written, MAX_LOG_LINES_PER_ROUND - MAX_LOG_LINES_PER_CALL);
        assert!(b.new_round() > 0);
        assert!(b.admit(0), "a new round writes again");
    }
}
