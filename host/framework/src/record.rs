//! Recordings of scheduling runs, and their replay.
//!
//! A recording holds what a driver did to the snapshot between steps (the
//! cluster's journal, see [`ClusterOp`]), each round's and each scale
//! step's time, what the driver answered the framework's calls (binds,
//! releases, scales, evictions: see [`Answers`]) and what each step
//! decided. The framework is deterministic and a policy's hooks are
//! functions of their inputs (time is an argument), so replaying the same
//! changes, steps and answers through the same policy gives the same
//! decisions; through another policy, what it would have decided at each
//! of those moments.
//!
//! The format: the magic `DRAGONRC`, then records, each a little-endian
//! `u32` length and that many bytes of postcard: a [`Header`] first, then
//! [`Frame`]s. A frame's cluster changes, answers and decisions are JSON
//! inside it: the model's types leave out empty fields when serialised,
//! which a format without field names (postcard) cannot read back. A last
//! record cut short (a process killed mid-write) is skipped with a
//! warning; anything else that does not decode is an error naming the
//! record.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cluster::journal::ClusterOp;
use crate::cycle::{Decision, DeferAt, RoundBudget, Scheduler, SchedulerConfig, Unbounded};
use crate::io::Answers;
use dragon_runtime::Hooks;

/// The first bytes of every recording.
pub const MAGIC: &[u8; 8] = b"DRAGONRC";
/// The version of the format this build writes and reads.
pub const FORMAT: u16 = 2;
/// The longest record read (a frame of a whole cluster's first list is the
/// largest): a corrupt length cannot make the reader allocate more.
pub const MAX_RECORD_BYTES: u32 = 256 << 20;

/// What a recording was made with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub format: u16,
    /// Where it was made (`dragon simulate`, a trace's name).
    pub source: String,
    /// The policy: its name, where it came from, its digest and settings.
    pub policy: String,
    pub origin: String,
    pub sha256: String,
    pub settings: String,
    pub interface_version: String,
    /// The framework's settings, as JSON.
    pub config: String,
    /// The policy units fell back to after the policy failed on them (a
    /// bundled name), or empty.
    pub fallback: String,
    /// 0 for a recording from the start of a run; n for the nth file of a
    /// run recorded in rotated files, which starts from the cluster as it
    /// was (its first frame's changes rebuild it), without the queue's
    /// backoffs and waits of that moment.
    pub part: u32,
}

/// One step of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Frame {
    /// A scheduling round at `now_ms`, after the driver's changes (a JSON
    /// list of [`ClusterOp`]); the driver's [`Answers`] and the decisions
    /// the round reported, as JSON.
    Round {
        now_ms: u64,
        ops: String,
        answers: String,
        decisions: String,
    },
    /// A scale step at `now_ms`, after the driver's changes; the driver's
    /// answers and the actions applied, as JSON.
    Scale {
        now_ms: u64,
        ops: String,
        answers: String,
        actions: String,
    },
}

fn json(value: &impl Serialize) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// Answers are kept only when one of them failed: with none, a replay
/// answers every call with success.
fn answers_json(answers: &Answers) -> String {
    match answers.all_succeeded() {
        true => String::new(),
        false => json(answers),
    }
}

impl Frame {
    /// A round's frame.
    pub fn round(
        now_ms: u64,
        ops: &[ClusterOp],
        answers: &Answers,
        decisions: &impl Serialize,
    ) -> Frame {
        Frame::Round {
            now_ms,
            ops: json(&ops),
            answers: answers_json(answers),
            decisions: json(decisions),
        }
    }

    /// A scale step's frame.
    pub fn scale(
        now_ms: u64,
        ops: &[ClusterOp],
        answers: &Answers,
        actions: &impl Serialize,
    ) -> Frame {
        Frame::Scale {
            now_ms,
            ops: json(&ops),
            answers: answers_json(answers),
            actions: json(actions),
        }
    }

    /// When the step ran.
    pub fn now_ms(&self) -> u64 {
        match self {
            Frame::Round { now_ms, .. } | Frame::Scale { now_ms, .. } => *now_ms,
        }
    }

    fn ops(&self) -> &str {
        let (Frame::Round { ops, .. } | Frame::Scale { ops, .. }) = self;
        ops
    }

    fn answers(&self) -> &str {
        let (Frame::Round { answers, .. } | Frame::Scale { answers, .. }) = self;
        answers
    }

    fn outcome(&self) -> &str {
        match self {
            Frame::Round { decisions, .. } => decisions,
            Frame::Scale { actions, .. } => actions,
        }
    }
}

/// Why a recording could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a Dragon recording (it does not start with {MAGIC:?})")]
    Foreign { path: PathBuf },
    #[error(
        "{path}: recorded in format {found}; this build reads format {FORMAT} (record it again with this build)"
    )]
    Version { path: PathBuf, found: u16 },
    #[error("{path}: record {index} is corrupt: {reason}")]
    Corrupt {
        path: PathBuf,
        index: usize,
        reason: String,
    },
}

/// Writes a recording, record by record.
pub struct Recorder {
    path: PathBuf,
    out: BufWriter<File>,
    /// Bytes written so far (buffered included): the file's size once
    /// flushed, known without asking the file system.
    written: u64,
}

impl Recorder {
    /// Create `path` and write the magic and `header`.
    ///
    /// They are written under a temporary name beside `path` and the file
    /// is renamed only then, so whoever lists the directory (a recorder
    /// reader, a `dragon replay` on a live flight directory) never sees a
    /// recording without its header.
    ///
    /// # Errors
    /// The file cannot be created or written.
    pub fn create(path: &Path, header: &Header) -> Result<Recorder, RecordError> {
        let io = |source| RecordError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut part = path.as_os_str().to_owned();
        part.push(".part");
        let part = PathBuf::from(part);
        let file = File::create(&part).map_err(io)?;
        let mut r = Recorder {
            path: path.to_path_buf(),
            out: BufWriter::new(file),
            written: MAGIC.len() as u64,
        };
        r.out.write_all(MAGIC).map_err(io)?;
        r.record(header)?;
        r.flush()?;
        std::fs::rename(&part, path).map_err(io)?;
        Ok(r)
    }

    /// Append one frame.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn frame(&mut self, frame: &Frame) -> Result<(), RecordError> {
        self.record(frame)
    }

    fn record<T: Serialize>(&mut self, value: &T) -> Result<(), RecordError> {
        let bytes = postcard::to_stdvec(value).map_err(|e| RecordError::Io {
            path: self.path.clone(),
            source: std::io::Error::other(e),
        })?;
        let len = u32::try_from(bytes.len())
            .ok()
            .filter(|&n| n <= MAX_RECORD_BYTES)
            .ok_or_else(|| RecordError::Io {
                path: self.path.clone(),
                source: std::io::Error::other(format!(
                    "a record of {} bytes is over the {MAX_RECORD_BYTES}-byte limit",
                    bytes.len()
                )),
            })?;
        let io = |source| RecordError::Io {
            path: self.path.clone(),
            source,
        };
        self.out.write_all(&len.to_le_bytes()).map_err(io)?;
        self.out.write_all(&bytes).map_err(io)?;
        self.written += 4 + u64::from(len);
        Ok(())
    }

    /// The recording's size, bytes, once what is buffered is flushed.
    pub fn bytes(&self) -> u64 {
        self.written
    }

    /// Write what is buffered to the file, so that a crash loses at most
    /// the record under way.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn flush(&mut self) -> Result<(), RecordError> {
        self.out.flush().map_err(|source| RecordError::Io {
            path: self.path.clone(),
            source,
        })
    }

    /// Flush what is buffered and close the file.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn finish(mut self) -> Result<(), RecordError> {
        self.flush()
    }
}

/// A recording read back.
#[derive(Debug, Clone)]
pub struct Recording {
    pub header: Header,
    pub frames: Vec<Frame>,
    /// Why the last record was skipped, if it was cut short.
    pub torn: Option<String>,
}

/// Read the recording at `path`.
///
/// # Errors
/// The file cannot be read, is not a recording, is of another format
/// version, or has a record that does not decode.
pub fn read(path: &Path) -> Result<Recording, RecordError> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|source| RecordError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    let Some(mut rest) = bytes.strip_prefix(MAGIC.as_slice()) else {
        return Err(RecordError::Foreign {
            path: path.to_path_buf(),
        });
    };
    let corrupt = |index: usize, reason: String| RecordError::Corrupt {
        path: path.to_path_buf(),
        index,
        reason,
    };
    let mut records: Vec<&[u8]> = Vec::new();
    let mut torn = None;
    while !rest.is_empty() {
        let index = records.len();
        let (len, body) = match rest.split_first_chunk::<4>() {
            Some((len, body)) => (u32::from_le_bytes(*len), body),
            None => {
                torn = Some(format!("record {index}: its length is cut short"));
                break;
            }
        };
        if len > MAX_RECORD_BYTES {
            return Err(corrupt(
                index,
                format!("a length of {len} bytes, over the {MAX_RECORD_BYTES}-byte limit"),
            ));
        }
        let len = len as usize;
        if body.len() < len {
            torn = Some(format!(
                "record {index}: {} of its {len} bytes are there",
                body.len()
            ));
            break;
        }
        records.push(&body[..len]);
        rest = &body[len..];
    }
    let Some((first, frames)) = records.split_first() else {
        return Err(corrupt(0, "the header is missing".into()));
    };
    // The version first, so that another format is named as such.
    let (format, _) = postcard::take_from_bytes::<u16>(first)
        .map_err(|e| corrupt(0, format!("the header: {e}")))?;
    if format != FORMAT {
        return Err(RecordError::Version {
            path: path.to_path_buf(),
            found: format,
        });
    }
    let header: Header =
        postcard::from_bytes(first).map_err(|e| corrupt(0, format!("the header: {e}")))?;
    let frames = frames
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let frame: Frame =
                postcard::from_bytes(r).map_err(|e| corrupt(i + 1, e.to_string()))?;
            serde_json::from_str::<Vec<ClusterOp>>(frame.ops())
                .map_err(|e| corrupt(i + 1, format!("its cluster changes: {e}")))?;
            parse_answers(frame.answers())
                .map_err(|e| corrupt(i + 1, format!("its answers: {e}")))?;
            Ok(frame)
        })
        .collect::<Result<_, _>>()?;
    Ok(Recording {
        header,
        frames,
        torn,
    })
}

fn parse_answers(json: &str) -> Result<Answers, serde_json::Error> {
    match json {
        "" => Ok(Answers::default()),
        _ => serde_json::from_str(json),
    }
}

/// A step's decisions as JSON of at most `chars` characters (then `…`),
/// to quote in a message.
pub fn clipped(decisions: &serde_json::Value, chars: usize) -> String {
    let s = decisions.to_string();
    match s.char_indices().nth(chars) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s,
    }
}

/// A step whose decisions differ between the recording and the replay.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    /// The frame's index and time.
    pub frame: usize,
    pub now_ms: u64,
    pub recorded: serde_json::Value,
    pub replayed: serde_json::Value,
}

/// What a replay came to.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Replay {
    pub rounds: u64,
    pub scale_steps: u64,
    /// Driver changes the replayed cluster refused (the recorded run's
    /// decisions made them possible, another policy's may not).
    pub refused_ops: u64,
    pub differences: Vec<Difference>,
}

/// A recording's frames run again, one at a time, over a scheduler of its
/// own: for a whole replay ([`replay`]) or a check after each step (the
/// gate before a policy swap).
pub struct Replayer {
    pub sched: Scheduler,
    pub refused_ops: u64,
}

/// One frame run again.
pub struct Step {
    pub now_ms: u64,
    /// Whether it was a round (or a scale step).
    pub round: bool,
    /// What it decided now, and in the recording, as JSON.
    pub replayed: serde_json::Value,
    pub recorded: serde_json::Value,
    /// The policy's failures in it (its round's `PolicyError`s, its scale
    /// step's errors).
    pub policy_errors: Vec<String>,
}

impl Replayer {
    /// A replayer over an empty cluster with the framework settings
    /// `config`. Wall-clock time is not part of a recording: a replayed
    /// round stops trying units where the recorded one ran out of its
    /// budget, and otherwise tries every unit.
    pub fn new(config: SchedulerConfig) -> Replayer {
        Replayer {
            sched: Scheduler::new(Default::default(), config),
            refused_ops: 0,
        }
    }

    /// Run `frame` through `policy` (and `fallback` where the recorded run
    /// had one): its changes applied in order ([`Replayer::apply`]), then
    /// its round or scale step at its time ([`Replayer::decide`]).
    pub fn step(
        &mut self,
        frame: &Frame,
        policy: &dyn Hooks,
        fallback: Option<&dyn Hooks>,
    ) -> Step {
        self.apply(frame);
        self.decide(frame, policy, fallback)
    }

    /// Apply `frame`'s cluster changes, as the driver made them.
    pub fn apply(&mut self, frame: &Frame) {
        // Checked when read.
        let ops: Vec<ClusterOp> = serde_json::from_str(frame.ops()).unwrap_or_default();
        for op in ops {
            if op.apply(&mut self.sched.cluster).is_err() {
                self.refused_ops += 1;
            }
        }
    }

    /// Run `frame`'s round or scale step at its time, the driver answering
    /// as it did.
    pub fn decide(
        &mut self,
        frame: &Frame,
        policy: &dyn Hooks,
        fallback: Option<&dyn Hooks>,
    ) -> Step {
        let answers = parse_answers(frame.answers()).unwrap_or_default();
        run_step(&mut self.sched, frame, answers, policy, fallback)
    }

    /// What `policy` would decide at `frame`'s step over the state the
    /// replayer is in (after [`Replayer::apply`]), every call it makes
    /// succeeding; the replayer itself is left as it was.
    pub fn decide_aside(
        &self,
        frame: &Frame,
        policy: &dyn Hooks,
        fallback: Option<&dyn Hooks>,
    ) -> Step {
        let mut fork = self.sched.clone();
        run_step(&mut fork, frame, Answers::default(), policy, fallback)
    }
}

fn run_step(
    sched: &mut Scheduler,
    frame: &Frame,
    answers: Answers,
    policy: &dyn Hooks,
    fallback: Option<&dyn Hooks>,
) -> Step {
    let now_ms = frame.now_ms();
    let round = matches!(frame, Frame::Round { .. });
    let mut policy_errors = Vec::new();
    let recorded = serde_json::from_str(frame.outcome()).unwrap_or(serde_json::Value::Null);
    let replayed = match round {
        true => {
            let mut scaler = answers.clone();
            let mut binder = answers;
            let (mut deferred, mut unbounded) = (recorded_deferral(&recorded), Unbounded);
            let budget: &mut dyn RoundBudget = match deferred.as_mut() {
                Some(at) => at,
                None => &mut unbounded,
            };
            let report = sched.schedule_round_within(
                now_ms,
                policy,
                fallback,
                budget,
                &mut binder,
                &mut scaler,
            );
            policy_errors.extend(report.decisions.iter().filter_map(|d| match d {
                Decision::PolicyError { error, .. } => Some(error.clone()),
                _ => None,
            }));
            serde_json::to_value(&report.decisions)
        }
        false => {
            let mut scaler = answers;
            let report = sched.scale_step(now_ms, policy, &mut scaler);
            policy_errors.extend(report.errors);
            serde_json::to_value(&report.actions)
        }
    }
    .unwrap_or(serde_json::Value::Null);
    Step {
        now_ms,
        round,
        replayed,
        recorded,
        policy_errors,
    }
}

/// Where a recorded round's budget ran out, if it did: the replay defers
/// the same number of units (the recorded run's clock is not replayed).
fn recorded_deferral(decisions: &serde_json::Value) -> Option<DeferAt> {
    decisions.as_array()?.iter().find_map(|d| {
        if d.get("kind")?.as_str()? != "deferred" {
            return None;
        }
        Some(DeferAt {
            untried: usize::try_from(d.get("units")?.as_u64()?).ok()?,
            budget_ms: d.get("budget_ms")?.as_u64()?,
        })
    })
}

/// Replay `recording` through `policy` (and `fallback`) with the framework
/// settings `config`, each step's decisions compared with the recorded
/// ones.
pub fn replay(
    recording: &Recording,
    policy: &dyn Hooks,
    fallback: Option<&dyn Hooks>,
    config: SchedulerConfig,
) -> Replay {
    let mut replayer = Replayer::new(config);
    let mut out = Replay::default();
    for (i, frame) in recording.frames.iter().enumerate() {
        let step = replayer.step(frame, policy, fallback);
        match step.round {
            true => out.rounds += 1,
            false => out.scale_steps += 1,
        }
        if step.recorded != step.replayed {
            out.differences.push(Difference {
                frame: i,
                now_ms: step.now_ms,
                recorded: step.recorded,
                replayed: step.replayed,
            });
        }
    }
    out.refused_ops = replayer.refused_ops;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header {
            format: FORMAT,
            source: "test".into(),
            policy: "dragon".into(),
            origin: "bundled".into(),
            sha256: "00".into(),
            settings: "{}".into(),
            interface_version: "0.1.0".into(),
            config: "{}".into(),
            fallback: String::new(),
            part: 0,
        }
    }

    fn frame(now_ms: u64) -> Frame {
        let mut answers = Answers::default();
        answers.binds.push_back(Err(crate::io::ApiError::new(
            crate::io::ApiErrorKind::Conflict,
            "already bound",
        )));
        Frame::round(
            now_ms,
            &[ClusterOp::RemovePod("p".into())],
            &answers,
            &Vec::<u8>::new(),
        )
    }

    fn write(path: &Path, frames: u64) {
        let mut r = Recorder::create(path, &header()).unwrap();
        for t in 0..frames {
            r.frame(&frame(t)).unwrap();
        }
        r.finish().unwrap();
    }

    #[test]
    fn a_recording_reads_back_and_a_torn_last_record_is_skipped() {
        let dir = std::env::temp_dir().join(format!("dragon-record-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("run.rec");
        write(&path, 3);
        let rec = read(&path).unwrap();
        assert_eq!(rec.header, header());
        assert_eq!(rec.frames, vec![frame(0), frame(1), frame(2)]);
        assert_eq!(rec.torn, None);

        // Cut inside the last record.
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        let rec = read(&path).unwrap();
        assert_eq!(rec.frames.len(), 2);
        assert!(
            rec.torn.as_deref().unwrap().starts_with("record 3:"),
            "{rec:?}"
        );

        // A flipped byte in a frame: an error naming the file and record.
        let mut bad = bytes.clone();
        let at = bad.len() - 2;
        bad[at] = 0xff;
        std::fs::write(&path, &bad).unwrap();
        let e = read(&path).unwrap_err().to_string();
        assert!(e.contains("run.rec: record 3 is corrupt"), "{e}");

        std::fs::write(&path, b"PK\x03\x04 a zip").unwrap();
        let e = read(&path).unwrap_err().to_string();
        assert!(e.contains("not a Dragon recording"), "{e}");

        let mut other = MAGIC.to_vec();
        let h = postcard::to_stdvec(&Header {
            format: 9,
            ..header()
        })
        .unwrap();
        other.extend((h.len() as u32).to_le_bytes());
        other.extend(h);
        std::fs::write(&path, &other).unwrap();
        let e = read(&path).unwrap_err().to_string();
        assert!(
            e.contains("recorded in format 9; this build reads format 2"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_recording_appears_under_its_name_only_with_its_header_written() {
        let dir = std::env::temp_dir().join(format!("dragon-record-new-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("run.rec");
        // Nothing flushed after the header: a reader still finds it whole.
        let r = Recorder::create(&path, &header()).unwrap();
        let rec = read(&path).unwrap();
        assert_eq!((rec.header, rec.frames.len()), (header(), 0));
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["run.rec"], "no temporary file is left");
        drop(r);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
