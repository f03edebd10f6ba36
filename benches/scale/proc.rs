//! The controller as a separate process, for the benchmarks: started with its metrics
//! served on a port of its own, its memory and CPU read from /proc, stopped as an
//! orchestrator stops it.
#![allow(dead_code, reason = "each benchmark uses part of it")]

use std::time::{Duration, Instant};

pub struct Proc {
    child: std::process::Child,
    metrics_addr: String,
}

impl Proc {
    pub fn start(bin: &str, port: u16) -> Self {
        Self::start_with(bin, port, &[])
    }

    /// [`Self::start`] with more arguments to `gatewright run`.
    pub fn start_with(bin: &str, port: u16, extra: &[&str]) -> Self {
        let metrics_addr = format!("127.0.0.1:{port}");
        let log = std::fs::File::create(log_path(&port.to_string())).unwrap();
        let child = std::process::Command::new(bin)
            .args([
                "run",
                "--controller-namespace",
                "gatewright-system",
                "--metrics-addr",
                &metrics_addr,
            ])
            .args(extra)
            .env(
                "RUST_LOG",
                std::env::var("SCALE_CONTROLLER_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdout(log.try_clone().expect("the controller log"))
            .stderr(log)
            .spawn()
            .expect("start the controller");
        Self {
            child,
            metrics_addr,
        }
    }
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
    /// (resident MiB, peak resident MiB).
    pub fn rss(&self) -> (f64, f64) {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        let kb = |k: &str| {
            s.lines()
                .find(|l| l.starts_with(k))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|k| k.parse::<f64>().ok())
                .unwrap_or(0.0)
                / 1024.0
        };
        (kb("VmRSS:"), kb("VmHWM:"))
    }
    /// Whether the process is gone (or a zombie: it exited and was not waited for).
    fn exited(&self) -> bool {
        self.stat()
            .is_none_or(|rest| rest.starts_with('Z') || rest.starts_with('X'))
    }
    /// `/proc/PID/stat` after "comm) ": the state first (`None` once the process is gone).
    fn stat(&self) -> Option<String> {
        let s = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).ok()?;
        s.rsplit_once(") ").map(|(_, r)| r.to_owned())
    }
    /// Where its output goes.
    fn log_path(&self) -> std::path::PathBuf {
        log_path(self.metrics_addr.rsplit(':').next().unwrap_or_default())
    }
    /// User + system CPU seconds.
    pub fn cpu(&self) -> f64 {
        let rest = self.stat().unwrap_or_default();
        let f: Vec<&str> = rest.split_whitespace().collect();
        let t = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        // After "comm) ": state is field 0, utime 11, stime 12 (clock ticks of 1/100 s).
        (t(11) + t(12)) / 100.0
    }
    pub async fn get(&self, path: &str) -> Option<String> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(&self.metrics_addr)
            .await
            .ok()?;
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).await.ok()?;
        Some(out)
    }
    pub async fn wait_ready(&self) -> Duration {
        let t = Instant::now();
        loop {
            if self
                .get("/readyz")
                .await
                .is_some_and(|r| r.starts_with("HTTP/1.1 200"))
            {
                return t.elapsed();
            }
            assert!(
                !self.exited(),
                "the controller exited before it was ready; its log: {}",
                self.log_path().display()
            );
            assert!(
                t.elapsed() < Duration::from_secs(600),
                "controller not ready after 10 minutes"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    pub fn stop(mut self) {
        // SIGTERM, as an orchestrator would; killed if it does not exit in 10 s.
        let _ = std::process::Command::new("kill")
            .arg(self.pid().to_string())
            .status();
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The file a controller serving metrics on `port` writes its output to.
fn log_path(port: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("scale-controller-{port}.log"))
}
