//! A client-side token bucket for API requests, as client-go's
//! `flowcontrol.NewTokenBucketRateLimiter(qps, burst)`: it starts full with
//! `burst` tokens, refills at `qps` per second, and a request that finds it
//! empty waits for its token (reserved at once, so callers are served in
//! order and the long-run rate never exceeds `qps`).

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// `clientQps` / `clientBurst` of the config.
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// May go negative: tokens already promised to waiting callers.
    tokens: f64,
    at: Instant,
}

impl TokenBucket {
    /// A full bucket; `qps` > 0 and finite, `burst` ≥ 1 (checked by the config).
    pub fn new(qps: f64, burst: u32) -> TokenBucket {
        TokenBucket::new_at(qps, burst, Instant::now())
    }

    fn new_at(qps: f64, burst: u32, now: Instant) -> TokenBucket {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            qps,
            burst,
            state: Mutex::new(State {
                tokens: burst,
                at: now,
            }),
        }
    }

    /// Take one token at `now`; returns how long the caller must wait
    /// before using it.
    fn reserve_at(&self, now: Instant) -> Duration {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let elapsed = now.saturating_duration_since(s.at).as_secs_f64();
        s.tokens = (s.tokens + elapsed * self.qps).min(self.burst);
        s.at = now.max(s.at);
        s.tokens -= 1.0;
        if s.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-s.tokens / self.qps)
        }
    }

    /// Wait for a token: it is reserved when this is first polled, then the
    /// task sleeps until it may use it, so
    /// concurrent requests still start no faster than the bucket allows and
    /// in the order they asked.
    pub async fn ready(&self) {
        let d = self.reserve_at(Instant::now());
        if !d.is_zero() {
            tokio::time::sleep(d).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_passes_then_requests_are_spaced_at_qps() {
        let t0 = Instant::now();
        let b = TokenBucket::new_at(50.0, 100, t0);
        for _ in 0..100 {
            assert_eq!(b.reserve_at(t0), Duration::ZERO);
        }
        // Bucket empty: the next ones wait 20 ms, 40 ms, 60 ms...
        let waits: Vec<u128> = (0..3).map(|_| b.reserve_at(t0).as_millis()).collect();
        assert_eq!(waits, vec![20, 40, 60]);
        // After 1 s, 50 tokens came back; 3 were promised already.
        let t1 = t0 + Duration::from_secs(1);
        for _ in 0..47 {
            assert_eq!(b.reserve_at(t1), Duration::ZERO);
        }
        assert_eq!(b.reserve_at(t1).as_millis(), 20);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_async_callers_start_no_faster_than_the_bucket_allows() {
        let b = std::sync::Arc::new(TokenBucket::new(50.0, 2));
        let t0 = Instant::now();
        let tasks: Vec<_> = (0..5)
            .map(|_| {
                let b = b.clone();
                tokio::spawn(async move {
                    b.ready().await;
                    Instant::now()
                })
            })
            .collect();
        let mut starts = Vec::new();
        for t in tasks {
            starts.push(t.await.unwrap().duration_since(t0));
        }
        starts.sort_unstable();
        // Two from the burst at once, then one every 20 ms: never earlier
        // (a sleep may overshoot on a loaded machine, so only a loose upper
        // bound).
        for (start, due_ms) in starts.iter().zip([0u64, 0, 20, 40, 60]) {
            let due = Duration::from_millis(due_ms);
            assert!(
                *start + Duration::from_millis(1) >= due && *start < due + Duration::from_secs(2),
                "{starts:?}"
            );
        }
    }

    #[test]
    fn an_idle_bucket_refills_only_up_to_burst() {
        let t0 = Instant::now();
        let b = TokenBucket::new_at(10.0, 5, t0);
        let t1 = t0 + Duration::from_secs(60);
        for _ in 0..5 {
            assert_eq!(b.reserve_at(t1), Duration::ZERO);
        }
        assert_eq!(b.reserve_at(t1).as_millis(), 100);
    }
}
