//! Real traffic through the whole datapath: the shipped class `traefik-certmanager-externaldns`
//! drives Traefik (tests/cluster/downstream runs it: a Gateway API dataplane as a process),
//! configured as a platform team would, by a `GatewayClassConfig`: `traefik.gatewayClassName`
//! the GatewayClass Traefik runs here, `traefik.ports` mapping the parent's listener ports 80
//! and 443 to the ports of Traefik's entrypoints, and the real cert-manager's CA issuer.
//! Nothing is simulated: Traefik programs the child Gateway and the shadow routes and writes
//! their status, cert-manager issues the certificate Traefik serves, external-dns publishes
//! the records.
//!
//! Backends are processes of our own (tests/traffic/echo.py: it answers with its name and
//! the request as JSON), one per "pod", each on its own address in a network namespace the
//! test creates (a veth pair, addresses from 198.18.0.0/15, the benchmarking range: the API
//! server refuses loopback addresses in EndpointSlices), behind a Service without a
//! selector and an EndpointSlice naming that address. Requests go to Traefik's entrypoints
//! on 127.0.0.1 with the Host header (and SNI) set.
//!
//! What it proves, each figure printed: (a) requests reach the backend the route names by
//! hostname, path, header and method; (a') request and response header filters, a redirect
//! and a rewrite act as written on the user's route; (b) weights 70/30 and a Flagger-like
//! sequence of canary weights (0, 10, 30, 50, 100) give each backend its share of 400
//! requests within ±5 points; (c) HTTPS shows the certificate cert-manager issued, with
//! exactly the route's names; (d) a client sending HTTPS requests continuously while a
//! hostname is added (the certificate replaced make-before-break through real issuance)
//! sees no failed request and no failed handshake; (e) a hostname removed from the route is
//! answered until external-dns has deleted its record, and only then answered 404; (f) a
//! client sending HTTPS requests continuously while the issuer is broken, a hostname is
//! added, and the issuer is mended sees no failed request and no failed handshake, and the
//! new name is served over HTTPS once its certificate is issued; (g) with the API server
//! killed and away 3 s, every request is still answered (Traefik keeps its last
//! configuration), and a weight change reaches the dataplane once it is back; (h) a canary
//! driven by the real Flagger gives the canary its share at each of Flagger's weights, and
//! the primary every request after the promotion (tests/traffic/flagger.rs); (i) a client
//! sending requests back to back while the route is re-applied every 200 ms for 20 rounds,
//! alternating its backend's port and a response header filter (the public Gateway API
//! benchmark's route-change scenario), gets a 200 for every request and the last round's
//! answer at the end (tests/traffic/routechange.rs, a test of its own).
//!
//! Needs tests/cluster/downstream with Traefik (the default; `DOWNSTREAM_TRAEFIK=0` turns it
//! off): on the harness's cluster the test runs `tests/cluster/downstream up` itself (a no-op
//! while it runs); elsewhere, `GATEWRIGHT_DOWNSTREAM_ENV` names a file like its
//! `downstream.env`. Creating the network namespace needs root (`ip netns`).
#![cfg(feature = "cluster-tests")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

#[allow(
    dead_code,
    reason = "shared with the e2e binary; not every helper is used here"
)]
#[path = "e2e/common.rs"]
mod common;
#[path = "traffic/flagger.rs"]
mod flagger;
#[path = "traffic/routechange.rs"]
mod routechange;
#[path = "traffic/tenancy.rs"]
mod tenancy;

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Write as _};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};

use common::{admin, apply_yaml, unique_name, wait_for};

const T: Duration = Duration::from_secs(90);
/// Requests per measured weight step.
const REQUESTS: usize = 400;
/// How far a backend's share may be from its weight, in percentage points.
const TOLERANCE: f64 = 5.0;
/// The port every backend listens on, in its own address.
const BACKEND_PORT: u16 = 8080;

/// What `tests/cluster/downstream up` wrote: where the real controllers act, and Traefik's
/// entrypoints.
struct Downstream {
    namespace: String,
    zone: String,
    ca_issuer: (String, String),
    traefik_class: String,
    web_port: u16,
    websecure_port: u16,
    netns_dir: PathBuf,
    external_dns_log: PathBuf,
}

/// Reads `downstream.env` (beside the kubeconfig of the harness's cluster, or
/// `GATEWRIGHT_DOWNSTREAM_ENV`), starting the downstream first on the harness's cluster.
fn downstream() -> Downstream {
    let env_file = if let Some(f) = std::env::var_os("GATEWRIGHT_DOWNSTREAM_ENV") {
        PathBuf::from(f)
    } else {
        let kubeconfig = PathBuf::from(
            std::env::var_os("KUBECONFIG").expect("KUBECONFIG (scripts/test.sh sets it)"),
        );
        let dir = kubeconfig.parent().unwrap().to_owned();
        assert!(
            dir.join(".gatewright-cluster").exists(),
            "KUBECONFIG is not a cluster of tests/cluster/up: run cert-manager, external-dns \
             and Traefik as tests/cluster/downstream does and set GATEWRIGHT_DOWNSTREAM_ENV"
        );
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cluster/downstream");
        let status = Command::new(script)
            .arg("up")
            .env("GATEWRIGHT_CLUSTER_DIR", &dir)
            .stdout(Stdio::null())
            .status()
            .expect("run tests/cluster/downstream");
        assert!(status.success(), "tests/cluster/downstream up failed");
        dir.join("downstream.env")
    };
    let text = std::fs::read_to_string(&env_file)
        .unwrap_or_else(|e| panic!("read {}: {e}", env_file.display()));
    let env: BTreeMap<&str, &str> = text.lines().filter_map(|l| l.split_once('=')).collect();
    let traefik = |key: &str| {
        *env.get(key).unwrap_or_else(|| {
            panic!(
                "{} names no Traefik ({key}): start tests/cluster/downstream without \
                 DOWNSTREAM_TRAEFIK=0",
                env_file.display()
            )
        })
    };
    Downstream {
        namespace: env["namespace"].to_owned(),
        zone: env["zones"].split_whitespace().next().unwrap().to_owned(),
        ca_issuer: (
            env["ca_issuer_kind"].to_owned(),
            env["ca_issuer"].to_owned(),
        ),
        traefik_class: traefik("traefik_gateway_class").to_owned(),
        web_port: traefik("traefik_web_port").parse().unwrap(),
        websecure_port: traefik("traefik_websecure_port").parse().unwrap(),
        netns_dir: PathBuf::from(traefik("netns_dir")),
        external_dns_log: PathBuf::from(env["external_dns_log"]),
    }
}

/// The state dir of the harness's cluster: the kubeconfig's, when it is a cluster of
/// tests/cluster/up.
fn harness_dir() -> Option<PathBuf> {
    let kubeconfig = PathBuf::from(std::env::var_os("KUBECONFIG")?);
    let dir = kubeconfig.parent()?.to_owned();
    dir.join(".gatewright-cluster").exists().then_some(dir)
}

/// Restarts one component of the harness's cluster in `dir` (tests/cluster/restart).
async fn restart(dir: PathBuf, args: &'static [&'static str]) {
    tokio::task::spawn_blocking(move || {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cluster/restart");
        let out = Command::new(script)
            .args(args)
            .env("GATEWRIGHT_CLUSTER_DIR", &dir)
            .output()
            .expect("run tests/cluster/restart");
        assert!(
            out.status.success(),
            "restart {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    })
    .await
    .unwrap();
}

// ---------------------------------------------------------------------------------------
// Backends: echo processes in a network namespace of the test's own.

/// Runs `ip` with `args`; panics with its stderr when it fails.
fn ip(args: &[&str]) -> String {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A network namespace with a veth pair to the host, a /24 of 198.18.0.0/15, and the echo
/// backends running in it; all of it removed when dropped. Recorded in the downstream's
/// `netns` directory while it exists, so that `tests/cluster/downstream down` removes it if
/// the test could not.
struct Backends {
    name: String,
    host_if: String,
    ns_if: String,
    /// The first three octets of the namespace's /24.
    prefix: [u8; 3],
    record: PathBuf,
    children: Vec<Child>,
}

impl Backends {
    fn create(netns_dir: &std::path::Path) -> Self {
        let suffix = unique_name("n");
        let suffix = suffix.trim_start_matches("n-");
        let name = format!("gwt-{suffix}");
        let host_if = format!("gwt{suffix}h");
        let ns_if = format!("gwt{suffix}n");
        // A /24 nobody on this host uses yet (another cluster's test may have one).
        let used = ip(&["-4", "-o", "addr", "show"]) + &ip(&["-4", "route", "show"]);
        let seed = u32::from_str_radix(suffix, 16).unwrap();
        let prefix = (0..512)
            .map(|i| (seed + i) % 512)
            .map(|n| [198, 18 + u8::try_from(n / 256).unwrap(), (n % 256) as u8])
            .find(|p| !used.contains(&format!(" {}.{}.{}.", p[0], p[1], p[2])))
            .expect("a free /24 in 198.18.0.0/15");
        std::fs::create_dir_all(netns_dir).unwrap();
        let record = netns_dir.join(&name);
        std::fs::write(&record, &host_if).unwrap();
        let this = Self {
            name,
            host_if,
            ns_if,
            prefix,
            record,
            children: Vec::new(),
        };
        let [a, b, c] = prefix;
        ip(&["netns", "add", &this.name]);
        ip(&[
            "link",
            "add",
            &this.host_if,
            "type",
            "veth",
            "peer",
            "name",
            &this.ns_if,
        ]);
        ip(&["link", "set", &this.ns_if, "netns", &this.name]);
        ip(&[
            "addr",
            "add",
            &format!("{a}.{b}.{c}.1/24"),
            "dev",
            &this.host_if,
        ]);
        ip(&["link", "set", &this.host_if, "up"]);
        ip(&["-n", &this.name, "link", "set", "lo", "up"]);
        ip(&["-n", &this.name, "link", "set", &this.ns_if, "up"]);
        this
    }

    /// Starts the echo backend `name` on the namespace's address `.<10 + index>`, port
    /// [`BACKEND_PORT`]; returns that address once it listens.
    fn start(&mut self, name: &str, index: u8) -> Ipv4Addr {
        let addr = self.address(index);
        self.serve(name, addr, BACKEND_PORT);
        addr
    }

    /// Adds the namespace's address `.<10 + index>` and returns it.
    fn address(&self, index: u8) -> Ipv4Addr {
        let [a, b, c] = self.prefix;
        let addr = Ipv4Addr::new(a, b, c, 10 + index);
        ip(&[
            "-n",
            &self.name,
            "addr",
            "add",
            &format!("{addr}/24"),
            "dev",
            &self.ns_if,
        ]);
        addr
    }

    /// Starts the echo backend `name` on `addr` (one of [`Backends::address`]), `port`, and
    /// waits until it listens.
    fn serve(&mut self, name: &str, addr: Ipv4Addr, port: u16) {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/traffic/echo.py");
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.name, "python3", script, name])
            .arg(addr.to_string())
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the echo backend");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        self.children.push(child);
        assert_eq!(line.trim(), "ready", "echo backend {name} on {addr}:{port}");
    }
}

impl Drop for Backends {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.name])
            .status();
        let _ = Command::new("ip")
            .args(["link", "delete", &self.host_if])
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_file(&self.record);
    }
}

/// A Service without a selector and the EndpointSlice of its one endpoint, `addr`: what the
/// cluster's EndpointSlice controller would write for a ready Pod there.
fn backend_yaml(ns: &str, svc: &str, addr: Ipv4Addr) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: {svc}, namespace: {ns}}}\nspec:\n  ports: [{{name: http, port: {BACKEND_PORT}, targetPort: {BACKEND_PORT}, protocol: TCP}}]\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {svc}-1\n  namespace: {ns}\n  labels: {{kubernetes.io/service-name: {svc}}}\naddressType: IPv4\nports: [{{name: http, port: {BACKEND_PORT}, protocol: TCP}}]\nendpoints: [{{addresses: [\"{addr}\"], conditions: {{ready: true, serving: true, terminating: false}}}}]\n"
    )
}

// ---------------------------------------------------------------------------------------
// Requests.

/// One request's outcome: the status code, the response headers (lower-case names, last
/// value) and, for a 200, the backend's JSON answer.
#[derive(Debug)]
struct Answer {
    code: u16,
    headers: BTreeMap<String, String>,
    body: Value,
}

impl Answer {
    /// The name of the backend that answered, if one did.
    fn backend(&self) -> Option<&str> {
        (self.code == 200).then(|| self.body["name"].as_str())?
    }
}

/// Sends `method path` with `Host: host` and `headers` over `stream` (HTTP/1.1, no body,
/// then closed), and reads the answer.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    method: &str,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<Answer, String> {
    let mut req = format!("{method} {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    stream
        .write_all(req.as_bytes())
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    // Until the head and `content-length` bytes of body are in (a TLS peer may close
    // without close_notify), or the end of the stream.
    loop {
        let n = match stream.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if !raw.is_empty() && e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(format!("read: {e}")),
        };
        raw.extend_from_slice(&buf[..n]);
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
            let length = head.lines().find_map(|l| {
                l.strip_prefix("content-length:")
                    .and_then(|v| v.trim().parse::<usize>().ok())
            });
            if length.is_some_and(|len| raw.len() >= end + 4 + len) {
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no HTTP answer: {text:?}"))?;
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no status code: {head:?}"))?;
    let headers = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let body = if code == 200 {
        serde_json::from_str(body.trim()).map_err(|e| format!("body {body:?}: {e}"))?
    } else {
        Value::Null
    };
    Ok(Answer {
        code,
        headers,
        body,
    })
}

/// A plain HTTP `GET` to Traefik's `web` entrypoint.
async fn http(
    port: u16,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<Answer, String> {
    request(port, "GET", host, path, headers).await
}

/// A plain HTTP request of `method` to Traefik's `web` entrypoint.
async fn request(
    port: u16,
    method: &str,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<Answer, String> {
    let mut s = tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port))
        .await
        .map_err(|e| format!("connect: {e}"))?;
    exchange(&mut s, method, host, path, headers).await
}

/// How an HTTPS request failed.
#[derive(Debug)]
enum TlsFailure {
    Connect(String),
    Handshake(String),
    Request(String),
}

impl std::fmt::Display for TlsFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Connect(e) => write!(f, "connect: {e}"),
            Self::Handshake(e) => write!(f, "handshake: {e}"),
            Self::Request(e) => write!(f, "request: {e}"),
        }
    }
}

/// A TLS client trusting only `ca_pem` (the CA issuer's certificate): a handshake succeeds
/// only with a certificate it issued for the name asked for.
fn tls_client(ca_pem: &[u8]) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    for der in pem_certificates(ca_pem) {
        roots.add(der).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// An HTTPS request to Traefik's `websecure` entrypoint, SNI and Host `host`, on a new
/// connection (so a new handshake): the answer and the leaf certificate Traefik showed.
async fn https(
    tls: &tokio_rustls::TlsConnector,
    port: u16,
    host: &str,
    path: &str,
) -> Result<(Answer, CertificateDer<'static>), TlsFailure> {
    let tcp = tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port))
        .await
        .map_err(|e| TlsFailure::Connect(e.to_string()))?;
    let name = ServerName::try_from(host.to_owned()).unwrap();
    let mut s = tls
        .connect(name, tcp)
        .await
        .map_err(|e| TlsFailure::Handshake(e.to_string()))?;
    let leaf = s.get_ref().1.peer_certificates().unwrap()[0]
        .clone()
        .into_owned();
    let answer = exchange(&mut s, "GET", host, path, &[])
        .await
        .map_err(TlsFailure::Request)?;
    Ok((answer, leaf))
}

/// What a client sending HTTPS requests continuously saw.
struct Load {
    /// Requests answered 200.
    ok: usize,
    handshakes_failed: usize,
    /// Every failed request (no answer, a failed handshake, or not a 200), why.
    failed: Vec<String>,
    /// Each leaf certificate shown to an answered request, and to how many.
    seen: Vec<(CertificateDer<'static>, usize)>,
}

impl Load {
    /// How many answered requests were shown `leaf`.
    fn served(&self, leaf: &CertificateDer<'static>) -> usize {
        self.seen
            .iter()
            .find(|(c, _)| c == leaf)
            .map_or(0, |(_, n)| *n)
    }

    fn sent(&self) -> usize {
        self.ok + self.failed.len()
    }

    /// What a rotation under this load must show: no failed request or handshake, only
    /// the certificate served before (`old`) and the one issued (`new`, its PEM naming
    /// exactly `hosts`), and the new one served to the load.
    fn assert_rotated(
        &self,
        during: &str,
        (old, new): (&CertificateDer<'static>, &CertificateDer<'static>),
        new_pem: &[u8],
        hosts: &[String],
    ) {
        assert!(
            self.failed.is_empty(),
            "failed requests {during}: {:?}",
            self.failed
        );
        assert_eq!(self.handshakes_failed, 0, "failed handshakes {during}");
        assert_eq!(
            self.served(old) + self.served(new),
            self.ok,
            "only the two issued certificates were shown"
        );
        assert!(
            self.served(new) > 0,
            "the new certificate was served to the load"
        );
        assert_eq!(
            sans(new_pem),
            hosts.iter().map(|h| format!("DNS:{h}")).collect::<Vec<_>>()
        );
    }
}

/// Sends HTTPS requests for `/` to `host`, one after the other, each on a new connection
/// (a handshake each), until `stop`; `sent` counts them as they go.
fn https_load(
    tls: tokio_rustls::TlsConnector,
    port: u16,
    host: String,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicUsize>,
) -> tokio::task::JoinHandle<Load> {
    tokio::spawn(async move {
        let mut load = Load {
            ok: 0,
            handshakes_failed: 0,
            failed: Vec::new(),
            seen: Vec::new(),
        };
        while !stop.load(Ordering::Relaxed) {
            match https(&tls, port, &host, "/").await {
                Ok((a, leaf)) if a.code == 200 => {
                    load.ok += 1;
                    match load.seen.iter_mut().find(|(c, _)| *c == leaf) {
                        Some((_, n)) => *n += 1,
                        None => load.seen.push((leaf, 1)),
                    }
                }
                Ok((a, _)) => load.failed.push(format!("status {}", a.code)),
                Err(e) => {
                    if matches!(e, TlsFailure::Handshake(_)) {
                        load.handshakes_failed += 1;
                    }
                    load.failed.push(e.to_string());
                }
            }
            sent.fetch_add(1, Ordering::Relaxed);
        }
        load
    })
}

/// The certificates of a PEM bundle, as DER.
fn pem_certificates(pem: &[u8]) -> Vec<CertificateDer<'static>> {
    let text = String::from_utf8_lossy(pem);
    let mut out = Vec::new();
    let mut b64: Option<String> = None;
    for line in text.lines() {
        let line = line.trim();
        if line == "-----BEGIN CERTIFICATE-----" {
            b64 = Some(String::new());
        } else if line == "-----END CERTIFICATE-----" {
            let der = base64::engine::general_purpose::STANDARD
                .decode(b64.take().unwrap())
                .unwrap();
            out.push(CertificateDer::from(der));
        } else if let Some(b) = &mut b64 {
            b.push_str(line);
        }
    }
    out
}

/// `n` requests for `/` to `host` on the `web` entrypoint: how many each backend answered,
/// and how many failed (no answer, or not a 200).
async fn tally(port: u16, host: &str, n: usize) -> (BTreeMap<String, usize>, usize) {
    let mut counts = BTreeMap::new();
    let mut failed = 0;
    for _ in 0..n {
        match http(port, host, "/", &[]).await {
            Ok(a) => match a.backend() {
                Some(b) => *counts.entry(b.to_owned()).or_insert(0) += 1,
                None => failed += 1,
            },
            Err(_) => failed += 1,
        }
    }
    (counts, failed)
}

// ---------------------------------------------------------------------------------------
// The cluster side.

fn resource(group: &str, version: &str, kind: &str) -> ApiResource {
    let kind_lower = kind.to_ascii_lowercase();
    let plural = if kind_lower.ends_with('s') {
        format!("{kind_lower}es")
    } else if let Some(stem) = kind_lower
        .strip_suffix('y')
        .filter(|stem| !stem.ends_with(['a', 'e', 'i', 'o', 'u']))
    {
        // Canary → canaries; Gateway → gateways.
        format!("{stem}ies")
    } else {
        format!("{kind_lower}s")
    };
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), &plural)
}

fn dynamic(
    client: &Client,
    ns: &str,
    group: &str,
    version: &str,
    kind: &str,
) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &resource(group, version, kind))
}

fn cond<'a>(obj: &'a Value, t: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == t)
}

/// The children of kind `kind` of the Gateway with `uid`, as JSON (deleted ones left out).
async fn children(api: &Api<DynamicObject>, uid: &str) -> Vec<Value> {
    let selector = format!("{}={uid}", gatewright::render::labels::GATEWAY_UID);
    api.list(&ListParams::default().labels(&selector))
        .await
        .unwrap()
        .into_iter()
        .filter(|o| o.metadata.deletion_timestamp.is_none())
        .map(|o| serde_json::to_value(o).unwrap())
        .collect()
}

/// The issued Secret of `cert`: its `tls.crt` and `ca.crt`.
async fn issued(client: &Client, ns: &str, cert: &Value) -> (Vec<u8>, Vec<u8>) {
    let secret_name = cert["spec"]["secretName"].as_str().unwrap();
    let s = Api::<Secret>::namespaced(client.clone(), ns)
        .get(secret_name)
        .await
        .unwrap_or_else(|e| panic!("Secret {secret_name}: {e}"));
    let data = s.data.unwrap_or_default();
    (
        data.get("tls.crt").expect("tls.crt").0.clone(),
        data.get("ca.crt").expect("ca.crt").0.clone(),
    )
}

/// The subjectAltName entries of a PEM certificate, sorted (`DNS:name`), read by openssl.
fn sans(pem: &[u8]) -> Vec<String> {
    let mut child = Command::new("openssl")
        .args(["x509", "-noout", "-ext", "subjectAltName"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("openssl");
    child.stdin.take().unwrap().write_all(pem).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "openssl x509");
    let mut out: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .skip(1)
        .flat_map(|l| {
            l.split(',')
                .map(|s| s.trim().to_owned())
                .collect::<Vec<_>>()
        })
        .filter(|s| !s.is_empty())
        .collect();
    out.sort();
    out
}

/// Whether external-dns has logged the deletion of the A record of `host`
/// (`msg="DELETE: web.example.com 300 IN A  127.0.0.1 []"`).
fn record_deleted(log: &std::path::Path, host: &str) -> bool {
    let needle = format!("DELETE: {host} ");
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .any(|l| l.contains(&needle) && l.contains(" IN A "))
}

/// The one Certificate of the Gateway `uid`, once cert-manager reports it Ready for exactly
/// `hosts` (sorted) and no other Certificate of the Gateway is left.
async fn issued_for(client: &Client, ns: &str, uid: &str, hosts: &[&str]) -> Value {
    let certs = dynamic(client, ns, "cert-manager.io", "v1", "Certificate");
    wait_for(
        &format!("cert-manager to issue the one Certificate for {hosts:?}"),
        T,
        || async {
            let all = children(&certs, uid).await;
            let [c] = all.as_slice() else {
                return None;
            };
            (c["spec"]["dnsNames"] == json!(hosts) && cond(c, "Ready")?["status"] == "True")
                .then(|| c.clone())
        },
    )
    .await
}

/// The copy of route `route` on the child Gateway, once Traefik has accepted its current
/// generation and its rules carry `weights` (stable, canary) on their last rule.
async fn traefik_took(client: &Client, ns: &str, uid: &str, route: &str, weights: (u32, u32)) {
    let routes = dynamic(client, ns, "gateway.networking.k8s.io", "v1", "HTTPRoute");
    let prefix = format!("{route}-");
    wait_for(
        &format!("Traefik to accept the copy of {route} with weights {weights:?}"),
        T,
        || async {
            let copies: Vec<Value> = children(&routes, uid)
                .await
                .into_iter()
                .filter(|c| {
                    c["metadata"]["name"]
                        .as_str()
                        .is_some_and(|n| n.starts_with(&prefix))
                })
                .collect();
            let [copy] = copies.as_slice() else {
                return None;
            };
            let refs = copy["spec"]["rules"].as_array()?.last()?["backendRefs"].clone();
            let w = |i: usize| refs[i]["weight"].as_u64();
            if (w(0)?, w(1)?) != (u64::from(weights.0), u64::from(weights.1)) {
                return None;
            }
            let generation = &copy["metadata"]["generation"];
            copy["status"]["parents"]
                .as_array()?
                .iter()
                .any(|p| {
                    p["controllerName"] == "traefik.io/gateway-controller"
                        && p["conditions"].as_array().is_some_and(|cs| {
                            cs.iter().any(|c| {
                                c["type"] == "Accepted"
                                    && c["status"] == "True"
                                    && c["observedGeneration"] == *generation
                            })
                        })
                })
                .then_some(())
        },
    )
    .await;
    // Traefik writes route status while it builds a configuration, and applies that
    // configuration after its providers' throttle (2 s by default).
    tokio::time::sleep(Duration::from_millis(2500)).await;
}

/// The names as `&str`s.
fn host_refs(hosts: &[String]) -> Vec<&str> {
    hosts.iter().map(String::as_str).collect()
}

/// Names of this run's backends: `<run>-<role>`.
struct Names {
    stable: String,
    canary: String,
    api: String,
    beta: String,
}

/// The hostname the route's URLRewrite rule gives the requests it rewrites.
const REWRITTEN_HOST: &str = "orders.internal";

/// The user's route: `/api` to the api backend, header `x-variant: beta` and method `POST`
/// to the beta backend; `/headers` to the api backend with request and response header
/// filters, `/old` redirected to `https://<host>/new` (301), `/rewrite` to the api backend
/// rewritten to `/v2` on [`REWRITTEN_HOST`]; everything else split between stable and
/// canary by `weights` (the last rule).
fn route_yaml(ns: &str, gw: &str, hosts: &[&str], n: &Names, weights: (u32, u32)) -> String {
    let (ws, wc) = weights;
    format!(
        r"apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {gw}, namespace: {ns}}}
spec:
  parentRefs: [{{name: {gw}}}]
  hostnames: {hosts:?}
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /api}}}}]
    backendRefs: [{{name: {api}, port: {BACKEND_PORT}}}]
  - matches: [{{path: {{type: PathPrefix, value: /}}, headers: [{{name: x-variant, value: beta}}]}}]
    backendRefs: [{{name: {beta}, port: {BACKEND_PORT}}}]
  - matches: [{{path: {{type: PathPrefix, value: /}}, method: POST}}]
    backendRefs: [{{name: {beta}, port: {BACKEND_PORT}}}]
  - matches: [{{path: {{type: PathPrefix, value: /headers}}}}]
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier:
        set: [{{name: x-env, value: prod}}]
        add: [{{name: x-added, value: by-the-route}}]
        remove: [x-drop]
    - type: ResponseHeaderModifier
      responseHeaderModifier:
        set: [{{name: cache-control, value: no-store}}]
        add: [{{name: x-route, value: headers}}]
        remove: [x-backend]
    backendRefs: [{{name: {api}, port: {BACKEND_PORT}}}]
  - matches: [{{path: {{type: PathPrefix, value: /old}}}}]
    filters:
    - type: RequestRedirect
      requestRedirect:
        scheme: https
        path: {{type: ReplacePrefixMatch, replacePrefixMatch: /new}}
        statusCode: 301
  - matches: [{{path: {{type: PathPrefix, value: /rewrite}}}}]
    filters:
    - type: URLRewrite
      urlRewrite:
        hostname: {REWRITTEN_HOST}
        path: {{type: ReplacePrefixMatch, replacePrefixMatch: /v2}}
    backendRefs: [{{name: {api}, port: {BACKEND_PORT}}}]
  - backendRefs:
    - {{name: {stable}, port: {BACKEND_PORT}, weight: {ws}}}
    - {{name: {canary}, port: {BACKEND_PORT}, weight: {wc}}}
",
        api = n.api,
        beta = n.beta,
        stable = n.stable,
        canary = n.canary,
    )
}

/// The parent Gateway: an HTTP listener on 80 and an HTTPS one on 443 for `*.<zone>`, the
/// HTTPS one's certificate generated by the class (whose `traefik.ports` the test maps to
/// the ports of Traefik's `web` and `websecure` entrypoints).
fn gateway_yaml(ns: &str, gw: &str, class: &str, zone: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {gw}, namespace: {ns}}}\nspec:\n  gatewayClassName: {class}\n  listeners:\n  - name: http\n    port: 80\n    protocol: HTTP\n    hostname: \"*.{zone}\"\n  - name: https\n    port: 443\n    protocol: HTTPS\n    hostname: \"*.{zone}\"\n    tls:\n      mode: Terminate\n      options: {{gatewright.dev/certificate: generated}}\n",
    )
}

/// The GatewayClassConfig of the shipped Traefik class `class` as this harness needs it
/// (the platform team's way): its child Gateway's class is the one Traefik runs here, the
/// parent's ports 80 and 443 go to the ports of Traefik's entrypoints, and the issuer is
/// the real cert-manager's CA issuer.
fn class_config_yaml(class: &str, ns: &str, d: &Downstream) -> String {
    format!(
        "apiVersion: gatewright.dev/v1alpha1\nkind: GatewayClassConfig\nmetadata: {{name: {class}, namespace: {ns}}}\nspec:\n  targetRef: {{group: gateway.networking.k8s.io, kind: GatewayClass, name: {class}}}\n  default:\n    traefik:\n      gatewayClassName: {traefik}\n      ports: {{\"80\": {web}, \"443\": {websecure}}}\n    certificate:\n      issuerRef: {{group: cert-manager.io, kind: {kind}, name: {ca}}}\n",
        traefik = d.traefik_class,
        web = d.web_port,
        websecure = d.websecure_port,
        kind = d.ca_issuer.0,
        ca = d.ca_issuer.1,
    )
}

/// Starts the controller (its namespace `controller_ns`) and installs the shipped Traefik
/// class under a name of its own (`prefix-...`), configured for the downstream `d` by a
/// GatewayClassConfig in `config_ns`; the controller and the class's name.
async fn start_with_traefik_class(
    client: &Client,
    d: &Downstream,
    (controller_ns, config_ns): (&str, &str),
    prefix: &str,
) -> (Arc<gatewright::controller::Runner>, String) {
    let ctl = gatewright::controller::start(
        client.clone(),
        gatewright::controller::Options {
            controller_namespace: controller_ns.to_owned(),
            resync: Duration::from_secs(3600),
            workers: gatewright::controller::default_workers(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let class = unique_name(prefix);
    apply_yaml(
        client,
        &common::shipped_class_yaml("traefik-certmanager-externaldns", &class),
    )
    .await;
    apply_yaml(client, &class_config_yaml(&class, config_ns, d)).await;
    (ctl, class)
}

/// Deletes the Gateway `ns/gw` and waits until it is gone (its children with it), then the
/// class `class`: its GatewayClassConfig in `ns`, GatewayClass and blueprint.
async fn remove_gateway_and_class(client: &Client, ns: &str, gw: &str, class: &str) {
    let gateways = dynamic(client, ns, "gateway.networking.k8s.io", "v1", "Gateway");
    gateways.delete(gw, &DeleteParams::default()).await.unwrap();
    wait_for("the Gateway gone", T, || async {
        gateways.get_opt(gw).await.unwrap().is_none().then_some(())
    })
    .await;
    let _ = dynamic(
        client,
        ns,
        "gatewright.dev",
        "v1alpha1",
        "GatewayClassConfig",
    )
    .delete(class, &DeleteParams::default())
    .await;
    for (group, version, kind) in [
        ("gateway.networking.k8s.io", "v1", "GatewayClass"),
        ("gatewright.dev", "v1alpha1", "GatewayClassBlueprint"),
    ] {
        let _ = Api::<DynamicObject>::all_with(client.clone(), &resource(group, version, kind))
            .delete(class, &DeleteParams::default())
            .await;
    }
    common::wait_class_gone(client, class, T).await;
}

/// The tests of this binary start a controller each: they run one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread")]
async fn traffic_through_traefik() {
    let _serial = SERIAL.lock().await;
    let began = Instant::now();
    let d = downstream();
    let ns = d.namespace.as_str();
    let zone = d.zone.as_str();
    let client = admin().await;

    // The backends: one process per "pod" in a network namespace of our own.
    let mut backends = Backends::create(&d.netns_dir);
    let run = unique_name("tr");
    let names = Names {
        stable: format!("{run}-stable"),
        canary: format!("{run}-canary"),
        api: format!("{run}-api"),
        beta: format!("{run}-beta"),
    };
    for (i, svc) in [&names.stable, &names.canary, &names.api, &names.beta]
        .into_iter()
        .enumerate()
    {
        let addr = backends.start(svc, u8::try_from(i).unwrap());
        apply_yaml(&client, &backend_yaml(ns, svc, addr)).await;
    }

    // The shipped Traefik class, by a GatewayClassConfig (the platform team's way): its
    // child Gateway's class is the one Traefik runs here, the parent's ports 80 and 443 go
    // to the ports of Traefik's entrypoints, and the issuer is the real cert-manager's CA
    // issuer.
    let (ctl, class) = start_with_traefik_class(&client, &d, (ns, ns), "traffic").await;

    let gw = unique_name("gw");
    let web = format!("{}.{zone}", unique_name("web"));
    let shop = format!("{}.{zone}", unique_name("shop"));
    let mut hosts = vec![web.clone(), shop.clone()];
    hosts.sort();
    let t = Instant::now();
    apply_yaml(&client, &gateway_yaml(ns, &gw, &class, zone)).await;
    apply_yaml(
        &client,
        &route_yaml(ns, &gw, &host_refs(&hosts), &names, (100, 0)),
    )
    .await;
    let gateways = dynamic(&client, ns, "gateway.networking.k8s.io", "v1", "Gateway");
    let uid = gateways.get(&gw).await.unwrap().metadata.uid.unwrap();
    let setup = began.elapsed();

    // Traefik programs the child Gateway itself; gatewright's parent turns Programmed.
    wait_for(
        "the Gateway Programmed (Traefik's child programmed)",
        T,
        || async {
            let g = serde_json::to_value(gateways.get(&gw).await.unwrap()).unwrap();
            (cond(&g, "Programmed")?["status"] == "True").then_some(())
        },
    )
    .await;
    let programmed_after = t.elapsed();
    let child =
        serde_json::to_value(gateways.get(&format!("{gw}-traefik")).await.unwrap()).unwrap();
    assert_eq!(child["spec"]["gatewayClassName"], d.traefik_class.as_str());
    let ports: Vec<&Value> = child["spec"]["listeners"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| &l["port"])
        .collect();
    assert_eq!(
        ports,
        [&json!(d.web_port), &json!(d.websecure_port)],
        "the parent's 80 and 443 on the entrypoints' ports"
    );
    assert_eq!(
        cond(&child, "Programmed").unwrap()["status"],
        "True",
        "Traefik's own status on the child: {child}"
    );
    let first = wait_for("the first request answered through Traefik", T, || async {
        let a = http(d.web_port, &web, "/", &[]).await.ok()?;
        (a.backend() == Some(names.stable.as_str())).then_some(a)
    })
    .await;
    let answered_after = t.elapsed();
    assert_eq!(first.body["host"], web.as_str());

    // (a) Hostname, path and header matches.
    let p = d.web_port;
    let backend = |a: Result<Answer, String>| a.unwrap().backend().map(str::to_owned);
    assert_eq!(
        backend(http(p, &shop, "/", &[]).await).as_deref(),
        Some(names.stable.as_str())
    );
    let api = http(p, &web, "/api/orders?id=7", &[]).await.unwrap();
    assert_eq!(api.backend(), Some(names.api.as_str()), "{api:?}");
    assert_eq!(api.body["path"], "/api/orders?id=7");
    let beta = http(p, &web, "/", &[("x-variant", "beta")]).await.unwrap();
    assert_eq!(beta.backend(), Some(names.beta.as_str()), "{beta:?}");
    assert_eq!(beta.body["headers"]["x-variant"], "beta");
    assert_eq!(
        backend(http(p, &web, "/api", &[("x-variant", "beta")]).await).as_deref(),
        Some(names.api.as_str()),
        "the longer path match wins over the header match"
    );
    assert_eq!(
        backend(http(p, &web, "/", &[("x-variant", "alpha")]).await).as_deref(),
        Some(names.stable.as_str())
    );
    let stranger = format!("{}.{zone}", unique_name("nobody"));
    let other = http(p, &stranger, "/", &[]).await.unwrap();
    assert_eq!(
        other.code, 404,
        "a hostname of the listener but not the route: {other:?}"
    );
    eprintln!(
        "traffic (a): {} -> {}, {shop} -> stable, /api -> {}, x-variant: beta -> {}, {stranger} -> 404",
        web, names.stable, names.api, names.beta
    );

    // (a') Method match and filters, as written on the user's route: the copy on Traefik's
    // gateway carries the rules unchanged, and every one shows in the answer.
    let routes = dynamic(&client, ns, "gateway.networking.k8s.io", "v1", "HTTPRoute");
    let original = serde_json::to_value(routes.get(&gw).await.unwrap()).unwrap();
    let copies = children(&routes, &uid).await;
    assert_eq!(copies.len(), 1, "one route copy");
    assert_eq!(
        copies[0]["spec"]["rules"], original["spec"]["rules"],
        "the copy keeps the route's matches, filters and weights"
    );
    let post = request(p, "POST", &web, "/", &[]).await.unwrap();
    assert_eq!(post.backend(), Some(names.beta.as_str()), "{post:?}");
    assert_eq!(post.body["method"], "POST");
    let put = request(p, "PUT", &web, "/", &[]).await.unwrap();
    assert_eq!(put.backend(), Some(names.stable.as_str()), "{put:?}");
    assert_eq!(put.body["method"], "PUT");
    // Request headers: set overrides the client's value, add adds, remove removes; the
    // backend echoes what it received.
    let plain = http(p, &web, "/api", &[]).await.unwrap();
    assert_eq!(
        plain.headers.get("x-backend").map(String::as_str),
        Some(names.api.as_str()),
        "the backend's own response header, unfiltered: {plain:?}"
    );
    let filtered = http(
        p,
        &web,
        "/headers/check",
        &[("x-env", "dev"), ("x-drop", "1"), ("x-keep", "1")],
    )
    .await
    .unwrap();
    assert_eq!(filtered.backend(), Some(names.api.as_str()), "{filtered:?}");
    let seen = &filtered.body["headers"];
    assert_eq!(seen["x-env"], "prod", "RequestHeaderModifier set: {seen}");
    assert_eq!(
        seen["x-added"], "by-the-route",
        "RequestHeaderModifier add: {seen}"
    );
    assert!(
        seen.get("x-drop").is_none(),
        "RequestHeaderModifier remove: {seen}"
    );
    assert_eq!(seen["x-keep"], "1", "{seen}");
    assert_eq!(filtered.body["path"], "/headers/check");
    // Response headers: set, add, and the backend's x-backend removed.
    let h = |k: &str| filtered.headers.get(k).map(String::as_str);
    assert_eq!(
        h("cache-control"),
        Some("no-store"),
        "{:?}",
        filtered.headers
    );
    assert_eq!(h("x-route"), Some("headers"), "{:?}", filtered.headers);
    assert_eq!(h("x-backend"), None, "{:?}", filtered.headers);
    // A redirect: 301 to https, the matched prefix replaced; no backend reached.
    let redirect = http(p, &web, "/old/page", &[]).await.unwrap();
    assert_eq!(redirect.code, 301, "{redirect:?}");
    let location = redirect
        .headers
        .get("location")
        .cloned()
        .unwrap_or_default();
    assert_eq!(location, format!("https://{web}/new/page"), "{redirect:?}");
    assert!(!redirect.headers.contains_key("x-backend"), "{redirect:?}");
    // A rewrite: the backend sees the new prefix and hostname.
    let rewritten = http(p, &web, "/rewrite/items", &[]).await.unwrap();
    assert_eq!(
        rewritten.backend(),
        Some(names.api.as_str()),
        "{rewritten:?}"
    );
    assert_eq!(rewritten.body["path"], "/v2/items", "{rewritten:?}");
    assert_eq!(rewritten.body["host"], REWRITTEN_HOST, "{rewritten:?}");
    eprintln!(
        "traffic (a'): POST / -> {} (PUT / -> {}); /headers: the backend got x-env: {}, \
         x-added: {}, no x-drop; the client got cache-control: {}, x-route: {}, no x-backend; \
         /old/page -> {} {location}; /rewrite/items -> {} as {}{}",
        names.beta,
        names.stable,
        seen["x-env"].as_str().unwrap_or_default(),
        seen["x-added"].as_str().unwrap_or_default(),
        h("cache-control").unwrap_or_default(),
        h("x-route").unwrap_or_default(),
        redirect.code,
        names.api,
        rewritten.body["host"].as_str().unwrap_or_default(),
        rewritten.body["path"].as_str().unwrap_or_default(),
    );

    // (b) Weights: 70/30, then a Flagger-like progression of the canary's weight.
    let mut shares = Vec::new();
    let mut total_failed = 0;
    for canary in [30, 0, 10, 30, 50, 100] {
        let weights = (100 - canary, canary);
        apply_yaml(
            &client,
            &route_yaml(ns, &gw, &host_refs(&hosts), &names, weights),
        )
        .await;
        traefik_took(&client, ns, &uid, &gw, weights).await;
        let (counts, failed) = tally(p, &web, REQUESTS).await;
        total_failed += failed;
        let got = counts.get(&names.canary).copied().unwrap_or(0);
        let stable = counts.get(&names.stable).copied().unwrap_or(0);
        #[allow(clippy::cast_precision_loss, reason = "a few hundred requests")]
        let share = 100.0 * got as f64 / REQUESTS as f64;
        eprintln!(
            "traffic (b): weights {}/{}: canary {got}/{REQUESTS} = {share:.1} %, stable {stable}, failed {failed}",
            weights.0, weights.1
        );
        assert_eq!(failed, 0, "failed requests at canary weight {canary}");
        assert_eq!(
            got + stable,
            REQUESTS,
            "only stable and canary answer: {counts:?}"
        );
        assert!(
            (share - f64::from(canary)).abs() <= TOLERANCE,
            "canary share {share:.1} % at weight {canary} (±{TOLERANCE})"
        );
        shares.push(format!("{canary}: {share:.1} %"));
    }

    // (c) HTTPS: the certificate Traefik shows is the one cert-manager issued, for exactly
    // the route's names; a handshake verifies against the CA issuer alone.
    let t = Instant::now();
    let cert = issued_for(&client, ns, &uid, &host_refs(&hosts)).await;
    let (pem, ca) = issued(&client, ns, &cert).await;
    let want: Vec<String> = hosts.iter().map(|h| format!("DNS:{h}")).collect();
    assert_eq!(
        sans(&pem),
        want,
        "the issued certificate names exactly the route's hostnames"
    );
    let issued_leaf = pem_certificates(&pem)[0].clone();
    let tls = tls_client(&ca);
    let ps = d.websecure_port;
    for h in &hosts {
        let (answer, leaf) = wait_for(&format!("an HTTPS answer for {h}"), T, || async {
            https(&tls, ps, h, "/").await.ok()
        })
        .await;
        assert_eq!(
            leaf, issued_leaf,
            "Traefik shows the certificate cert-manager issued for {h}"
        );
        assert_eq!(answer.backend(), Some(names.canary.as_str()), "{answer:?}");
    }
    let https_after = t.elapsed();
    eprintln!(
        "traffic (c): HTTPS for {hosts:?} shows Certificate {} (SANs {want:?})",
        cert["metadata"]["name"].as_str().unwrap()
    );

    // (d) Make-before-break under load: HTTPS requests on new connections, continuously,
    // while a hostname is added to the route.
    let stop = Arc::new(AtomicBool::new(false));
    let load = https_load(
        tls.clone(),
        ps,
        web.clone(),
        stop.clone(),
        Arc::new(AtomicUsize::new(0)),
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let t = Instant::now();
    let added = format!("{}.{zone}", unique_name("new"));
    let mut hosts2 = vec![web.clone(), shop.clone(), added.clone()];
    hosts2.sort();
    apply_yaml(
        &client,
        &route_yaml(ns, &gw, &host_refs(&hosts2), &names, (0, 100)),
    )
    .await;
    let cert2 = issued_for(&client, ns, &uid, &host_refs(&hosts2)).await;
    let (pem2, _) = issued(&client, ns, &cert2).await;
    let new_leaf = pem_certificates(&pem2)[0].clone();
    wait_for(&format!("{added} answered over HTTPS"), T, || async {
        let (a, leaf) = https(&tls, ps, &added, "/").await.ok()?;
        (a.code == 200 && leaf == new_leaf).then_some(())
    })
    .await;
    let rotated_after = t.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let d_load = load.await.unwrap();
    let elapsed = t.elapsed() + Duration::from_secs(2);
    let old_served = d_load.served(&issued_leaf);
    let new_served = d_load.served(&new_leaf);
    eprintln!(
        "traffic (d): {} HTTPS requests while {added} was added: {} answered ({old_served} with \
         the old certificate, {new_served} with the new), {} failed, {} failed handshakes, \
         {:.0} requests/s; the new name served over HTTPS {rotated_after:.1?} after the route \
         changed",
        d_load.sent(),
        d_load.ok,
        d_load.failed.len(),
        d_load.handshakes_failed,
        d_load.sent() as f64 / elapsed.as_secs_f64(),
    );
    d_load.assert_rotated(
        "during the rotation",
        (&issued_leaf, &new_leaf),
        &pem2,
        &hosts2,
    );

    // (e) A hostname leaves the route: it is answered until external-dns has deleted its
    // record (the class drains DNS first), then Traefik stops serving it (404).
    let t = Instant::now();
    let hosts3 = vec![added.clone(), web.clone()];
    apply_yaml(
        &client,
        &route_yaml(ns, &gw, &host_refs(&hosts3), &names, (0, 100)),
    )
    .await;
    let (mut answered, mut answered_after_delete, mut others_failed) = (0usize, 0usize, 0usize);
    let deleted_after = loop {
        assert!(
            t.elapsed() < T,
            "{shop} still answered {T:?} after leaving the route"
        );
        // Read the log first: a deletion logged now was logged before the request below.
        let deleted = record_deleted(&d.external_dns_log, &shop);
        let a = http(p, &shop, "/", &[]).await.unwrap();
        match a.code {
            200 => {
                answered += 1;
                answered_after_delete += usize::from(deleted);
            }
            404 => {
                assert!(
                    deleted,
                    "{shop} answered 404 before external-dns deleted its record"
                );
                break t.elapsed();
            }
            code => panic!("{shop}: status {code} while leaving the route"),
        }
        // The names that stay are answered throughout.
        if http(p, &web, "/", &[])
            .await
            .ok()
            .and_then(|a| a.backend().map(str::to_owned))
            != Some(names.canary.clone())
        {
            others_failed += 1;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(others_failed, 0, "{web} failed while {shop} left the route");
    eprintln!(
        "traffic (e): {shop} left the route: answered {answered} times ({answered_after_delete} \
         after external-dns had deleted its record), then 404 {deleted_after:.1?} after the change; \
         {web} answered throughout"
    );

    // (f) Make-before-break while the issuer is broken, then mended, under HTTPS load: the
    // CA Issuer pointed at a Secret that does not exist (cert-manager reports it not Ready;
    // the CA's key stays, so the client's trust does not change), a hostname added (a
    // Certificate cert-manager cannot issue yet), then the Issuer put back. A run that fails
    // in between leaves it broken until the next `tests/cluster/downstream up` (this test
    // and tests/real_downstream.rs run it first), which applies the issuers again.
    assert_eq!(
        d.ca_issuer.0, "Issuer",
        "the test breaks a namespaced CA Issuer"
    );
    let issuers = dynamic(&client, ns, "cert-manager.io", "v1", "Issuer");
    let certs = dynamic(&client, ns, "cert-manager.io", "v1", "Certificate");
    let ca_secret = issuers.get(&d.ca_issuer.1).await.unwrap().data["spec"]["ca"]["secretName"]
        .as_str()
        .unwrap()
        .to_owned();
    // The certificate for the names left (replaced when the name left), served.
    let mut left = hosts3.clone();
    left.sort();
    let cert3 = issued_for(&client, ns, &uid, &host_refs(&left)).await;
    let (pem3, _) = issued(&client, ns, &cert3).await;
    let leaf3 = pem_certificates(&pem3)[0].clone();
    wait_for("the certificate for the names left served", T, || async {
        let (a, leaf) = https(&tls, ps, &web, "/").await.ok()?;
        (a.code == 200 && leaf == leaf3).then_some(())
    })
    .await;
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicUsize::new(0));
    let load = https_load(tls.clone(), ps, web.clone(), stop.clone(), sent.clone());
    let t = Instant::now();
    issuers
        .patch(
            &d.ca_issuer.1,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"ca": {"secretName": format!("{ca_secret}-missing")}}})),
        )
        .await
        .unwrap();
    wait_for("the CA Issuer not Ready", T, || async {
        let i = serde_json::to_value(issuers.get(&d.ca_issuer.1).await.unwrap()).unwrap();
        (cond(&i, "Ready")?["status"] == "False").then_some(())
    })
    .await;
    let late = format!("{}.{zone}", unique_name("late"));
    let mut hosts4 = vec![web.clone(), added.clone(), late.clone()];
    hosts4.sort();
    apply_yaml(
        &client,
        &route_yaml(ns, &gw, &host_refs(&hosts4), &names, (0, 100)),
    )
    .await;
    // cert-manager has tried: the new Certificate's CertificateRequest waits on the issuer.
    let requests = dynamic(&client, ns, "cert-manager.io", "v1", "CertificateRequest");
    let pending = wait_for(
        "the new Certificate's CertificateRequest Pending on the broken issuer",
        T,
        || async {
            let pending = children(&certs, &uid)
                .await
                .into_iter()
                .find(|c| c["spec"]["dnsNames"] == json!(hosts4))?;
            let all = requests.list(&ListParams::default()).await.unwrap();
            all.items
                .into_iter()
                .map(|r| serde_json::to_value(r).unwrap())
                .any(|r| {
                    r["metadata"]["annotations"]["cert-manager.io/certificate-name"]
                        == pending["metadata"]["name"]
                        && cond(&r, "Ready").is_some_and(|c| c["reason"] == "Pending")
                })
                .then_some(pending)
        },
    )
    .await;
    let pending_name = pending["metadata"]["name"].as_str().unwrap().to_owned();
    // The new name is routed over HTTP meanwhile; over HTTPS the old certificate keeps
    // serving the other names, on Traefik's gateway as on the load's connections.
    wait_for(&format!("{late} answered over HTTP"), T, || async {
        let a = http(p, &late, "/", &[]).await.ok()?;
        (a.backend() == Some(names.canary.as_str())).then_some(())
    })
    .await;
    let before = sent.load(Ordering::Relaxed);
    wait_for(
        "100 HTTPS requests sent while the issuer is broken",
        T,
        || async { (sent.load(Ordering::Relaxed) >= before + 100).then_some(()) },
    )
    .await;
    let child =
        serde_json::to_value(gateways.get(&format!("{gw}-traefik")).await.unwrap()).unwrap();
    let refs: Vec<&Value> = child["spec"]["listeners"][1]["tls"]["certificateRefs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["name"])
        .collect();
    assert_eq!(
        refs,
        [&cert3["spec"]["secretName"]],
        "the HTTPS listener keeps the issued certificate while the new one waits"
    );
    let late_refused = https(&tls, ps, &late, "/").await.err();
    let broken_for = t.elapsed();
    // The issuer mended; cert-manager looks again at once when the Issuer changes.
    let mended = Instant::now();
    issuers
        .patch(
            &d.ca_issuer.1,
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": {"annotations": {"gatewright.dev/mended": unique_name("at")}},
                "spec": {"ca": {"secretName": ca_secret}},
            })),
        )
        .await
        .unwrap();
    let cert4 = wait_for("the new Certificate issued", T, || async {
        let c = serde_json::to_value(certs.get(&pending_name).await.ok()?).unwrap();
        (cond(&c, "Ready")?["status"] == "True").then_some(c)
    })
    .await;
    let issued_after = mended.elapsed();
    let (pem4, ca4) = issued(&client, ns, &cert4).await;
    assert_eq!(ca4, ca, "the same CA: the issuer was mended, not replaced");
    let newest = pem_certificates(&pem4)[0].clone();
    let issued_at = Instant::now();
    wait_for(&format!("{late} answered over HTTPS"), T, || async {
        let (a, leaf) = https(&tls, ps, &late, "/").await.ok()?;
        (a.code == 200 && leaf == newest).then_some(())
    })
    .await;
    let late_served_after = issued_at.elapsed();
    issued_for(&client, ns, &uid, &host_refs(&hosts4)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let f_load = load.await.unwrap();
    let elapsed = t.elapsed();
    let (old_served, new_served) = (f_load.served(&leaf3), f_load.served(&newest));
    eprintln!(
        "traffic (f): {} HTTPS requests while the issuer was broken ({broken_for:.1?}, {late} \
         added; its HTTPS handshake meanwhile: {}) and mended: {} answered ({old_served} with \
         the old certificate, {new_served} with the new), {} failed, {} failed handshakes, \
         {:.0} requests/s; issued {issued_after:.1?} after the issuer was mended, {late} served \
         over HTTPS {late_served_after:.1?} after that",
        f_load.sent(),
        late_refused.map_or_else(|| "answered".to_owned(), |e| e.to_string()),
        f_load.ok,
        f_load.failed.len(),
        f_load.handshakes_failed,
        f_load.sent() as f64 / elapsed.as_secs_f64(),
    );
    f_load.assert_rotated(
        "while the issuer was broken and mended",
        (&leaf3, &newest),
        &pem4,
        &hosts4,
    );

    // (g) The API server killed and kept away 3 s, then started again, under HTTPS load and
    // plain requests: Traefik keeps serving its last configuration, so every request is
    // answered; once the API server is back, a weight change reaches the dataplane again
    // (Traefik's, gatewright's and the test's watches all come back). Only on the harness's
    // cluster, whose API server the test can restart.
    if let Some(dir) = harness_dir() {
        let stop = Arc::new(AtomicBool::new(false));
        let load = https_load(
            tls.clone(),
            ps,
            web.clone(),
            stop.clone(),
            Arc::new(AtomicUsize::new(0)),
        );
        let plain = {
            let (stop, late) = (stop.clone(), late.clone());
            let split = [names.stable.clone(), names.canary.clone()];
            tokio::spawn(async move {
                let (mut ok, mut failed) = (0usize, Vec::new());
                while !stop.load(Ordering::Relaxed) {
                    match http(p, &late, "/", &[]).await {
                        // The canary, then (the weights changed) either.
                        Ok(a) if a.backend().is_some_and(|b| split.iter().any(|s| s == b)) => {
                            ok += 1;
                        }
                        other => failed.push(format!("{other:?}")),
                    }
                }
                (ok, failed)
            })
        };
        let t = Instant::now();
        restart(dir, &["--kill", "--down", "3", "kube-apiserver"]).await;
        let back_after = t.elapsed();
        let weights = (50, 50);
        apply_yaml(
            &client,
            &route_yaml(ns, &gw, &host_refs(&hosts4), &names, weights),
        )
        .await;
        traefik_took(&client, ns, &uid, &gw, weights).await;
        let followed_after = t.elapsed();
        stop.store(true, Ordering::Relaxed);
        let g_load = load.await.unwrap();
        let (plain_ok, plain_failed) = plain.await.unwrap();
        let (counts, failed) = tally(p, &web, REQUESTS).await;
        let got = counts.get(&names.canary).copied().unwrap_or(0);
        #[allow(clippy::cast_precision_loss, reason = "a few hundred requests")]
        let share = 100.0 * got as f64 / REQUESTS as f64;
        eprintln!(
            "traffic (g): the API server killed, away 3 s, serving again {back_after:.1?} after \
             the kill: {} HTTPS requests ({} failed, {} failed handshakes) and {} plain ones ({} \
             failed) meanwhile; then weights 50/50 reached Traefik {followed_after:.1?} after the \
             kill: canary {got}/{REQUESTS} = {share:.1} %, failed {failed}",
            g_load.sent(),
            g_load.failed.len(),
            g_load.handshakes_failed,
            plain_ok + plain_failed.len(),
            plain_failed.len(),
        );
        assert!(
            g_load.failed.is_empty(),
            "HTTPS requests failed while the API server was away: {:?}",
            g_load.failed
        );
        assert!(
            plain_failed.is_empty(),
            "plain requests failed while the API server was away: {plain_failed:?}"
        );
        assert!(
            g_load.ok > 0 && plain_ok > 0,
            "requests were sent meanwhile"
        );
        assert_eq!(failed, 0);
        assert!(
            (share - 50.0).abs() <= TOLERANCE,
            "canary share {share:.1} % at weight 50 after the restart (±{TOLERANCE})"
        );
    } else {
        eprintln!("traffic (g): left out: not the cluster of tests/cluster/up");
    }

    // (h) A canary driven by the real Flagger, its Pods run by the kubelet stand-in.
    let flagger = flagger::canary(&client, ns, &gw, &uid, zone, d.web_port).await;
    eprintln!("traffic (h): {flagger}");

    // Teardown: the Gateway, its children (DNS drained first), the class, the backends.
    let t = Instant::now();
    dynamic(&client, ns, "gateway.networking.k8s.io", "v1", "HTTPRoute")
        .delete(&gw, &DeleteParams::default())
        .await
        .unwrap();
    remove_gateway_and_class(&client, ns, &gw, &class).await;
    ctl.shutdown(Duration::from_secs(10)).await;
    for svc in [&names.stable, &names.canary, &names.api, &names.beta] {
        let _ = dynamic(&client, ns, "", "v1", "Service")
            .delete(svc, &DeleteParams::default())
            .await;
        let _ = dynamic(&client, ns, "discovery.k8s.io", "v1", "EndpointSlice")
            .delete(&format!("{svc}-1"), &DeleteParams::default())
            .await;
    }
    drop(backends);
    let torn_down_after = t.elapsed();
    eprintln!(
        "traffic: set up {setup:.1?}; Gateway Programmed by Traefik {programmed_after:.1?}, first \
         request answered {answered_after:.1?}; canary shares {}; {total_failed} failed of {} \
         plain requests; HTTPS with the issued certificate {https_after:.1?}; torn down \
         {torn_down_after:.1?}; {flagger}; in all {:.1?}",
        shares.join(", "),
        6 * REQUESTS,
        began.elapsed()
    );
}
