//! The WASI a policy gets when its component imports WASI, as the Python
//! and JavaScript runtimes do: capability-free and deterministic.
//!
//! - No files (nothing preopened), no network (every address refused, no
//!   name lookup), no environment, no arguments, an empty stdin.
//! - The clocks read the time of the call in progress (the `now` its
//!   arguments carry), never the host's: a policy cannot tell a replay from
//!   the recorded run.
//! - Random numbers come from one generator seeded alike for every instance,
//!   so a replay draws what the recorded run drew (CPython seeds its string
//!   hashing from it).
//! - Waiting (`wasi:io/poll`) traps: a host-side wait cannot be interrupted
//!   at the call's deadline, so a policy that sleeps would hold the
//!   scheduler.
//! - What the policy writes to stdout and stderr is kept, its last
//!   [`TAIL_BYTES`] only, to explain a trap (an uncaught Python exception is
//!   printed there before the runtime aborts).
//!
//! A component that imports nothing of WASI is linked without it.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use wasmtime::component::{Linker, Resource, ResourceTable};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{DynPollable, OutputStream, Pollable, StreamResult};
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder, WasiView};

/// The WASI packages this host links, at version 0.2.x.
const PACKAGES: &[&str] = &[
    "wasi:cli/",
    "wasi:clocks/",
    "wasi:filesystem/",
    "wasi:io/",
    "wasi:random/",
    "wasi:sockets/",
];

/// The `wasi:io` version wasmtime-wasi defines (a guest's older 0.2.x
/// imports are served by it under semver).
const POLL: &str = "wasi:io/poll@0.2.12";

/// How much of a policy's output is kept.
pub const TAIL_BYTES: usize = 4096;

/// The seed of every instance's random numbers.
const SEED: u64 = 0x6472_6167_6f6e; // "dragon"

/// Whether `import` (`wasi:io/poll@0.2.9`) is an interface of WASI 0.2.
pub(crate) fn is_wasi(import: &str) -> bool {
    let (iface, version) = import.split_once('@').unwrap_or((import, ""));
    PACKAGES.iter().any(|p| iface.starts_with(p))
        && semver::Version::parse(version).is_ok_and(|v| v.major == 0 && v.minor == 2)
}

/// The time of the call in progress, shared by a policy and its instances'
/// clocks. It never goes back: a monotonic clock must not.
#[derive(Clone, Default)]
pub(crate) struct CallClock(Arc<AtomicU64>);

impl CallClock {
    pub(crate) fn set(&self, now_ms: u64) {
        self.0.fetch_max(now_ms, Ordering::Relaxed);
    }

    fn ms(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl HostWallClock for CallClock {
    fn resolution(&self) -> Duration {
        Duration::from_millis(1)
    }

    fn now(&self) -> Duration {
        Duration::from_millis(self.ms())
    }
}

impl HostMonotonicClock for CallClock {
    fn resolution(&self) -> u64 {
        1_000_000
    }

    fn now(&self) -> u64 {
        self.ms().saturating_mul(1_000_000)
    }
}

/// SplitMix64: small, fast and fully determined by its seed. WASI's
/// "secure" random is only as secure as the host makes it; a policy has no
/// secret to protect, and replay needs the same numbers.
struct SplitMix(u64);

impl rand_core::TryRng for SplitMix {
    type Error = std::convert::Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        Ok((self.try_next_u64()? >> 32) as u32)
    }

    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Ok(z ^ (z >> 31))
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        for chunk in dst.chunks_mut(8) {
            let word = self.try_next_u64()?.to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
        Ok(())
    }
}

/// The last [`TAIL_BYTES`] a policy wrote to stdout and stderr; writing
/// never fails and never holds more.
#[derive(Clone, Default)]
pub(crate) struct Tail(Arc<Mutex<VecDeque<u8>>>);

impl Tail {
    fn push(&self, bytes: &[u8]) {
        let mut tail = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let keep = &bytes[bytes.len().saturating_sub(TAIL_BYTES)..];
        let overflow = (tail.len() + keep.len()).saturating_sub(TAIL_BYTES);
        tail.drain(..overflow);
        tail.extend(keep);
    }

    /// The line that explains a trap, if any was written: the exception
    /// of the last Python traceback (the first unindented line after it),
    /// the message and innermost frame of a JavaScript error
    /// (StarlingMonkey prints the message, then `Stack:` and the frames),
    /// else the last line that is not a runtime's note.
    pub(crate) fn last_line(&self) -> Option<String> {
        let tail = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let (a, b) = tail.as_slices();
        let text = String::from_utf8_lossy(&[a, b].concat()).into_owned();
        if let Some((_, after)) = text.rsplit_once("Traceback (most recent call last):") {
            let exception = after
                .lines()
                .find(|l| !l.is_empty() && !l.starts_with(char::is_whitespace));
            if let Some(line) = exception {
                return Some(line.trim().to_string());
            }
        }
        if let Some((before, after)) = text.rsplit_once("\nStack:\n") {
            let message = before.lines().rev().map(str::trim).find(|l| !l.is_empty());
            let frame = after.lines().map(str::trim).find(|l| !l.is_empty());
            if let Some(message) = message {
                return Some(match frame {
                    Some(frame) => format!("{message} (at {frame})"),
                    None => message.to_string(),
                });
            }
        }
        text.lines()
            .rev()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with("note: "))
            .map(str::to_string)
    }

    /// Forget what was written (each call starts afresh).
    pub(crate) fn clear(&self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

impl IsTerminal for Tail {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for Tail {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

impl OutputStream for Tail {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 * 1024)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for Tail {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for Tail {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// What a policy's instances share: the call's time and the output tail.
#[derive(Clone, Default)]
pub(crate) struct Guest {
    pub(crate) clock: CallClock,
    pub(crate) output: Tail,
}

impl Guest {
    /// WASI state for a new instance.
    pub(crate) fn sandbox(&self) -> Sandbox {
        Sandbox::new(&self.clock, &self.output)
    }
}

/// One instance's WASI state.
pub(crate) struct Sandbox {
    ctx: WasiCtx,
    table: ResourceTable,
}

impl Sandbox {
    /// The context and resources WASI calls work on.
    pub(crate) fn view(&mut self) -> wasmtime_wasi::WasiCtxView<'_> {
        wasmtime_wasi::WasiCtxView {
            ctx: &mut self.ctx,
            table: &mut self.table,
        }
    }

    pub(crate) fn new(clock: &CallClock, output: &Tail) -> Sandbox {
        let ctx = WasiCtxBuilder::new()
            .wall_clock(clock.clone())
            .monotonic_clock(clock.clone())
            .secure_random(SplitMix(SEED))
            .insecure_random(SplitMix(SEED ^ 1))
            .insecure_random_seed(u128::from(SEED))
            .stdout(output.clone())
            .stderr(output.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .socket_addr_check(|_, _| Box::pin(async { false }))
            .build();
        Sandbox {
            ctx,
            table: ResourceTable::new(),
        }
    }
}

/// Add WASI 0.2 to `linker`, with waiting refused.
pub(crate) fn add_to_linker<T: WasiView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_sync(linker)?;
    linker.allow_shadowing(true);
    let refuse = || {
        wasmtime::format_err!(
            "the policy tried to wait (wasi:io/poll), which a policy may not: a wait cannot be interrupted at the call's deadline"
        )
    };
    let mut poll = linker.instance(POLL)?;
    poll.func_wrap(
        "poll",
        move |_, _: (Vec<Resource<DynPollable>>,)| -> wasmtime::Result<(Vec<u32>,)> {
            Err(refuse())
        },
    )?;
    poll.func_wrap(
        "[method]pollable.block",
        move |_, _: (Resource<DynPollable>,)| -> wasmtime::Result<()> { Err(refuse()) },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wasi_imports_are_those_of_version_0_2() {
        assert!(is_wasi("wasi:io/poll@0.2.9"));
        assert!(is_wasi("wasi:cli/environment@0.2.0"));
        assert!(!is_wasi("wasi:http/types@0.2.0"));
        assert!(!is_wasi("wasi:io/poll@0.3.0"));
        assert!(!is_wasi("wasi:io/poll"));
        assert!(!is_wasi("dragon:scheduler/host@0.2.0"));
    }

    #[test]
    fn the_clock_reads_the_latest_call_and_never_goes_back() {
        let clock = CallClock::default();
        clock.set(5_000);
        clock.set(4_000);
        assert_eq!(HostWallClock::now(&clock), Duration::from_secs(5));
        assert_eq!(HostMonotonicClock::now(&clock), 5_000_000_000);
    }

    #[test]
    fn random_numbers_are_the_same_for_every_instance() {
        use rand_core::TryRng;
        let draw = || {
            let mut r = SplitMix(SEED);
            let mut buf = [0u8; 13];
            r.try_fill_bytes(&mut buf).unwrap_or_default();
            buf
        };
        assert_eq!(draw(), draw());
        assert_ne!(draw(), [0u8; 13]);
    }

    #[test]
    fn the_tail_keeps_the_last_bytes_and_finds_the_last_line() {
        let tail = Tail::default();
        tail.push(b"Traceback (most recent call last):\n  File \"app.py\"\n");
        tail.push(b"    raise ValueError(x)\nValueError: bad\n\nthread panicked\n");
        tail.push(b"note: run with `RUST_BACKTRACE=1`\n");
        assert_eq!(tail.last_line().as_deref(), Some("ValueError: bad"));
        tail.clear();
        tail.push(b"plain line\nnote: a note\n");
        assert_eq!(tail.last_line().as_deref(), Some("plain line"));
        tail.clear();
        tail.push(b"no room\nStack:\n  score@app.js:54:11\n  export@init.js:7:1\n\n");
        tail.push(b"Redirecting call to abort() to mozalloc_abort\n");
        assert_eq!(
            tail.last_line().as_deref(),
            Some("no room (at score@app.js:54:11)")
        );
        tail.push(&vec![b'x'; 3 * TAIL_BYTES]);
        assert_eq!(tail.0.lock().map(|t| t.len()).unwrap_or(0), TAIL_BYTES);
        tail.clear();
        assert_eq!(tail.last_line(), None);
    }
}
