//! The gate before a policy swap, on recordings of simulated runs: a good
//! candidate passes; one that fails, that the framework must refuse, that
//! answers the same question differently, or that is too slow is refused
//! with the rule it broke.

use dragon_framework::gate::{self, Breach, GateLimits};
use dragon_framework::record::Frame;
use dragon_runtime::view::ClusterView;
use dragon_runtime::{CallError, Hooks, LoadOptions, WasmPolicy, wit};
use dragon_sim::{SimOptions, Trace, sim_config, simulate_recorded};
use dragon_tests::{bundled, engine, hostile};

/// The steps of `trace` simulated under `policy`.
fn recorded(trace: &str, policy: &dyn Hooks) -> Vec<Frame> {
    let trace = Trace::load(trace).unwrap();
    let mut frames = Vec::new();
    let mut sink = |f: Frame| frames.push(f);
    simulate_recorded(&trace, policy, SimOptions::default(), None, &mut sink);
    // At least a round for each of its jobs' arrivals.
    assert!(frames.len() >= trace.jobs.len(), "{} frames", frames.len());
    frames
}

#[test]
fn the_bundled_policies_pass_on_each_others_recordings() {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let baseline = bundled(&e, "baseline", "");
    for (live, candidate) in [
        (&dragon, &baseline),
        (&baseline, &dragon),
        (&dragon, &dragon),
    ] {
        let frames = recorded("deadlock", live);
        let passed = gate::check(
            &frames,
            sim_config(),
            candidate,
            Some(live),
            None,
            GateLimits::default(),
        )
        .unwrap_or_else(|b| panic!("{} on {}: {b}", candidate.info().name, live.info().name));
        assert_eq!(passed.steps, frames.len());
        assert!(passed.calls > 0);
    }
}

#[test]
fn a_candidate_whose_answers_the_framework_must_refuse_is_refused() {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let frames = recorded("deadlock", &dragon);
    // A gang size beyond the job's workers: more pods than the job has, on
    // room the job was never given.
    let oversize = hostile(
        &e,
        r#"{"fault": "bad-output", "hook": "pre-filter"}"#,
        LoadOptions::default(),
    )
    .unwrap();
    let breach = gate::check(
        &frames,
        sim_config(),
        &oversize,
        Some(&dragon),
        None,
        GateLimits::default(),
    )
    .unwrap_err();
    let Breach::Failed { error, .. } = &breach else {
        panic!("{breach}")
    };
    assert!(
        error.contains("pre-filter") && error.contains("invalid result"),
        "{breach}"
    );
    assert!(
        breach
            .to_string()
            .starts_with("the policy failed on the step recorded at t = "),
        "{breach}"
    );

    let trapping = hostile(
        &e,
        r#"{"fault": "trap", "hook": "score"}"#,
        LoadOptions::default(),
    )
    .unwrap();
    let breach = gate::check(
        &frames,
        sim_config(),
        &trapping,
        None,
        None,
        GateLimits::default(),
    )
    .unwrap_err();
    assert!(breach.to_string().contains("trapped"), "{breach}");
}

#[test]
fn a_candidate_that_answers_the_same_question_differently_is_refused() {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let frames = recorded("deadlock", &dragon);
    let drifting = hostile(
        &e,
        r#"{"fault": "drift", "hook": "score"}"#,
        LoadOptions::default(),
    )
    .unwrap();
    let breach = gate::check(
        &frames,
        sim_config(),
        &drifting,
        None,
        None,
        GateLimits::default(),
    )
    .unwrap_err();
    assert!(
        matches!(breach, Breach::Nondeterministic { .. }),
        "{breach}"
    );
    assert!(
        breach
            .to_string()
            .starts_with("identical output for identical input: "),
        "{breach}"
    );
}

#[test]
fn a_candidate_slower_than_the_multiple_allows_is_refused() {
    let e = engine();
    let dragon = bundled(&e, "dragon", "");
    let frames = recorded("deadlock", &dragon);
    // No multiple at all and no floor: any time is too slow, so the rule
    // is exercised without depending on this machine's speed.
    let strict = GateLimits {
        latency_multiple: 0.0,
        latency_floor_us: 0,
        min_calls: 1,
    };
    let breach =
        gate::check(&frames, sim_config(), &dragon, Some(&dragon), None, strict).unwrap_err();
    let Breach::Slow {
        candidate_us,
        multiple,
        ..
    } = breach
    else {
        panic!("{breach}")
    };
    assert!(candidate_us > 0);
    assert_eq!(multiple, 0.0);
}

/// A candidate that answers every hook at random, yet the same way to the
/// same question (its answers are a hash of the question and its seed):
/// mostly answers the framework accepts (sizes within bounds, lists of the
/// right length), now and then one it must refuse.
struct Chaotic {
    info: dragon_runtime::PolicyInfo,
    seed: u64,
    /// One answer in this many is one the framework must refuse (0: none).
    invalid_one_in: u64,
}

impl Chaotic {
    fn new(seed: u64, invalid_one_in: u64) -> Chaotic {
        use dragon_runtime::wit::Hook;
        Chaotic {
            info: dragon_runtime::PolicyInfo::native(
                "chaotic",
                "0",
                vec![
                    Hook::QueueOrder,
                    Hook::PreFilter,
                    Hook::Filter,
                    Hook::Score,
                    Hook::Permit,
                    Hook::Scale,
                ],
            ),
            seed,
            invalid_one_in,
        }
    }

    /// Whether this answer is to be one the framework must refuse.
    fn invalid(&self, d: &mut Dice) -> bool {
        self.invalid_one_in > 0 && d.roll(self.invalid_one_in) == 0
    }

    /// Random numbers determined by the question asked.
    fn dice(&self, question: &impl std::fmt::Debug) -> Dice {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (self.seed, format!("{question:?}")).hash(&mut h);
        Dice(h.finish())
    }
}

/// SplitMix64.
struct Dice(u64);

impl Dice {
    /// A number below `below`.
    fn roll(&mut self, below: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % below.max(1)
    }
}

impl Hooks for Chaotic {
    fn info(&self) -> &dragon_runtime::PolicyInfo {
        &self.info
    }
    fn queue_order(
        &self,
        now_ms: u64,
        units: &[wit::Queued],
        _view: &dyn ClusterView,
    ) -> Result<Vec<u32>, CallError> {
        let mut d = self.dice(&(now_ms, units));
        let mut order: Vec<u32> = (0..units.len() as u32).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, d.roll(i as u64 + 1) as usize);
        }
        if self.invalid(&mut d) {
            order.pop();
        }
        Ok(order)
    }
    fn pre_filter(
        &self,
        now_ms: u64,
        unit: &wit::Unit,
        _nodes: &wit::Capacity,
        _view: &dyn ClusterView,
    ) -> Result<wit::PreFilterResult, CallError> {
        let mut d = self.dice(&(now_ms, unit));
        // A gang may be tried at sizes in [min, workers]; a lone pod as it is.
        let (lo, hi) = match unit.gang {
            true => (unit.min_workers.min(unit.workers), unit.workers),
            false => (1, 1),
        };
        if self.invalid(&mut d) {
            return Ok(wit::PreFilterResult::Proceed(vec![
                hi + 1 + d.roll(3) as u32,
            ]));
        }
        Ok(match d.roll(10) {
            0 => wit::PreFilterResult::Skip("chaos".into()),
            _ if !unit.gang => wit::PreFilterResult::Proceed(Vec::new()),
            _ => wit::PreFilterResult::Proceed(
                (0..d.roll(3))
                    .map(|_| lo + d.roll(u64::from(hi - lo) + 1) as u32)
                    .collect(),
            ),
        })
    }
    fn filter(
        &self,
        pod: &wit::Placement,
        nodes: &wit::Candidates,
        _view: &dyn ClusterView,
    ) -> Result<Vec<bool>, CallError> {
        let mut d = self.dice(&(pod, nodes, "filter"));
        let n = nodes.index.len() + usize::from(self.invalid(&mut d));
        Ok((0..n).map(|_| d.roll(4) != 0).collect())
    }
    fn score(
        &self,
        pod: &wit::Placement,
        nodes: &wit::Candidates,
        _view: &dyn ClusterView,
    ) -> Result<Vec<u32>, CallError> {
        let mut d = self.dice(&(pod, nodes, "score"));
        Ok(nodes.index.iter().map(|_| d.roll(101) as u32).collect())
    }
    fn permit(&self, now_ms: u64, gang: &wit::GangState) -> Result<wit::PermitResult, CallError> {
        let mut d = self.dice(&(now_ms, gang));
        Ok(match d.roll(6) {
            0 => wit::PermitResult::Reject("chaos".into()),
            1 => wit::PermitResult::Wait(d.roll(120_000)),
            _ => wit::PermitResult::Allow,
        })
    }
    fn scale(
        &self,
        input: &wit::ScaleInput,
        _view: &dyn ClusterView,
    ) -> Result<Vec<wit::ScaleDecision>, CallError> {
        let mut d = self.dice(input);
        let mut decisions = Vec::new();
        for j in &input.running {
            if d.roll(3) == 0 {
                let (lo, hi) = (j.min_workers, j.max_workers.max(j.min_workers));
                decisions.push(wit::ScaleDecision {
                    id: j.id,
                    workers: lo + d.roll(u64::from(hi - lo) + 1) as u32,
                    reason: "chaos".into(),
                });
            }
        }
        Ok(decisions)
    }
}

/// Whatever a candidate decides on whatever recording, the gate answers
/// (passed, or the rule broken) and never panics.
#[test]
fn the_gate_answers_every_candidate_on_every_recording_without_panicking() {
    use dragon_sim::{GenerateOptions, Mix, Racks, generate};
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};
    let e = engine();
    let zoo: Vec<WasmPolicy> = [
        "dragon",
        "dragon-plus",
        "tiresias",
        "pollux",
        "backfill",
        "fair-share",
        "baseline",
    ]
    .iter()
    .map(|name| bundled(&e, name, ""))
    .collect();
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32);
    let mut runner = TestRunner::new(Config {
        cases,
        ..Config::default()
    });
    let mixes = [Mix::Philly, Mix::Helios, Mix::Wide];
    // Recordings of the bundled traces, or of generated ones.
    const BUNDLED_TRACES: [&str; 2] = ["paper", "deadlock"];
    let strategy = (
        (0..BUNDLED_TRACES.len() + 2),
        any::<u64>(),
        0..mixes.len(),
        0.3f64..3.0,
        0..zoo.len(),
        // A candidate: one of the zoo, or a chaotic one with its seed.
        (0..zoo.len() + 3, any::<u64>()),
    );
    runner
        .run(
            &strategy,
            |(source, seed, mix, load, live, (candidate, chaos))| {
                let trace = match BUNDLED_TRACES.get(source) {
                    Some(name) => Trace::load(name).unwrap(),
                    None => {
                        let text = generate(&GenerateOptions {
                            seed,
                            nodes: 4,
                            gpus_per_node: 4,
                            jobs: 12,
                            load,
                            elastic_share: 0.5,
                            mix: mixes[mix],
                            racks: Racks::default(),
                            tiers: false,
                            teams: 0,
                        })
                        .unwrap();
                        Trace::parse(&text, "generated", false).unwrap()
                    }
                };
                let mut frames = Vec::new();
                let mut sink = |f: Frame| frames.push(f);
                simulate_recorded(&trace, &zoo[live], SimOptions::default(), None, &mut sink);
                // A recording's window is a prefix of the run.
                frames.truncate(2_000);
                // Half of the chaotic candidates answer only what the
                // framework accepts, so their replays go on to the end.
                let chaotic = Chaotic::new(chaos, if chaos % 2 == 0 { 0 } else { 20_000 });
                let candidate: &dyn Hooks =
                    zoo.get(candidate).map_or(&chaotic, |p| p as &dyn Hooks);
                // Passed or refused: either is an answer.
                let _ = gate::check(
                    &frames,
                    sim_config(),
                    candidate,
                    Some(&zoo[live]),
                    None,
                    GateLimits::default(),
                );
                Ok(())
            },
        )
        .unwrap();
}
