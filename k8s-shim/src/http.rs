//! `/metrics`, `/healthz`, `/readyz`, `/shadow`, and the questions of
//! `kubectl dragon` under `/dragon/v1` ([`crate::insight::serve`]).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;

use crate::insight::serve::{Insight, routes};
use crate::metrics::Metrics;

/// Serve on `addr` (by default loopback only: not exposed beyond the pod).
///
/// # Errors
/// The address cannot be bound.
pub async fn spawn(
    addr: &str,
    metrics: Arc<Metrics>,
    stuck_after: Duration,
    insight: Arc<Insight>,
) -> Result<()> {
    let m1 = metrics.clone();
    let m2 = metrics.clone();
    let m3 = metrics.clone();
    let app = Router::new()
        .route(
            "/metrics",
            get(move || {
                let m = m1.clone();
                async move { ([("content-type", "text/plain; version=0.0.4")], m.render()) }
            }),
        )
        .route(
            "/healthz",
            get(move || {
                let m = m2.clone();
                async move {
                    let now = crate::clock::now_ms();
                    match m.health.check(now, stuck_after.as_millis() as u64) {
                        Ok(()) => (StatusCode::OK, "ok".to_string()),
                        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why.to_string()),
                    }
                }
            }),
        )
        .route(
            "/shadow",
            get(move || {
                let m = m3.clone();
                async move {
                    let view = m.shadow.lock().unwrap_or_else(|p| p.into_inner()).clone();
                    (
                        [("content-type", "application/json")],
                        serde_json::to_string_pretty(&view).unwrap_or_default(),
                    )
                }
            }),
        )
        .route(
            "/readyz",
            get(move || {
                let m = metrics.clone();
                async move {
                    if m.is_ready() {
                        (StatusCode::OK, "ok")
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, "listing the cluster")
                    }
                }
            }),
        )
        .merge(routes(insight));
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    tracing::info!(
        addr,
        "serving /metrics, /healthz, /readyz, /shadow, /dragon/v1"
    );
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!("metrics server stopped: {e}");
        }
    });
    Ok(())
}
