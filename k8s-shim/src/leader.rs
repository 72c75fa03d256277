//! Leader election on a Lease. The holder renews it before it expires; a
//! standby reads it again every `retry` (client-go's `retryPeriod`, 2 s), so
//! a Lease released by a replica that shuts down is taken within `retry`
//! rather than when it would have expired.
//!
//! A `LeaseManager` keeps what it last read of the Lease until that
//! expires, so a standby starts each look with a new manager (which reads
//! the Lease first); the holder keeps its manager for as long as it leads.

use std::sync::Arc;
use std::time::Duration;

use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

/// A running election: its task, and the manager to release the Lease with.
pub struct Election {
    manager: Arc<Mutex<Arc<LeaseManager>>>,
    task: JoinHandle<()>,
}

impl Election {
    /// Take part with managers from `make`, calling `on_change` with the
    /// first state (not leading) and every change after it.
    ///
    /// # Errors
    /// The first manager cannot be built (the Lease cannot be read or
    /// created).
    pub async fn start(
        make: impl Fn() -> LeaseManagerBuilder + Send + 'static,
        retry: Duration,
        on_change: impl Fn(bool) + Send + 'static,
    ) -> kube_lease_manager::Result<Election> {
        let manager = Arc::new(Mutex::new(Arc::new(make().build().await?)));
        let shared = manager.clone();
        let task = tokio::spawn(async move {
            let mut leading = false;
            on_change(false);
            loop {
                let m = shared.lock().await.clone();
                let step = m.changed();
                let outcome = if leading {
                    Some(step.await)
                } else {
                    tokio::time::timeout(retry, step).await.ok()
                };
                match outcome {
                    Some(Ok(is)) => {
                        leading = is;
                        on_change(is);
                        continue;
                    }
                    Some(Err(e)) => {
                        tracing::warn!("leader election (retrying): {e}");
                        tokio::time::sleep(retry).await;
                    }
                    None => {}
                }
                if !leading {
                    // Look again with a fresh read of the Lease.
                    match make().build().await {
                        Ok(fresh) => *shared.lock().await = Arc::new(fresh),
                        Err(e) => tracing::warn!("leader election (retrying): {e}"),
                    }
                }
            }
        });
        Ok(Election { manager, task })
    }

    /// Stop taking part and release the Lease if this replica holds it.
    ///
    /// # Errors
    /// The Lease could not be released (it then expires on its own).
    pub async fn release(self) -> kube_lease_manager::Result<()> {
        self.task.abort();
        let _ = self.task.await;
        let manager = self.manager.lock().await.clone();
        manager.release().await
    }
}
