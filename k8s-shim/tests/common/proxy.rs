//! A TCP proxy between schedulers and the API server, for fault tests: it
//! passes bytes (TLS included) through untouched, and the test can add
//! latency to every chunk and cut every open connection at once (watches
//! break and are made again; in-flight requests lose their answers).
//!
//! It runs on a runtime and thread of its own, so that a test thread
//! blocked in a synchronous wait (a scheduler starting) never stalls the
//! connections of the schedulers it waits for.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Knobs shared by the proxy's tasks.
struct Knobs {
    /// Added before each chunk is passed on, milliseconds.
    latency_ms: AtomicU64,
    /// Connections accepted, and cut, so far.
    accepted: AtomicU64,
    cut: AtomicU64,
}

/// A running proxy on 127.0.0.1; stopped when dropped.
pub struct Proxy {
    pub addr: SocketAddr,
    knobs: Arc<Knobs>,
    /// Bumped to cut every open connection.
    generation: watch::Sender<u64>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Proxy {
    /// Listen on 127.0.0.1:`port` and forward every connection to
    /// `upstream`.
    pub fn start(port: u16, upstream: SocketAddr) -> Proxy {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("chaos-proxy")
            .enable_all()
            .build()
            .expect("a runtime for the proxy");
        let knobs = Arc::new(Knobs {
            latency_ms: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
            cut: AtomicU64::new(0),
        });
        let (generation, _) = watch::channel(0u64);
        // Bound here, not on the runtime: the caller may be on a runtime
        // of its own, where blocking on another is refused.
        let listener = std::net::TcpListener::bind(("127.0.0.1", port)).expect("the proxy's port");
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let (k, g) = (knobs.clone(), generation.clone());
        runtime.spawn(async move {
            let listener = TcpListener::from_std(listener).expect("a tokio listener");
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                k.accepted.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(serve(client, upstream, k.clone(), g.subscribe()));
            }
        });
        Proxy {
            addr,
            knobs,
            generation,
            runtime: Some(runtime),
        }
    }

    pub fn set_latency(&self, latency: Duration) {
        self.knobs
            .latency_ms
            .store(latency.as_millis() as u64, Ordering::Relaxed);
    }

    /// Close every connection open now (both sides); new ones are accepted.
    pub fn cut_all(&self) {
        self.generation.send_modify(|g| *g += 1);
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.knobs.accepted.load(Ordering::Relaxed)
    }

    /// Connections closed by [`Proxy::cut_all`] so far.
    pub fn cut(&self) -> u64 {
        self.knobs.cut.load(Ordering::Relaxed)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// One connection: both directions until either side closes or a cut.
async fn serve(
    client: TcpStream,
    upstream: SocketAddr,
    knobs: Arc<Knobs>,
    mut cut: watch::Receiver<u64>,
) {
    // A connection opened before a cut but dialled after it is not cut.
    cut.borrow_and_update();
    // The API server may be down (a restart): the client sees its
    // connection closed, as it would without a proxy.
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    tokio::select! {
        _ = pipe(cr, sw, &knobs) => {}
        _ = pipe(sr, cw, &knobs) => {}
        _ = cut.changed() => {
            knobs.cut.fetch_add(1, Ordering::Relaxed);
        }
    }
    // Dropping the halves closes both sockets.
}

/// Copy `from` to `to`, each chunk held back by the latency set now.
async fn pipe(from: OwnedReadHalf, to: OwnedWriteHalf, knobs: &Knobs) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if from.readable().await.is_err() {
            return;
        }
        let n = match from.try_read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(_) => return,
        };
        let latency = knobs.latency_ms.load(Ordering::Relaxed);
        if latency > 0 {
            tokio::time::sleep(Duration::from_millis(latency)).await;
        }
        let mut sent = 0;
        while sent < n {
            if to.writable().await.is_err() {
                return;
            }
            match to.try_write(&buf[sent..n]) {
                Ok(m) => sent += m,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(_) => return,
            }
        }
    }
}
