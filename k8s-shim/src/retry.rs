//! How the client retries a request the API server refuses for load (429,
//! 503, 504): after the server's `Retry-After` (else a backoff of 50 ms
//! doubling to 2 s), plus up to as much again at random, at most 10 times.
//!
//! The random part matters: a round's binds go out together, so a refused
//! burst would otherwise come back together after exactly `Retry-After` and
//! be refused again, wave after wave, while the gang members already bound
//! wait for the rest. kube's default policy also waits up to 1,000 s between
//! attempts; a round cannot wait that long.

use std::time::Duration;

use http::{Request, Response, StatusCode};
use kube::client::Body;
use tower::BoxError;
use tower::util::rng::{HasherRng, Rng};

/// Most attempts after the first.
const MAX_RETRIES: u32 = 10;
/// First backoff when the server names no `Retry-After`.
const MIN_BACKOFF: Duration = Duration::from_millis(50);
/// Longest backoff, and longest `Retry-After` honoured as given.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// The retry policy of dragon-scheduler's client (one per request).
#[derive(Clone)]
pub struct RetryAfter {
    attempt: u32,
    rng: HasherRng,
}

impl Default for RetryAfter {
    fn default() -> Self {
        RetryAfter {
            attempt: 0,
            rng: HasherRng::new(),
        }
    }
}

impl RetryAfter {
    /// The wait before attempt `self.attempt + 1`, given the server's
    /// `Retry-After` in seconds if it sent one.
    fn wait(&mut self, retry_after: Option<u64>) -> Duration {
        let base = match retry_after {
            Some(s) => Duration::from_secs(s).min(MAX_BACKOFF),
            None => MIN_BACKOFF
                .saturating_mul(1 << self.attempt.min(16))
                .min(MAX_BACKOFF),
        };
        base + base.mul_f64(self.rng.next_f64())
    }
}

fn retryable(status: StatusCode) -> bool {
    matches!(
        status,
        StatusCode::TOO_MANY_REQUESTS
            | StatusCode::SERVICE_UNAVAILABLE
            | StatusCode::GATEWAY_TIMEOUT
    )
}

fn is_eviction<B>(req: &Request<B>) -> bool {
    req.uri().path().ends_with("/eviction")
}

impl<B> tower::retry::Policy<Request<Body>, Response<B>, BoxError> for RetryAfter {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        req: &mut Request<Body>,
        result: &mut Result<Response<B>, BoxError>,
    ) -> Option<Self::Future> {
        let response = result.as_ref().ok()?;
        if !retryable(response.status()) || self.attempt >= MAX_RETRIES {
            return None;
        }
        // An eviction's 429 is a PodDisruptionBudget's answer, not load:
        // asking again at once will not change it.
        if response.status() == StatusCode::TOO_MANY_REQUESTS && is_eviction(req) {
            return None;
        }
        let retry_after = response
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let wait = self.wait(retry_after);
        self.attempt += 1;
        Some(tokio::time::sleep(wait))
    }

    fn clone_request(&mut self, req: &Request<Body>) -> Option<Request<Body>> {
        let body = req.body().try_clone()?;
        let mut clone = Request::builder()
            .method(req.method().clone())
            .uri(req.uri().clone())
            .version(req.version())
            .body(body)
            .ok()?;
        *clone.headers_mut() = req.headers().clone();
        *clone.extensions_mut() = req.extensions().clone();
        Some(clone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_retry_after_plus_jitter_and_backs_off_without_one() {
        let mut p = RetryAfter::default();
        for _ in 0..100 {
            let w = p.wait(Some(1));
            assert!(
                w >= Duration::from_secs(1) && w < Duration::from_secs(2),
                "{w:?}"
            );
        }
        // An absurd Retry-After is capped.
        assert!(p.wait(Some(1_000)) < MAX_BACKOFF * 2);
        p.attempt = 0;
        let first = p.wait(None);
        assert!(first >= MIN_BACKOFF && first < MIN_BACKOFF * 2, "{first:?}");
        p.attempt = 30;
        assert!(p.wait(None) < MAX_BACKOFF * 2);
    }

    #[tokio::test]
    async fn an_eviction_refused_by_a_disruption_budget_is_not_retried() {
        use tower::retry::Policy as _;
        let mut p = RetryAfter::default();
        let answer = |status: u16| -> Result<Response<()>, BoxError> {
            Ok(Response::builder().status(status).body(()).unwrap())
        };
        let request = |path: &str| Request::post(path).body(Body::empty()).unwrap();
        let mut eviction = request("/api/v1/namespaces/ml/pods/p/eviction");
        let mut binding = request("/api/v1/namespaces/ml/pods/p/binding");
        assert!(p.retry(&mut eviction, &mut answer(429)).is_none());
        assert!(p.retry(&mut eviction, &mut answer(503)).is_some());
        assert!(p.retry(&mut binding, &mut answer(429)).is_some());
    }
}
