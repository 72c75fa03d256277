//! The answers as text.

use std::fmt::Write;

use dragon_scheduler::insight::{PolicyState, Top, Why};
use k8s_openapi::jiff::Timestamp;

/// `ms` since the epoch as a UTC time of day.
fn clock(ms: u64) -> String {
    Timestamp::from_millisecond(ms as i64)
        .map(|t| t.strftime("%H:%M:%S UTC").to_string())
        .unwrap_or_else(|_| format!("{ms} ms"))
}

/// A duration in whole seconds, minutes and hours.
fn span(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

pub fn why(w: &Why) -> String {
    let mut out = String::new();
    let gang = w
        .gang
        .as_ref()
        .map(|g| format!(" (gang {g})"))
        .unwrap_or_default();
    let _ = write!(out, "pod {}{gang}: {}", w.pod, w.state);
    if let Some(node) = &w.node {
        let _ = write!(out, " on node {node}");
    }
    out.push('\n');
    if let Some(now) = &w.now {
        let _ = writeln!(out, "  why now: {now}");
    }
    if !w.story.is_empty() {
        let _ = writeln!(out, "  rounds that tried it:");
        for c in &w.story {
            let when = match c.since_ms == c.until_ms {
                true => clock(c.since_ms),
                false => format!("{} .. {}", clock(c.since_ms), clock(c.until_ms)),
            };
            let rounds = match c.rounds {
                1 => "1 round".to_string(),
                n => format!("{n} rounds"),
            };
            let _ = writeln!(out, "    {when} ({rounds}): {}", c.reason);
        }
    }
    if !w.gates.is_empty() {
        let _ = writeln!(
            out,
            "  held by scheduling gates: {} (removed by whoever set them, e.g. Kueue on admission)",
            w.gates.join(", ")
        );
    }
    if !w.closest.is_empty() && w.state == "pending" {
        let _ = writeln!(out, "  nodes closest to fitting one of its pods:");
        for c in &w.closest {
            let short = match c.short.is_empty() {
                true => "room enough; another constraint rejects it".to_string(),
                false => c.short.join(", "),
            };
            let _ = writeln!(out, "    {}: {short}", c.node);
        }
    }
    if let Some(p) = &w.preemption {
        let _ = writeln!(out, "  preemption: {p}");
    }
    if let Some(e) = &w.estimate {
        match (&e.unavailable, e.start_ms) {
            (Some(why), _) => {
                let _ = writeln!(out, "  estimated start: none ({why})");
            }
            (None, Some(start)) => {
                let _ = writeln!(
                    out,
                    "  estimated start: in {} (at {}), assuming {}",
                    span(start.saturating_sub(e.made_ms)),
                    clock(start),
                    e.assumed
                );
            }
            (None, None) => {
                let _ = writeln!(
                    out,
                    "  estimated start: not within the horizon played forward, assuming {}",
                    e.assumed
                );
            }
        }
    }
    out
}

pub fn top(t: &Top) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<40} {:<14} {:<13} {:>7} {:>5} {:>6}",
        "GANG", "QUEUE", "STATE", "BOUND", "GPUS", "NODES"
    );
    for g in &t.gangs {
        let _ = writeln!(
            out,
            "{:<40} {:<14} {:<13} {:>7} {:>5} {:>6}",
            g.gang,
            g.queue.as_deref().unwrap_or("-"),
            g.state,
            format!("{}/{}", g.bound, g.pods),
            g.gpus,
            g.nodes
        );
    }
    if !t.queues.is_empty() {
        let _ = writeln!(
            out,
            "\n{:<20} {:>9} {:>11} {:>10}",
            "QUEUE", "GPUS USED", "GPUS ASKED", "GUARANTEED"
        );
        for q in &t.queues {
            let _ = writeln!(
                out,
                "{:<20} {:>9} {:>11} {:>10}",
                q.queue, q.used_gpus, q.demand_gpus, q.guaranteed_gpus
            );
        }
    }
    if !t.nodes.is_empty() {
        let _ = writeln!(out, "\n{:<30} {:>9} {:>5}", "NODE", "GPUS USED", "PODS");
        for n in &t.nodes {
            let _ = writeln!(
                out,
                "{:<30} {:>9} {:>5}",
                n.node,
                format!("{}/{}", n.used_gpus, n.gpus),
                n.pods
            );
        }
    }
    out
}

pub fn policy(p: &PolicyState) -> String {
    let mut out = String::new();
    let s = &p.serving;
    let _ = writeln!(
        out,
        "scheduler {}: serving {} {} (interface {}) from {}\n  sha256 {}",
        p.scheduler_name, s.name, s.version, s.interface, s.origin, s.sha256
    );
    if let Some(sh) = &p.shadow {
        let _ = writeln!(
            out,
            "shadow {}: {} same, {} different, {} errors, {} skipped",
            sh.policy, sh.same, sh.different, sh.errors, sh.skipped
        );
        for e in &sh.last_errors {
            let _ = writeln!(out, "  error: {e}");
        }
    }
    match p.reloads.is_empty() {
        true => {
            let _ = writeln!(out, "no reloads since it started");
        }
        false => {
            let _ = writeln!(out, "last reloads:");
            for r in &p.reloads {
                let _ = writeln!(out, "  {} {}: {}", clock(r.at_ms), r.result, r.detail);
            }
        }
    }
    out
}
