//! `gatewright run` as a process, with no cluster: what cannot fix itself (no readable
//! kubeconfig) exits 1 with the reason; what can (an API server that does not answer yet)
//! keeps it running, not ready, saying why on `/readyz`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn gatewright() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gatewright"));
    c.env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env("RUST_LOG", "info");
    c
}

#[test]
fn no_kubeconfig_exits_1_with_the_reason() {
    let out = gatewright()
        .args(["run", "--metrics-addr", "127.0.0.1:0"])
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("failed to load a kubeconfig")
            && stderr.contains("/nonexistent/kubeconfig"),
        "{stderr}"
    );
}

/// `GET /readyz` on `port`: (status code, body), or `None` while nothing listens.
fn readyz(port: u16) -> Option<(u16, String)> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.write_all(b"GET /readyz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .ok()?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).ok()?;
    let (head, body) = raw.split_once("\r\n\r\n")?;
    Some((head.split(' ').nth(1)?.parse().ok()?, body.to_owned()))
}

#[test]
fn an_api_server_that_does_not_answer_keeps_it_running_and_not_ready() {
    let dir = tempfile::tempdir().unwrap();
    // A port nothing listens on: bound, then released.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_port = dead.local_addr().unwrap().port();
    drop(dead);
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: \"https://127.0.0.1:{dead_port}\"}}}}]\nusers: [{{name: u, user: {{token: t}}}}]\ncontexts: [{{name: c, context: {{cluster: c, user: u}}}}]\ncurrent-context: c\n"
        ),
    )
    .unwrap();
    let metrics = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = metrics.local_addr().unwrap().port();
    drop(metrics);
    let mut child = gatewright()
        .args(["run", "--leader-elect", "--metrics-addr"])
        .arg(format!("127.0.0.1:{port}"))
        .env("KUBECONFIG", &kubeconfig)
        // The log goes to stdout.
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let body = loop {
        assert!(
            child.try_wait().unwrap().is_none(),
            "gatewright run exited on an unreachable API server"
        );
        if let Some((503, body)) = readyz(port)
            && body.contains("leader election on Lease gatewright-system/gatewright: Unreachable")
            && body.contains("watch Gateway: Unreachable")
        {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "/readyz never said why: {:?}",
            readyz(port)
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(body.contains("caches not synced"), "{body}");
    // Still running after several retries.
    std::thread::sleep(Duration::from_secs(2));
    assert!(child.try_wait().unwrap().is_none());
    let (_, later) = readyz(port).unwrap();
    let failures: u32 = later
        .lines()
        .find(|l| l.starts_with("watch Gateway: Unreachable ("))
        .and_then(|l| l.split('(').nth(1)?.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("{later}"));
    assert!(failures >= 2, "retried: {later}");
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    // The log, without terminal colours.
    let log: String = {
        let raw = String::from_utf8_lossy(&out.stdout);
        let mut plain = String::with_capacity(raw.len());
        let mut chars = raw.chars();
        while let Some(c) = chars.next() {
            if c == '\u{1b}' {
                for c in chars.by_ref() {
                    if c == 'm' {
                        break;
                    }
                }
            } else {
                plain.push(c);
            }
        }
        plain
    };
    // One warning per step and kind of failure, not one per try.
    let warnings = log
        .lines()
        .filter(|l| l.contains("watch failed; retrying") && l.contains("step=watch Gateway "))
        .count();
    assert_eq!(warnings, 1, "{log}");
}
