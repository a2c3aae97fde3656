//! `unread-host up [--listen ADDR] [--manifest PATH] [--per-request] [--tcp-nodelay] [--variable NAME=VALUE]...
//! [--component-id ID]...`
//!
//! Serves the application described by `spin.toml` until Ctrl-C, like `spin up`;
//! unlike it, refuses to start with a `jwt_secret` unread would not accept.
//! `--component-id` (`-c`, repeatable) serves only those components, as
//! `spin up --component-id` does: one function per process, scaled alone.

use anyhow::{Context, Result, bail};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use unread_host::{HostOptions, InstanceMode, RunningHost};

const USAGE: &str = "usage: unread-host up [--listen 127.0.0.1:3000] [--manifest spin.toml] [--per-request] \
                     [--tcp-nodelay] [--quiet] [--variable NAME=VALUE]... [--component-id ID]...";

const OPTIONS: &str = "Serves spin.toml's functions as `spin up` does (Ctrl-C stops).

  --listen ADDR           where to listen (127.0.0.1:3000)
  --manifest, -f PATH     the manifest (spin.toml)
  --per-request           a fresh instance per request (default: reuse, as Spin 4.1)
  --variable NAME=VALUE   an application variable (wins over SPIN_VARIABLE_NAME)
  --component-id, -c ID   serve only this component (repeatable), as spin up -c
  --quiet, -q             drop the components' stdout and stderr, as spin up -q
  --tcp-nodelay           TCP_NODELAY on accepted sockets: NOT Spin's behaviour,
                          for measuring Nagle's cost only (docs/latency.md)";

#[tokio::main]
async fn main() {
    if let Err(e) = run(std::env::args().skip(1).collect()).await {
        eprintln!("Error: {e:#}");
        std::process::exit(1);
    }
}

async fn run(args: Vec<String>) -> Result<()> {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}\n\n{OPTIONS}");
        return Ok(());
    }
    let options = parse_args(&args)?;
    check_jwt_secret(&options)?;
    let host = RunningHost::start(options).await?;
    print_routes(&host);
    tokio::signal::ctrl_c().await.context("cannot wait for Ctrl-C")?;
    let stats = host.redis_stats();
    host.shutdown().await;
    println!("Stopped. Redis: {} open(s), {} command(s).", stats.opens, stats.commands);
    Ok(())
}

/// Parses the command line into host options.
fn parse_args(args: &[String]) -> Result<HostOptions> {
    let mut args = args.iter();
    match args.next().map(String::as_str) {
        Some("up") => {}
        None => bail!("{USAGE}"),
        Some(other) => bail!("unknown command {other:?}\n{USAGE}"),
    }
    let mut options = HostOptions {
        manifest: PathBuf::from("spin.toml"),
        listen: "127.0.0.1:3000".parse()?,
        instances: InstanceMode::spin_default(),
        variables: HashMap::new(),
        tcp_nodelay: false,
        components: Vec::new(),
        quiet: false,
    };
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value\n{USAGE}"));
        match arg.as_str() {
            "--listen" => options.listen = parse_listen(value()?)?,
            "--manifest" | "-f" => options.manifest = PathBuf::from(value()?),
            "--per-request" => options.instances = InstanceMode::PerRequest,
            // Not what Spin does: for measuring Nagle's cost (docs/latency.md).
            "--tcp-nodelay" => options.tcp_nodelay = true,
            "--quiet" | "-q" => options.quiet = true,
            "--component-id" | "-c" => options.components.push(value()?.to_owned()),
            "--variable" => {
                let (name, val) = value()?.split_once('=').context("--variable expects NAME=VALUE")?;
                options.variables.insert(name.to_owned(), val.to_owned());
            }
            other => bail!("unknown option {other:?}\n{USAGE}"),
        }
    }
    Ok(options)
}

/// unread refuses HS256 keys shorter than the hash (32 bytes): its app calls
/// would all answer 503 `misconfigured`. This host is unread's own tooling,
/// so it applies that product rule before it serves rather than letting such
/// an app start: a manifest that declares `jwt_secret` must get one of at
/// least [`MIN_JWT_SECRET_BYTES`], from `--variable`, `SPIN_VARIABLE_JWT_SECRET`
/// or its default, in Spin's order. The value itself is never printed.
fn check_jwt_secret(options: &HostOptions) -> Result<()> {
    const NAME: &str = "jwt_secret";
    let text = std::fs::read_to_string(&options.manifest)
        .with_context(|| format!("cannot read {}", options.manifest.display()))?;
    let manifest: toml::Table =
        toml::from_str(&text).with_context(|| format!("{} is not valid TOML", options.manifest.display()))?;
    let Some(declared) = manifest.get("variables").and_then(|v| v.get(NAME)) else {
        return Ok(());
    };
    let value = options
        .variables
        .get(NAME)
        .cloned()
        .or_else(|| std::env::var(format!("SPIN_VARIABLE_{}", NAME.to_ascii_uppercase())).ok())
        .or_else(|| declared.get("default").and_then(|d| d.as_str()).map(str::to_owned));
    // No value at all: starting reports the missing required variable.
    if let Some(value) = value
        && value.len() < MIN_JWT_SECRET_BYTES
    {
        bail!(
            "variable {NAME} is {} bytes long; unread needs at least {MIN_JWT_SECRET_BYTES} \
             (set SPIN_VARIABLE_JWT_SECRET or --variable {NAME}=..., e.g. from `openssl rand -hex 32`)",
            value.len()
        );
    }
    Ok(())
}

/// The shortest `jwt_secret` unread accepts (see `crates/api`).
const MIN_JWT_SECRET_BYTES: usize = 32;

fn parse_listen(text: &str) -> Result<SocketAddr> {
    text.parse().with_context(|| format!("--listen expects IP:PORT, got {text:?}"))
}

/// Prints the base URL and routes, in the style of `spin up`.
fn print_routes(host: &RunningHost) {
    let base = format!("http://{}", host.local_addr());
    println!("\nServing {base}");
    println!("Available Routes:");
    for route in host.routes() {
        match route.route.strip_suffix("/...") {
            Some(prefix) => println!("  {}: {base}{prefix} (wildcard)", route.component),
            None => println!("  {}: {base}{}", route.component, route.route),
        }
    }
}
