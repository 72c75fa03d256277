//! A policy that misbehaves on purpose, for the host's tests. Settings pick
//! the fault and the hook: `{"fault": "loop", "hook": "score"}`. With `{}` it
//! behaves (every hook at its SDK default), so a test can load it first and
//! then make it misbehave.
//!
//! A few faults are fixed in the component's bytes instead ([`MODE`]): those
//! of `metadata`, which runs before any settings are known, and `flaky`,
//! which must run under the settings of the policies it is swapped with.

use dragon_policy_sdk::types::*;
use dragon_policy_sdk::{Policy, Refusal, export_policy, log};
use serde::Deserialize;

#[derive(Debug, Default, Deserialize, Clone, Copy, PartialEq)]
#[serde(rename_all = "kebab-case")]
pub enum Fault {
    #[default]
    None,
    /// Spin forever.
    Loop,
    /// Panic (a trap under `panic = "abort"`).
    Trap,
    /// Allocate until something gives.
    MemoryBomb,
    /// Recurse until the stack runs out.
    Recurse,
    /// Return the wrong number of results, unknown indices, absurd waits.
    BadOutput,
    /// An output far larger than asked for (4 million entries).
    HugeOutput,
    /// Call `log` a million times.
    LogFlood,
    /// Output that is long but made of valid parts: a million copies of a
    /// valid pre-filter size; a 10 MB refusal of the settings.
    Repeated,
    /// A `scale` answer with a valid decision next to an invalid one.
    MixedScale,
    /// Valid answers that change from call to call: `score` favours a
    /// different candidate each time it is asked the same question.
    Drift,
    /// Text that would forge lines of the host's output and drive its
    /// terminal: a `log` line, a pre-filter skip and a permit rejection
    /// with line breaks, carriage returns and escape sequences; in any
    /// other hook, a panic (a trap) whose message has them too.
    Forge,
}

/// What [`Fault::Forge`] writes: a line break, then a line as the host
/// prints its binds, then a terminal's clear-line, bell and title escapes.
pub const FORGED: &str = "ok\n  bind forged-pod -> gpu-1\r\u{1b}[2K\u{7}\u{1b}]0;owned\u{7}";

/// The fault fixed in the component: tests rewrite the last 12 bytes of
/// this marker (same length, e.g. `hooks_______`; see
/// `dragon_test_policies::hostile_with_mode`).
/// - `hooks_______`, `long-name___`, `long-version`, `bad-version_`: what
///   `metadata` returns;
/// - `flaky-1in10_`: every tenth call of a scheduling hook traps;
/// - `oversize____`: `pre-filter` asks to place every gang at one worker
///   more than the job has (more pods than it was given room for), which
///   the framework refuses.
#[used]
static MODE: [u8; 34] = *b"HOSTILE_METADATA_MODE=normal______";

/// The mode in [`MODE`], read so the optimiser cannot fold it.
fn mode() -> [u8; 12] {
    // SAFETY: a read of an initialised static of plain bytes.
    let bytes = unsafe { std::ptr::read_volatile(&MODE) };
    let mut mode = [0u8; 12];
    mode.copy_from_slice(&bytes[22..]);
    mode
}

/// A long string for the metadata faults (10 MB).
fn long(c: char) -> String {
    std::iter::repeat_n(c, 10 << 20).collect()
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    #[serde(default)]
    fault: Fault,
    /// Which hook misbehaves (`configure` included).
    #[serde(default)]
    hook: String,
}

const HUGE: usize = 4 << 20;

#[derive(Debug, Default)]
pub struct Hostile {
    fault: Fault,
    hook: String,
    /// Scheduling-hook calls made on this instance (for `flaky-1in10_`
    /// and `drift`).
    calls: std::cell::Cell<u64>,
}

// Unbounded on purpose: the host must stop it.
#[allow(unconditional_recursion)]
#[inline(never)]
fn recurse(depth: u64, sink: &mut [u64; 16]) -> u64 {
    sink[(depth % 16) as usize] = depth;
    let mut local = *sink;
    local[0] = recurse(depth + 1, &mut local);
    local[0] ^ sink[1]
}

impl Hostile {
    fn strike(&self, hook: &str) {
        if hook != "metadata" && hook != "configure" && &mode() == b"flaky-1in10_" {
            let n = self.calls.get() + 1;
            self.calls.set(n);
            if n % 10 == 0 {
                panic!("hostile: call {n} of this instance traps in {hook}");
            }
        }
        if self.hook != hook {
            return;
        }
        match self.fault {
            Fault::None
            | Fault::BadOutput
            | Fault::HugeOutput
            | Fault::Repeated
            | Fault::MixedScale
            | Fault::Drift => {}
            Fault::Forge => {
                log(Level::Warn, FORGED);
                if hook != "pre-filter" && hook != "permit" {
                    panic!("{FORGED}");
                }
            }
            Fault::LogFlood => {
                for i in 0..1_000_000u32 {
                    log(Level::Info, &format!("hostile: line {i}"));
                }
            }
            Fault::Loop => {
                log(Level::Warn, "hostile: looping forever");
                let mut x: u64 = 0;
                loop {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            }
            Fault::Trap => panic!("hostile: trap in {hook}"),
            Fault::MemoryBomb => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            Fault::Recurse => {
                let mut sink = [0u64; 16];
                std::hint::black_box(recurse(0, &mut sink));
            }
        }
    }

    fn bad(&self, hook: &str) -> bool {
        self.hook == hook && self.fault == Fault::BadOutput
    }

    /// How many entries to return where `n` are expected.
    fn len(&self, hook: &str, n: usize) -> usize {
        if self.hook != hook {
            n
        } else if self.fault == Fault::BadOutput {
            n + 1
        } else if self.fault == Fault::HugeOutput {
            HUGE
        } else {
            n
        }
    }
}

impl Policy for Hostile {
    fn metadata(&self) -> PolicyInfo {
        self.strike("metadata");
        let all = [
            Hook::QueueOrder,
            Hook::PreFilter,
            Hook::Filter,
            Hook::Score,
            Hook::Permit,
            Hook::Scale,
        ];
        let mut info = PolicyInfo::new("hostile", env!("CARGO_PKG_VERSION"), &all);
        match &mode() {
            b"hooks_______" => {
                info.hooks = (0..10_000_000).map(|i| all[i % all.len()]).collect();
            }
            b"long-name___" => info.name = long('n'),
            b"long-version" => info.version = long('1'),
            b"bad-version_" => info.version = "one point oh".into(),
            _ => {}
        }
        info
    }

    type Settings = Settings;

    fn configure(&mut self, s: Settings) -> Result<(), Refusal> {
        self.fault = s.fault;
        self.hook = s.hook;
        self.strike("configure");
        if self.hook == "configure" && self.fault == Fault::Repeated {
            return Err(Refusal::new(long('r')));
        }
        Ok(())
    }

    fn queue_order(&self, _now_ms: u64, units: &[Queued], _view: &View) -> Vec<u32> {
        // Faults only on a real queue: the load-time smoke call (an empty
        // queue) passes, so the fault is met while scheduling.
        if units.is_empty() {
            return Vec::new();
        }
        self.strike("queue-order");
        if self.bad("queue-order") {
            return vec![0; units.len() + 1];
        }
        (0..self.len("queue-order", units.len()) as u32).collect()
    }

    fn pre_filter(&self, _now_ms: u64, unit: &Unit, _view: &View) -> PreFilterResult {
        self.strike("pre-filter");
        if self.hook == "pre-filter" && self.fault == Fault::Repeated {
            return PreFilterResult::Proceed(vec![unit.workers; 1_000_000]);
        }
        if self.bad("pre-filter") {
            return PreFilterResult::Proceed(vec![u32::MAX]);
        }
        if &mode() == b"oversize____" && unit.gang {
            return PreFilterResult::Proceed(vec![unit.workers + 1]);
        }
        if self.len("pre-filter", 0) > 0 {
            return PreFilterResult::Skip("x".repeat(HUGE));
        }
        if self.hook == "pre-filter" && self.fault == Fault::Forge {
            return PreFilterResult::Skip(FORGED.into());
        }
        PreFilterResult::Proceed(Vec::new())
    }

    fn filter(&self, _pod: &Placement, nodes: &Candidates, _view: &View) -> Vec<bool> {
        self.strike("filter");
        vec![true; self.len("filter", nodes.index.len())]
    }

    fn score(&self, _pod: &Placement, nodes: &Candidates, _view: &View) -> Vec<u32> {
        self.strike("score");
        let n = nodes.index.len();
        if self.hook == "score" && self.fault == Fault::Drift {
            let call = self.calls.get() + 1;
            self.calls.set(call);
            return (0..n)
                .map(|i| u32::from((i as u64 + call) % n.max(1) as u64 == 0))
                .collect();
        }
        vec![1; self.len("score", n)]
    }

    fn permit(&self, _now_ms: u64, _gang: &GangState) -> PermitResult {
        self.strike("permit");
        if self.bad("permit") {
            return PermitResult::Wait(u64::MAX);
        }
        if self.len("permit", 0) > 0 {
            return PermitResult::Reject("x".repeat(HUGE));
        }
        if self.hook == "permit" && self.fault == Fault::Forge {
            return PermitResult::Reject(FORGED.into());
        }
        PermitResult::Allow
    }

    fn scale(&self, input: &ScaleInput, _view: &View) -> Vec<ScaleDecision> {
        self.strike("scale");
        if self.bad("scale") {
            return vec![ScaleDecision {
                id: u64::MAX,
                workers: 1_000_000,
                reason: "hostile".into(),
            }];
        }
        if self.hook == "scale" && self.fault == Fault::MixedScale {
            // A valid change for the first running job, then a decision far
            // outside the bounds of the last (the same job when only one
            // runs: then it is also a second decision for it).
            let (Some(first), Some(last)) = (input.running.first(), input.running.last()) else {
                return Vec::new();
            };
            let valid = if first.workers < first.max_workers {
                first.max_workers
            } else {
                first.min_workers.max(1)
            };
            return vec![
                ScaleDecision {
                    id: first.id,
                    workers: valid,
                    reason: "valid".into(),
                },
                ScaleDecision {
                    id: last.id,
                    workers: last.max_workers + 1,
                    reason: "out of range".into(),
                },
            ];
        }
        if self.len("scale", 0) > 0 {
            return (0..HUGE as u64 / 64)
                .map(|id| ScaleDecision {
                    id,
                    workers: 1,
                    reason: String::new(),
                })
                .collect();
        }
        let _ = input;
        Vec::new()
    }
}

export_policy!(Hostile);
