//! The `gatewright` command line: `render`, `check`, `crds` (and `run`, the controller).

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
    /// Print our CustomResourceDefinitions as YAML.
    Crds,
}

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
