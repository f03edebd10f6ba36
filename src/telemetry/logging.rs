//! The log filter of `gatewright`: the default, and what `RUST_LOG` gives with kube's
//! per-request client errors kept off.

/// The log filter when `RUST_LOG` is unset: our own lines at `info`, kube's warnings.
pub const DEFAULT_LOG_FILTER: &str =
    "info,kube=warn,kube_client=warn,kube_client::client::builder=off";

/// The log filter of `gatewright`, from `RUST_LOG` (`env`). kube's client logs an `ERROR`
/// for every request that fails (`failed with error client error (Connect)`: dozens a
/// minute while a member's API server is down, each watch retrying), beside the warning
/// gatewright says once per kind of failure; that line stays off unless `RUST_LOG` names
/// its target (`kube_client::client::builder`) itself.
#[must_use]
pub fn log_filter(env: Option<&str>) -> String {
    const NOISY: &str = "kube_client::client::builder";
    match env.map(str::trim) {
        None | Some("") => DEFAULT_LOG_FILTER.to_owned(),
        Some(f) if f.contains(NOISY) => f.to_owned(),
        Some(f) => format!("{f},{NOISY}=off"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_client_error_per_request_stays_off_unless_asked_for() {
        use super::log_filter;
        assert_eq!(log_filter(None), super::DEFAULT_LOG_FILTER);
        assert_eq!(
            log_filter(Some("info,kube=warn")),
            "info,kube=warn,kube_client::client::builder=off"
        );
        assert_eq!(
            log_filter(Some("debug,kube_client::client::builder=debug")),
            "debug,kube_client::client::builder=debug"
        );
        for f in [log_filter(None), log_filter(Some("gatewright=debug"))] {
            assert!(tracing_subscriber::EnvFilter::try_new(&f).is_ok(), "{f}");
        }
    }
}
