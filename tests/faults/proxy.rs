//! Fault injection between a controller and the API server, on loopback only.
//!
//! - [`Proxy`]: a TCP proxy (TLS passes through untouched: the client still verifies the
//!   API server's certificate, which is valid for 127.0.0.1) with connection-level faults:
//!   added latency, resets, stalls (accepted, never answered: a black hole that discards
//!   what it reads, so nothing sent during a stall lands later), and cutting every open
//!   connection (watch streams included).
//! - [`HttpFaults`]: a layer over a `kube::Client` answering a share of requests itself
//!   with 429 (and `Retry-After`) or 500/503, before they reach the proxy or the server:
//!   HTTP-level faults need no TLS termination there.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the proxy does to connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Forward.
    Pass,
    /// Forward, each chunk delayed.
    Latency(Duration),
    /// Accept and reset at once; open connections are reset too.
    Reset,
    /// Accept and never answer (discard what is read); open connections go silent too.
    Stall,
}

/// Counters of what the proxy did.
#[derive(Debug, Default)]
pub struct Stats {
    /// Connections accepted.
    pub accepted: AtomicU64,
    /// Connections reset or cut by a fault.
    pub cut: AtomicU64,
    /// Bytes discarded by a stall.
    pub discarded: AtomicU64,
}

/// A fault-injecting TCP proxy to `upstream`, listening on 127.0.0.1.
pub struct Proxy {
    /// Where clients connect.
    pub addr: SocketAddr,
    mode: watch::Sender<Mode>,
    /// Bumped to cut every open connection.
    epoch: watch::Sender<u64>,
    /// Counters.
    pub stats: Arc<Stats>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Starts a proxy to `upstream` (which must be on loopback) in [`Mode::Pass`].
    pub async fn start(upstream: SocketAddr) -> Self {
        assert!(
            upstream.ip().is_loopback(),
            "fault tests only target loopback"
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (mode, mode_rx) = watch::channel(Mode::Pass);
        let (epoch, epoch_rx) = watch::channel(0u64);
        let stats = Arc::new(Stats::default());
        let st = stats.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    continue;
                };
                st.accepted.fetch_add(1, Ordering::Relaxed);
                let (m, e, st) = (mode_rx.clone(), epoch_rx.clone(), st.clone());
                tokio::spawn(connection(sock, upstream, m, e, st));
            }
        });
        Self {
            addr,
            mode,
            epoch,
            stats,
            task,
        }
    }

    /// Switches the fault mode (open connections follow it: a reset or stall hits them).
    pub fn set(&self, m: Mode) {
        self.mode.send_replace(m);
        if matches!(m, Mode::Reset) {
            self.cut_all();
        }
    }

    /// Cuts every open connection (watch streams included).
    pub fn cut_all(&self) {
        self.epoch.send_modify(|e| *e += 1);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut_all();
        self.task.abort();
    }
}

async fn reset(sock: TcpStream) {
    // Linger 0: close with RST instead of FIN.
    let _ = sock.set_zero_linger();
    drop(sock);
}

async fn black_hole(mut sock: TcpStream, st: &Stats) {
    let mut buf = [0u8; 16 * 1024];
    while let Ok(n) = sock.read(&mut buf).await {
        if n == 0 {
            return;
        }
        st.discarded.fetch_add(n as u64, Ordering::Relaxed);
    }
}

async fn connection(
    sock: TcpStream,
    upstream: SocketAddr,
    mut mode: watch::Receiver<Mode>,
    mut epoch: watch::Receiver<u64>,
    st: Arc<Stats>,
) {
    let _ = sock.set_nodelay(true);
    let m = *mode.borrow_and_update();
    match m {
        Mode::Reset => {
            st.cut.fetch_add(1, Ordering::Relaxed);
            return reset(sock).await;
        }
        Mode::Stall => {
            // A black hole until the stall ends, then the connection is cut: what was sent
            // into it is lost, as in a partition.
            tokio::select! {
                () = black_hole_owned(sock, st.clone()) => {}
                () = async { let _ = mode.wait_for(|m| *m != Mode::Stall).await; } => {
                    st.cut.fetch_add(1, Ordering::Relaxed);
                }
            }
            return;
        }
        Mode::Latency(d) => tokio::time::sleep(d).await,
        Mode::Pass => {}
    }
    let Ok(up) = TcpStream::connect(upstream).await else {
        return reset(sock).await;
    };
    let _ = up.set_nodelay(true);
    let _ = epoch.borrow_and_update();
    let (cr, cw) = sock.into_split();
    let (ur, uw) = up.into_split();
    let stalled = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let a = pump(cr, uw, mode.clone(), stalled.clone(), st.clone());
    let b = pump(ur, cw, mode.clone(), stalled.clone(), st.clone());
    tokio::select! {
        () = async { tokio::join!(a, b); } => {}
        _ = epoch.changed() => {
            st.cut.fetch_add(1, Ordering::Relaxed);
        }
        () = async {
            // An open connection that went through a stall is cut when the stall ends.
            let _ = mode.wait_for(|m| *m == Mode::Stall).await;
            let _ = mode.wait_for(|m| *m != Mode::Stall).await;
        } => {
            st.cut.fetch_add(1, Ordering::Relaxed);
        }
    }
}

async fn black_hole_owned(sock: TcpStream, st: Arc<Stats>) {
    black_hole(sock, &st).await;
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mode: watch::Receiver<Mode>,
    stalled: Arc<std::sync::atomic::AtomicBool>,
    st: Arc<Stats>,
) {
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(n) => n,
        };
        let m = *mode.borrow();
        match m {
            Mode::Stall => {
                stalled.store(true, Ordering::Relaxed);
                st.discarded.fetch_add(n as u64, Ordering::Relaxed);
                continue;
            }
            Mode::Latency(d) => tokio::time::sleep(d).await,
            Mode::Pass | Mode::Reset => {}
        }
        if stalled.load(Ordering::Relaxed) || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// HTTP-level faults: answers every `every`-th request with `status` itself.
#[derive(Debug, Default)]
pub struct HttpFaults {
    /// (status, every n-th request, Retry-After seconds); status 0: off.
    rule: Mutex<(u16, u64, u64)>,
    seen: AtomicU64,
    /// Requests answered by the layer.
    pub injected: AtomicU64,
}

impl HttpFaults {
    /// Answers every `every`-th request (watches included) with `status`
    /// (`Retry-After: retry_after` on a 429).
    pub fn set(&self, status: u16, every: u64, retry_after: u64) {
        *self.rule.lock().unwrap() = (status, every.max(1), retry_after);
    }

    /// Stops injecting.
    pub fn off(&self) {
        self.set(0, 1, 0);
    }

    fn pick(&self) -> Option<(u16, u64)> {
        let (status, every, ra) = *self.rule.lock().unwrap();
        let n = self.seen.fetch_add(1, Ordering::Relaxed);
        (status != 0 && n.is_multiple_of(every)).then_some((status, ra))
    }
}

/// `client` with `faults` in front of it.
pub fn faulty_client(client: kube::Client, faults: Arc<HttpFaults>) -> kube::Client {
    let ns = client.default_namespace().to_owned();
    let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let client = client.clone();
        let faults = faults.clone();
        async move {
            if let Some((status, ra)) = faults.pick() {
                faults.injected.fetch_add(1, Ordering::Relaxed);
                let body = serde_json::json!({
                    "kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "message": "injected by the fault tests", "code": status,
                    "reason": if status == 429 { "TooManyRequests" } else { "InternalError" },
                });
                let mut b = http::Response::builder().status(status);
                if status == 429 {
                    b = b.header(http::header::RETRY_AFTER, ra.to_string());
                }
                return Ok::<_, kube::Error>(
                    b.header(http::header::CONTENT_TYPE, "application/json")
                        .body(kube::client::Body::from(body.to_string().into_bytes()))
                        .unwrap(),
                );
            }
            client.send(req).await
        }
    });
    kube::Client::new(svc, ns)
}

/// A client of `KUBECONFIG`'s identity that connects through `proxy`.
pub async fn client_via(proxy: &Proxy, faults: Arc<HttpFaults>) -> kube::Client {
    let mut cfg = kube::Config::infer().await.unwrap();
    cfg.cluster_url = format!("https://{}", proxy.addr).parse().unwrap();
    cfg.connect_timeout = Some(Duration::from_secs(3));
    // The certificate names 127.0.0.1, where the proxy listens too.
    faulty_client(kube::Client::try_from(cfg).unwrap(), faults)
}

/// The API server's address, from `KUBECONFIG`.
pub async fn api_server_addr() -> SocketAddr {
    let cfg = kube::Config::infer().await.unwrap();
    let host = cfg.cluster_url.host().unwrap().to_owned();
    let port = cfg.cluster_url.port_u16().unwrap_or(443);
    format!("{host}:{port}").parse().unwrap()
}
