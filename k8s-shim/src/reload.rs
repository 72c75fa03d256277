//! Hot reload: watch the policy file's directory (a ConfigMap mount swaps a
//! `..data` symlink, so the file itself is never written in place), and when
//! the content changes, load the new policy into the slot. A bad file is
//! refused with a log line and a metric; the old policy keeps scheduling.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use dragon_runtime::{LoadOptions, PolicySlot, PolicySource};
use notify::{RecursiveMode, Watcher};

use crate::metrics::Metrics;

fn digest(path: &Path) -> Option<String> {
    std::fs::read(path)
        .ok()
        .map(|b| dragon_runtime::sha256_hex(&b))
}

/// Watch `path` and reload `slot` on every content change until the process
/// ends. Runs on its own thread.
///
/// # Errors
/// The directory cannot be watched.
pub fn spawn(
    path: PathBuf,
    slot: Arc<PolicySlot>,
    options: LoadOptions,
    metrics: Arc<Metrics>,
) -> notify::Result<()> {
    let dir = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let (tx, rx) = std::sync::mpsc::channel();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if res.is_ok() {
            let _ = tx.send(());
        }
    })?;
    watcher.watch(&dir, RecursiveMode::NonRecursive)?;
    std::thread::Builder::new()
        .name("dragon-reload".into())
        .spawn(move || {
            let _watcher = watcher; // lives as long as the thread
            let mut current = Some(slot.current().info().sha256.clone());
            while rx.recv().is_ok() {
                // Let a burst of events (symlink swap, editor save) settle.
                std::thread::sleep(Duration::from_millis(50));
                while rx.try_recv().is_ok() {}
                let now = digest(&path);
                if now.is_none() || now == current {
                    continue;
                }
                current = now;
                match slot.reload(&PolicySource::File(path.clone()), &options) {
                    Ok(report) => {
                        Metrics::inc(&metrics.reloads, "result", "success");
                        tracing::info!(old = %report.old, new = %report.new, took_ms = report.took_ms, "policy reloaded");
                    }
                    Err(e) => {
                        Metrics::inc(&metrics.reloads, "result", "failure");
                        tracing::error!("policy reload refused, the previous policy keeps scheduling: {e}");
                    }
                }
            }
        })
        .map_err(|e| notify::Error::generic(&e.to_string()))?;
    Ok(())
}
