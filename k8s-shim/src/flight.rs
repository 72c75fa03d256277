//! The flight recorder: every round and scale step of the scheduling loop,
//! with the cluster changes before it, the API server's answers and the
//! decisions, written as a recording (see `dragon_framework::record`) to a
//! bounded ring of files.
//!
//! Files are named `dragon-<start ms>-<part>.rec` and each is a recording
//! on its own: a new one starts when the current one reaches its share of
//! the ring (`maxBytes / files`), when the policy or its settings change,
//! or when a frame rebuilds the cluster for another reason (see
//! [`crate::taps`]), and its first frame rebuilds the cluster as it is. The oldest files are
//! deleted while the directory holds more than `maxBytes` of them (files
//! of earlier runs count too). Each frame is flushed as it is written, so
//! a crash loses at most the step under way (a torn last record, which
//! readers skip). A recording that cannot be written is turned off with an
//! error in the log: it never stops scheduling.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use dragon_framework::SchedulerConfig;
use dragon_framework::record::{FORMAT, Frame, Header, RecordError, Recorder};
use dragon_runtime::PolicyInfo;
use serde::Deserialize;

/// Why a recording file cannot be started.
#[derive(Debug, thiserror::Error)]
enum StartError {
    #[error("cannot write the scheduling config into the header: {0}")]
    Config(#[from] serde_json::Error),
    #[error(transparent)]
    Create(#[from] RecordError),
}

/// `recording` in the configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct RecordingConfig {
    pub enabled: bool,
    /// Where the files go.
    pub dir: PathBuf,
    /// The most the directory's recordings may take, bytes.
    pub max_bytes: u64,
    /// How many files the ring is split into (a file is the unit deleted).
    pub files: u32,
}

impl Default for RecordingConfig {
    fn default() -> RecordingConfig {
        RecordingConfig {
            enabled: true,
            dir: std::env::temp_dir().join("dragon-recordings"),
            max_bytes: 64 << 20,
            files: 4,
        }
    }
}

/// The smallest ring: a file must hold more than a cluster's first frame.
pub const MIN_RECORDING_BYTES: u64 = 1 << 20;
/// The most files a ring is split into.
pub const MAX_RECORDING_FILES: u32 = 64;

impl RecordingConfig {
    /// Check the bounds.
    ///
    /// # Errors
    /// A bound out of range, named by its key.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.max_bytes < MIN_RECORDING_BYTES {
            anyhow::bail!(
                "recording.maxBytes must be at least {MIN_RECORDING_BYTES}, got {}",
                self.max_bytes
            );
        }
        if !(2..=MAX_RECORDING_FILES).contains(&self.files) {
            anyhow::bail!(
                "recording.files must be 2 to {MAX_RECORDING_FILES}, got {}",
                self.files
            );
        }
        Ok(())
    }
}

/// The file being written, for the gate before a policy swap (it reads the
/// current file's steps).
#[derive(Debug, Clone, Default)]
pub struct CurrentFile(Arc<Mutex<Option<PathBuf>>>);

impl CurrentFile {
    pub fn get(&self) -> Option<PathBuf> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set(&self, path: Option<PathBuf>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = path;
    }
}

struct Open {
    recorder: Recorder,
    /// Whom the file records: a change starts a new file.
    policy: (String, String),
}

/// What every file of a run says of the loop that wrote it.
#[derive(Debug, Clone)]
pub struct Run {
    /// The framework's settings.
    pub scheduling: SchedulerConfig,
    /// The `policy` of the configuration (a path or a bundled name), as
    /// `dragon replay` loads it when no other policy is given.
    pub policy: String,
    /// The policy units fall back to (a bundled name), or empty.
    pub fallback: String,
    /// When the run started, Unix ms (in the files' names).
    pub started_ms: u64,
}

/// Writes the scheduling loop's steps; see the module's documentation.
pub struct FlightRecorder {
    config: RecordingConfig,
    run: Run,
    part: u32,
    open: Option<Open>,
    /// Files of the ring, oldest first, with their sizes.
    files: VecDeque<(PathBuf, u64)>,
    current: CurrentFile,
    /// The journal was dropped: the next step starts a new file.
    stale: bool,
}

fn is_recording(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.starts_with("dragon-") && name.ends_with(".rec")
}

impl FlightRecorder {
    /// A recorder writing into `config.dir` (created if missing) for the
    /// loop `run`.
    ///
    /// # Errors
    /// The directory cannot be created or listed.
    pub fn open(config: RecordingConfig, run: Run) -> std::io::Result<FlightRecorder> {
        std::fs::create_dir_all(&config.dir)?;
        let mut files: Vec<(PathBuf, u64)> = std::fs::read_dir(&config.dir)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| is_recording(p))
            .map(|p| {
                let size = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
                (p, size)
            })
            .collect();
        // The names sort by run, then part.
        files.sort();
        Ok(FlightRecorder {
            config,
            run,
            part: 0,
            open: None,
            files: files.into(),
            current: CurrentFile::default(),
            stale: false,
        })
    }

    /// Where the file being written is published.
    pub fn current(&self) -> CurrentFile {
        self.current.clone()
    }

    /// Whether the step about to run must open a new file (the first, the
    /// current one full, another policy or settings, a dropped journal):
    /// its frame's changes must then rebuild the cluster.
    pub fn due(&self, policy: &PolicyInfo) -> bool {
        if !self.config.enabled {
            return false;
        }
        let share = self.config.max_bytes / u64::from(self.config.files);
        self.stale
            || match &self.open {
                None => true,
                Some(open) => {
                    open.policy != (policy.sha256.clone(), policy.settings.clone())
                        || self.size() >= share
                }
            }
    }

    /// Open a new file for the step about to run, whose frame rebuilds the
    /// cluster. A file that cannot be created turns recording off.
    pub fn rotate(&mut self, policy: &PolicyInfo) {
        if !self.config.enabled {
            return;
        }
        self.stale = false;
        self.close();
        let who = (policy.sha256.clone(), policy.settings.clone());
        if let Err(e) = self.start(policy, who) {
            tracing::error!(dir = %self.config.dir.display(), "cannot start a recording file; recording stops: {e}");
            self.config.enabled = false;
        }
    }

    /// The journal was dropped: the next step opens a new file.
    pub fn lost_track(&mut self) {
        self.stale = true;
    }

    /// Write the step's frame.
    pub fn write(&mut self, frame: &Frame) {
        let Some(open) = self.open.as_mut() else {
            return;
        };
        let written = open
            .recorder
            .frame(frame)
            .and_then(|()| open.recorder.flush());
        if let Err(e) = written {
            tracing::error!("cannot write the recording; recording stops: {e}");
            self.close();
            self.config.enabled = false;
            return;
        }
        self.note_size();
    }

    fn size(&self) -> u64 {
        self.files.back().map_or(0, |(_, s)| *s)
    }

    fn note_size(&mut self) {
        let Some(open) = &self.open else { return };
        if let Some(last) = self.files.back_mut() {
            last.1 = open.recorder.bytes();
        }
    }

    fn start(&mut self, policy: &PolicyInfo, who: (String, String)) -> Result<(), StartError> {
        let header = Header {
            format: FORMAT,
            source: "dragon-scheduler".into(),
            policy: policy.name.clone(),
            origin: self.run.policy.clone(),
            sha256: policy.sha256.clone(),
            settings: policy.settings.clone(),
            interface_version: policy.interface_version.clone(),
            config: serde_json::to_string(&self.run.scheduling)?,
            fallback: self.run.fallback.clone(),
            part: self.part,
        };
        let path = self.config.dir.join(format!(
            "dragon-{}-{:04}.rec",
            self.run.started_ms, self.part
        ));
        let recorder = Recorder::create(&path, &header)?;
        self.part += 1;
        self.files.push_back((path.clone(), 0));
        self.open = Some(Open {
            recorder,
            policy: who,
        });
        self.current.set(Some(path));
        self.note_size();
        self.trim();
        Ok(())
    }

    fn close(&mut self) {
        if let Some(open) = self.open.take()
            && let Err(e) = open.recorder.finish()
        {
            tracing::warn!("cannot finish the recording file: {e}");
        }
        self.current.set(None);
    }

    /// Delete the oldest files while the ring holds more than its bound;
    /// the file being written stays.
    fn trim(&mut self) {
        let mut total: u64 = self.files.iter().map(|(_, s)| s).sum();
        while total
            > self
                .config
                .max_bytes
                .saturating_sub(self.config.max_bytes / u64::from(self.config.files))
            && self.files.len() > 1
        {
            let Some((path, size)) = self.files.pop_front() else {
                break;
            };
            if let Err(e) = std::fs::remove_file(&path) {
                tracing::warn!(file = %path.display(), "cannot delete an old recording: {e}");
            }
            total -= size;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dragon_framework::Answers;
    use dragon_framework::record;

    fn info(sha: &str) -> PolicyInfo {
        PolicyInfo {
            name: "p".into(),
            version: "1.0.0".into(),
            interface_version: "0.1.0".into(),
            hooks: Vec::new(),
            origin: "p.wasm".into(),
            sha256: sha.into(),
            size_bytes: 0,
            compile_ms: 0.0,
            cached: false,
            settings: String::new(),
        }
    }

    /// One step as the loop takes it: a new file when due, then the frame.
    fn step(rec: &mut FlightRecorder, policy: &PolicyInfo, t: u64, decisions: &[String]) -> bool {
        let due = rec.due(policy);
        if due {
            rec.rotate(policy);
        }
        rec.write(&Frame::round(t, &[], &Answers::default(), &decisions));
        due
    }

    #[test]
    fn the_ring_rotates_by_size_and_policy_and_keeps_under_its_bound() {
        let dir = std::env::temp_dir().join(format!("dragon-flight-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let config = RecordingConfig {
            enabled: true,
            dir: dir.clone(),
            max_bytes: MIN_RECORDING_BYTES,
            files: 4,
        };
        let run = Run {
            scheduling: SchedulerConfig::default(),
            policy: "p.wasm".into(),
            fallback: String::new(),
            started_ms: 7,
        };
        let mut rec = FlightRecorder::open(config, run).unwrap();
        assert!(
            step(&mut rec, &info("a"), 1, &[]),
            "the first step opens a file"
        );
        assert!(!step(&mut rec, &info("a"), 2, &[]));
        // Another policy: a new file.
        assert!(step(&mut rec, &info("b"), 3, &[]));
        let second = rec.current().get().unwrap();
        assert!(second.ends_with("dragon-7-0001.rec"), "{second:?}");
        let read = record::read(&second).unwrap();
        assert_eq!((read.header.part, read.header.sha256.as_str()), (1, "b"));
        // A dropped journal: a new file.
        rec.lost_track();
        assert!(step(&mut rec, &info("b"), 4, &[]));

        // Big steps: files rotate at a quarter of the ring, and the ring
        // keeps under its bound by deleting the oldest.
        let big = vec!["x".repeat(1000); 200];
        for t in 0..40 {
            step(&mut rec, &info("b"), 10 + t, &big);
        }
        let files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        let total: u64 = files
            .iter()
            .map(|p| std::fs::metadata(p).unwrap().len())
            .sum();
        assert!(total <= MIN_RECORDING_BYTES + 300_000, "{total}");
        assert!(files.len() <= 4, "{files:?}");
        assert!(!dir.join("dragon-7-0000.rec").exists(), "the oldest went");
        for f in &files {
            record::read(f).unwrap();
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_bounds_are_checked() {
        let ok = RecordingConfig::default();
        ok.check().unwrap();
        for (bad, key) in [
            (
                RecordingConfig {
                    max_bytes: 1000,
                    ..ok.clone()
                },
                "maxBytes",
            ),
            (
                RecordingConfig {
                    files: 1,
                    ..ok.clone()
                },
                "files",
            ),
            (
                RecordingConfig {
                    files: 65,
                    ..ok.clone()
                },
                "files",
            ),
        ] {
            let e = bad.check().unwrap_err().to_string();
            assert!(e.contains(key), "{e}");
        }
    }
}
