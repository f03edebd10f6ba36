//! The `gatewright` command line: `render`, `check`, `graph`, `crds` (and `run`, the
//! controller).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// A Gateway API controller-of-controllers.
#[derive(Parser)]
#[command(name = "gatewright", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the children and the status the controller would write, from YAML files.
    Render {
        /// A YAML file or a folder (read recursively). Repeatable.
        #[arg(short = 'f', long = "filename", required = true)]
        paths: Vec<PathBuf>,
        /// Namespace whose GatewayClassConfigs apply cluster-wide.
        #[arg(
            long,
            env = "GATEWRIGHT_NAMESPACE",
            default_value = "gatewright-system"
        )]
        controller_namespace: String,
        /// Time written as lastTransitionTime of new conditions (RFC 3339); now by default.
        #[arg(long)]
        now: Option<String>,
    },
    /// Validate blueprints: syntax, variables, dependency cycles, kinds.
    Check {
        /// A YAML file or a folder (read recursively). Repeatable.
        #[arg(short = 'f', long = "filename", required = true)]
        paths: Vec<PathBuf>,
    },
    /// Draw blueprints: templates, the kinds they make, what they read, rollout policies,
    /// creation and teardown order.
    Graph {
        /// A YAML file or a folder (read recursively). Repeatable.
        #[arg(short = 'f', long = "filename", required = true)]
        paths: Vec<PathBuf>,
        /// Output format.
        #[arg(short = 'o', long = "output", value_parser = ["mermaid", "dot"], default_value = "mermaid")]
        output: String,
    },
    /// Print our CustomResourceDefinitions as YAML.
    Crds,
    /// Run the controller against the cluster of the kubeconfig (or in-cluster config).
    Run(RunArgs),
    /// One line per Gateway of our classes in the live cluster: class, Programmed and
    /// why, children ready/total, routes accepted/total, time since the last transition.
    Status {
        /// `gateway` (the only kind), then the Gateway as NAME or NAMESPACE/NAME; all of
        /// the namespace when left out.
        #[arg(num_args = 0..=2, value_names = ["KIND", "NAME"])]
        what: Vec<String>,
        /// Every namespace.
        #[arg(short = 'A', long = "all-namespaces")]
        all_namespaces: bool,
        /// Output format.
        #[arg(short = 'o', long = "output", value_parser = ["text", "json", "yaml"], default_value = "text")]
        output: String,
        #[command(flatten)]
        cluster: ClusterArgs,
        #[command(flatten)]
        fleet: FleetArgs,
    },
    /// The tree of what a Gateway made in the live cluster (or, for a route, what it made
    /// under each Gateway of ours it names): children in dependency order with their
    /// readiness and conditions, templates waiting or failed, replacements under way.
    Trace {
        /// `gateway` or a route kind (`httproute`, `grpcroute`, `tlsroute`, `tcproute`,
        /// `udproute`).
        kind: String,
        /// NAME or NAMESPACE/NAME.
        name: String,
        /// Output format.
        #[arg(short = 'o', long = "output", value_parser = ["text", "json", "yaml"], default_value = "text")]
        output: String,
        /// Read again every 2 seconds and print the tree each time it changes (until
        /// interrupted).
        #[arg(short = 'w', long)]
        watch: bool,
        #[command(flatten)]
        cluster: ClusterArgs,
        #[command(flatten)]
        fleet: FleetArgs,
    },
    /// What applying these files (Gateways, routes, blueprints, policies) would change in
    /// the live cluster: children created, changed and deleted, statuses written
    /// differently. Exit 0 nothing, 1 something, 2 input or cluster unreadable, 3 a
    /// template failed.
    Diff {
        /// A YAML file or a folder (read recursively). Repeatable.
        #[arg(short = 'f', long = "filename", required = true)]
        paths: Vec<PathBuf>,
        #[command(flatten)]
        cluster: ClusterArgs,
        #[command(flatten)]
        fleet: FleetArgs,
    },
    /// A blueprint's rollout, as `kubectl rollout` shows a Deployment's: `status` (exit 0
    /// complete, 1 under way or paused, 4 halted or rolled back), `history` (its revisions
    /// and what each changed), `pause` and `resume` (`spec.rolloutPolicy.paused`), `undo`
    /// (the blueprint's spec back to a revision: the one the rollout started from, else
    /// the one before the newest, or `--to-revision N`).
    Rollout {
        /// `status`, `history`, `pause`, `resume` or `undo`.
        #[arg(value_parser = ["status", "history", "pause", "resume", "undo"])]
        action: String,
        /// The GatewayClassBlueprint.
        blueprint: String,
        /// `undo`: the revision number to go back to.
        #[arg(long)]
        to_revision: Option<i64>,
        /// Output format (`status`, `history`).
        #[arg(short = 'o', long = "output", value_parser = ["text", "json"], default_value = "text")]
        output: String,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
    /// Local testing only: write the status that downstream controllers needing a
    /// dataplane or a cloud (Istio, Contour, Crossplane, the AWS Load Balancer Controller)
    /// would write on every child we manage, once. cert-manager and external-dns run for
    /// real beside the test cluster (`tests/cluster/downstream up`); `--all` plays them too.
    SimulateReady {
        /// Also write cert-manager's status on Certificates and external-dns's on
        /// DNSEndpoints.
        #[arg(long)]
        all: bool,
    },
}

// The flags of `gatewright run` (its help is the variant's doc comment).
#[derive(clap::Args)]
struct RunArgs {
    /// Namespace whose GatewayClassConfigs apply cluster-wide.
    #[arg(
        long,
        env = "GATEWRIGHT_NAMESPACE",
        default_value = "gatewright-system"
    )]
    controller_namespace: String,
    /// Address of /metrics, /healthz and /readyz. All interfaces by default, so that
    /// kubelet probes and Prometheus reach them in a Pod; `127.0.0.1:8080` keeps them
    /// local, `[::]:8080` listens on IPv6 too.
    #[arg(long, env = "GATEWRIGHT_METRICS_ADDR", default_value = "0.0.0.0:8080")]
    metrics_addr: String,
    /// Log format.
    #[arg(long, env = "GATEWRIGHT_LOG_FORMAT", value_parser = ["text", "json"], default_value = "text")]
    log_format: String,
    /// Seconds between forced re-plans of every Gateway (drift safety net).
    #[arg(long, env = "GATEWRIGHT_RESYNC_SECONDS", default_value_t = 3600)]
    resync_seconds: u64,
    /// Seconds a child of a Gateway being deleted may stay in deletion before the
    /// Gateway reports it as stuck (an Event and a status condition).
    #[arg(long, env = "GATEWRIGHT_DELETION_STUCK_SECONDS", default_value_t = 120)]
    deletion_stuck_seconds: u64,
    /// Elect a leader through a Lease: every replica watches, only the holder writes.
    /// With --fleet: the leader serves the hub, and the members are shared among the
    /// replicas through a Lease each (docs/fleet.md).
    #[arg(long, env = "GATEWRIGHT_LEADER_ELECT")]
    leader_elect: bool,
    /// Name of the Lease (in the controller namespace).
    #[arg(long, env = "GATEWRIGHT_LEASE_NAME", default_value = "gatewright")]
    lease_name: String,
    /// Seconds one attempt of an API request may take (a watch: until its headers).
    #[arg(long, env = "GATEWRIGHT_REQUEST_TIMEOUT_SECONDS", default_value_t = 30)]
    request_timeout_seconds: u64,
    /// How many objects are reconciled at the same time (one at a time per object);
    /// four per core by default, at least 4, at most 32.
    #[arg(long, env = "GATEWRIGHT_WORKERS", value_parser = clap::value_parser!(u16).range(1..=1024))]
    workers: Option<u16>,
    /// Fleet mode: also serve every member cluster the ClusterProfiles
    /// (multicluster.x-k8s.io/v1alpha1) of this cluster, the hub, list.
    #[arg(long, env = "GATEWRIGHT_FLEET")]
    fleet: bool,
    /// Fleet mode: only the ClusterProfiles (and kubeconfig Secrets) of this namespace
    /// (every namespace when left out).
    #[arg(long, env = "GATEWRIGHT_FLEET_NAMESPACE", requires = "fleet")]
    fleet_namespace: Option<String>,
    /// Fleet mode: the access-provider file (`providers: [{name, execConfig}]`) naming
    /// the exec credential plugin for each access provider a ClusterProfile offers.
    /// Without it, members are reached through their kubeconfig Secrets.
    #[arg(long, env = "GATEWRIGHT_FLEET_PROVIDER_FILE", requires = "fleet")]
    fleet_provider_file: Option<PathBuf>,
    /// Fleet mode: the consumer name the members' kubeconfig Secrets are labelled for
    /// (`x-k8s.io/cluster-inventory-consumer`).
    #[arg(long, env = "GATEWRIGHT_FLEET_CONSUMER", default_value = "gatewright")]
    fleet_consumer: String,
}

/// Which cluster the live commands read.
#[derive(clap::Args)]
struct ClusterArgs {
    /// The kubeconfig file (else `KUBECONFIG`, else `~/.kube/config`, else in-cluster).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (else the current one).
    #[arg(long)]
    context: Option<String>,
    /// The namespace (else the context's).
    #[arg(short = 'n', long)]
    namespace: Option<String>,
    /// Act as this user (impersonation, as kubectl's `--as`).
    #[arg(long = "as", value_name = "USER")]
    as_user: Option<String>,
    /// Act as a member of this group (with `--as`). Repeatable.
    #[arg(long = "as-group", value_name = "GROUP", requires = "as_user")]
    as_groups: Vec<String>,
    /// Namespace whose GatewayClassConfigs apply cluster-wide.
    #[arg(
        long,
        env = "GATEWRIGHT_NAMESPACE",
        default_value = "gatewright-system"
    )]
    controller_namespace: String,
}

/// How `status`, `trace` and `diff` read a fleet (the cluster read is its hub).
#[derive(clap::Args)]
struct FleetArgs {
    /// Read the cluster as the hub of a fleet that `run --fleet` serves: its
    /// ClusterProfiles, and each child a placed template puts in a member, read there
    /// (through the member's access provider or kubeconfig Secret, as the controller
    /// reaches it).
    #[arg(long)]
    fleet: bool,
    /// With --fleet: only the ClusterProfiles (and kubeconfig Secrets) of this namespace.
    #[arg(long, requires = "fleet")]
    fleet_namespace: Option<String>,
    /// With --fleet: the access-provider file (as `run --fleet-provider-file`).
    #[arg(long, requires = "fleet")]
    fleet_provider_file: Option<PathBuf>,
    /// With --fleet: the consumer the members' kubeconfig Secrets are labelled for.
    #[arg(long, requires = "fleet", default_value = "gatewright")]
    fleet_consumer: String,
}

impl FleetArgs {
    fn read(&self) -> anyhow::Result<Option<gatewright::live::fleet::FleetRead>> {
        if !self.fleet {
            return Ok(None);
        }
        Ok(Some(gatewright::live::fleet::FleetRead {
            namespace: self.fleet_namespace.clone(),
            consumer: self.fleet_consumer.clone(),
            providers: provider_file(self.fleet_provider_file.as_deref())?.unwrap_or_default(),
        }))
    }
}

/// The access-provider file at `path`, parsed.
fn provider_file(
    path: Option<&std::path::Path>,
) -> anyhow::Result<Option<gatewright::fleet::access::ProviderFile>> {
    let Some(path) = path else { return Ok(None) };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("failed to read the access-provider file {}", path.display()))?;
    Ok(Some(
        gatewright::fleet::access::ProviderFile::parse(&text)
            .with_context(|| format!("in {}", path.display()))?,
    ))
}

impl ClusterArgs {
    /// The client, and the namespace to read (`-n`, else the context's).
    async fn connect(&self) -> anyhow::Result<(kube::Client, String)> {
        let (client, ns) = gatewright::live::connect(
            self.kubeconfig.as_deref(),
            self.context.as_deref(),
            self.as_user
                .as_deref()
                .map(|u| (u, self.as_groups.as_slice())),
        )
        .await?;
        Ok((client, self.namespace.clone().unwrap_or(ns)))
    }
}

/// `NAMESPACE/NAME`, or `NAME` in `namespace`.
fn object_key(name: &str, namespace: &str) -> gatewright::snapshot::Key {
    match name.split_once('/') {
        Some((ns, n)) => gatewright::snapshot::Key::new(ns, n),
        None => gatewright::snapshot::Key::new(namespace, name),
    }
}

fn format_of(output: &str) -> gatewright::live::commands::Format {
    use gatewright::live::commands::Format;
    use std::io::IsTerminal as _;
    match output {
        "json" => Format::Json,
        "yaml" => Format::Yaml,
        _ => Format::Text {
            colour: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        },
    }
}

/// Runs one live command on a runtime of its own; a connection failure is exit 2.
fn live<F, Fut>(cluster: &ClusterArgs, f: F) -> anyhow::Result<ExitCode>
where
    F: FnOnce(kube::Client, String) -> Fut,
    Fut: std::future::Future<Output = gatewright::cli::Output>,
{
    let rt = tokio::runtime::Runtime::new()?;
    let out = rt.block_on(async {
        match cluster.connect().await {
            Ok((client, ns)) => f(client, ns).await,
            Err(e) => gatewright::cli::Output {
                stderr: vec![format!("error: {e:#}")],
                code: gatewright::cli::EXIT_INPUT,
                ..Default::default()
            },
        }
    });
    Ok(emit(out))
}

/// mimalloc instead of the system allocator: planning allocates many small short-lived
/// objects, and glibc's malloc spent about 40% of a plan in its own bookkeeping (`cargo
/// bench --bench plan`: 2,843 plans/s with glibc, 6,684 with mimalloc).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    match cli.command {
        Command::Render {
            paths,
            controller_namespace,
            now,
        } => {
            let now = match now {
                Some(t) => Time(
                    t.parse()
                        .with_context(|| format!("--now {t:?} is not an RFC 3339 time"))?,
                ),
                None => Time(jiff_now()),
            };
            Ok(emit(gatewright::cli::render(
                &paths,
                &controller_namespace,
                &now,
            )))
        }
        Command::Check { paths } => Ok(emit(gatewright::cli::check(&paths))),
        Command::Graph { paths, output } => {
            let format = if output == "dot" {
                gatewright::cli::GraphFormat::Dot
            } else {
                gatewright::cli::GraphFormat::Mermaid
            };
            Ok(emit(gatewright::cli::graph(&paths, format)))
        }
        Command::Run(args) => run_controller(args),
        Command::Rollout {
            action,
            blueprint,
            to_revision,
            output,
            cluster,
        } => {
            use gatewright::live::rollout::{Action, rollout};
            let action = match action.as_str() {
                "status" => Action::Status,
                "history" => Action::History,
                "pause" => Action::Pause,
                "resume" => Action::Resume,
                _ => Action::Undo,
            };
            live(&cluster, |client, _| async move {
                rollout(&client, action, &blueprint, to_revision, output == "json").await
            })
        }
        Command::Status {
            what,
            all_namespaces,
            output,
            cluster,
            fleet,
        } => status(&what, all_namespaces, &output, &cluster, &fleet),
        Command::Trace {
            kind,
            name,
            output,
            watch,
            cluster,
            fleet,
        } => trace(&kind, &name, &output, watch, &cluster, &fleet),
        Command::Diff {
            paths,
            cluster,
            fleet,
        } => {
            let ctl_ns = cluster.controller_namespace.clone();
            let fleet = fleet.read()?;
            live(&cluster, |client, _| async move {
                gatewright::live::commands::diff(&client, &ctl_ns, fleet.as_ref(), &paths).await
            })
        }
        Command::SimulateReady { all } => simulate_ready(all),
        Command::Crds => {
            let mut out = std::io::stdout().lock();
            out.write_all(gatewright::api::crds_yaml()?.as_bytes())?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn jiff_now() -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::now()
}

fn emit(out: gatewright::cli::Output) -> ExitCode {
    print!("{}", out.stdout);
    let _ = std::io::stdout().flush();
    for line in &out.stderr {
        eprintln!("{line}");
    }
    ExitCode::from(u8::try_from(out.code).unwrap_or(1))
}

fn init_logging(format: &str) {
    let env = std::env::var("RUST_LOG").ok();
    let filter =
        tracing_subscriber::EnvFilter::try_new(gatewright::telemetry::log_filter(env.as_deref()))
            .unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new(gatewright::telemetry::DEFAULT_LOG_FILTER)
            });
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    if format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        if let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = ctrl_c.await;
}

/// `gatewright run`: the controller, until a signal or a failure stops it.
fn run_controller(args: RunArgs) -> anyhow::Result<ExitCode> {
    let RunArgs {
        controller_namespace,
        metrics_addr,
        log_format,
        resync_seconds,
        deletion_stuck_seconds,
        leader_elect,
        lease_name,
        request_timeout_seconds,
        workers,
        fleet,
        fleet_namespace,
        fleet_provider_file,
        fleet_consumer,
    } = args;
    init_logging(&log_format);
    let fleet = if fleet {
        let providers = provider_file(fleet_provider_file.as_deref())?;
        Some(gatewright::controller::FleetOptions {
            namespace: fleet_namespace,
            providers,
            consumer: fleet_consumer,
        })
    } else {
        None
    };
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let mut config = kube::Config::infer()
            .await
            .context("failed to load a kubeconfig or in-cluster config")?;
        // Connection and send deadlines; the answer's deadline is per request in the
        // controller's client layer (a read timeout here would cut watches).
        config.connect_timeout = Some(std::time::Duration::from_secs(10));
        config.write_timeout = Some(std::time::Duration::from_secs(30));
        // No user agent here: the controller's client stack names this replica on
        // every request (gatewright::identity::attributed).
        let client = kube::Client::try_from(config)
            .context("failed to build a client from the kubeconfig")?;
        let opts = gatewright::controller::Options {
            leader_election: leader_elect.then(|| (controller_namespace.clone(), lease_name)),
            controller_namespace,
            metrics_addr: Some(metrics_addr),
            resync: std::time::Duration::from_secs(resync_seconds.max(10)),
            deletion_stuck_after: std::time::Duration::from_secs(deletion_stuck_seconds),
            api: gatewright::controller::Resilience {
                request_timeout: std::time::Duration::from_secs(request_timeout_seconds.max(1)),
                ..Default::default()
            },
            fights: gatewright::controller::fight::Policy::default(),
            workers: workers.map_or_else(gatewright::controller::default_workers, usize::from),
            fleet,
        };
        let ctl = gatewright::controller::start(client, opts)
            .await
            .context("failed to start the controller")?;
        // One shutdown path, for a signal and for a controller that cannot go on.
        let failed = tokio::select! {
            () = shutdown_signal() => None,
            why = ctl.stopped() => Some(why),
        };
        tracing::info!("shutting down");
        if !ctl.shutdown(std::time::Duration::from_secs(10)).await {
            tracing::warn!("work still under way after 10s; stopping anyway");
        }
        match failed {
            Some(gatewright::controller::Stop::Failed(why)) => {
                Err(anyhow::anyhow!("the controller stopped: {why}"))
            }
            _ => anyhow::Ok(()),
        }
    })?;
    Ok(ExitCode::SUCCESS)
}

/// `gatewright status`.
fn status(
    what: &[String],
    all_namespaces: bool,
    output: &str,
    cluster: &ClusterArgs,
    fleet: &FleetArgs,
) -> anyhow::Result<ExitCode> {
    if let Some(kind) = what.first()
        && !matches!(
            kind.to_ascii_lowercase().as_str(),
            "gateway" | "gateways" | "gtw"
        )
    {
        anyhow::bail!("status reads Gateways: `status gateway NAME`, not {kind:?}");
    }
    let format = format_of(output);
    let ctl_ns = cluster.controller_namespace.clone();
    let fleet = fleet.read()?;
    live(cluster, |client, ns| async move {
        let key = what.get(1).map(|n| object_key(n, &ns));
        let scope = (!all_namespaces).then_some(ns.as_str());
        gatewright::live::commands::status(
            &client,
            &ctl_ns,
            fleet.as_ref(),
            scope,
            key.as_ref(),
            format,
        )
        .await
    })
}

/// `gatewright trace`, once or (`--watch`) every 2 s until a signal.
fn trace(
    kind: &str,
    name: &str,
    output: &str,
    watch: bool,
    cluster: &ClusterArgs,
    fleet: &FleetArgs,
) -> anyhow::Result<ExitCode> {
    use gatewright::live::commands::Traced;
    let lower = kind.to_ascii_lowercase();
    let row = gatewright::gateway::route_kinds::ROUTE_KINDS
        .iter()
        .find(|r| r.kind.to_ascii_lowercase() == lower || r.plural == lower);
    if row.is_none() && !matches!(lower.as_str(), "gateway" | "gateways" | "gtw") {
        anyhow::bail!(
            "trace follows a Gateway or a route: gateway, {}; not {kind:?}",
            gatewright::gateway::route_kinds::kind_names()
                .map(str::to_ascii_lowercase)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let format = format_of(output);
    let ctl_ns = cluster.controller_namespace.clone();
    let fleet = fleet.read()?;
    live(cluster, |client, ns| async move {
        let key = object_key(name, &ns);
        let what = match row {
            Some(r) => Traced::Route(gatewright::snapshot::RouteKey::new(
                r.kind,
                key.namespace,
                key.name,
            )),
            None => Traced::Gateway(key),
        };
        let mut last = String::new();
        loop {
            let out =
                gatewright::live::commands::trace(&client, &ctl_ns, fleet.as_ref(), &what, format)
                    .await;
            if !watch {
                return out;
            }
            if out.stdout != last {
                if !last.is_empty() {
                    println!();
                }
                print!("{}", out.stdout);
                let _ = std::io::stdout().flush();
                for l in &out.stderr {
                    eprintln!("{l}");
                }
                last = out.stdout;
            }
            tokio::select! {
                () = shutdown_signal() => return gatewright::cli::Output::default(),
                () = tokio::time::sleep(std::time::Duration::from_secs(2)) => {}
            }
        }
    })
}

/// `gatewright simulate-ready`.
fn simulate_ready(all: bool) -> anyhow::Result<ExitCode> {
    let play = if all {
        gatewright::simulate::Play::All
    } else {
        gatewright::simulate::Play::Dataplane
    };
    let rt = tokio::runtime::Runtime::new()?;
    let n = rt.block_on(async {
        let client = kube::Client::try_default()
            .await
            .context("failed to load a kubeconfig")?;
        gatewright::simulate::simulate_ready(&client, play)
            .await
            .context("failed to write simulated status")
    })?;
    println!("marked {n} children ready");
    Ok(ExitCode::SUCCESS)
}
