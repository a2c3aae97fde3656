//! A small Spin-compatible host for the unread components, built on wasmtime.
//!
//! It loads `spin.toml`, serves the HTTP triggers over HTTP/1.1 and implements
//! the host interfaces our Spin 4.1 / spin-sdk 7 components import: WASI 0.2
//! and 0.3, `wasi:http@0.3.0`, `spin:redis/redis@3.0.0`,
//! `spin:mysql/mysql@3.0.0`, `spin:postgres/postgres@4.2.0` and
//! `spin:variables/variables@3.0.0`, behaving as Spin 4.1 does.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use unread_host::{HostOptions, InstanceMode, RunningHost};
//! let host = RunningHost::start(HostOptions {
//!     manifest: "spin.toml".into(),
//!     listen: "127.0.0.1:0".parse()?,
//!     instances: InstanceMode::spin_default(),
//!     variables: [("jwt_secret".to_owned(), "s".to_owned())].into(),
//!     tcp_nodelay: false,
//!     components: Vec::new(),
//!     quiet: false,
//! })
//! .await?;
//! println!("serving on http://{}", host.local_addr());
//! host.shutdown().await;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod app;
mod bindings;
mod capability;
mod engine;
mod error;
mod instances;
mod manifest;
mod mysql;
mod outbound;
mod postgres;
mod redis;
mod routes;
mod server;
mod sql;
mod store;
#[cfg(test)]
mod test_tls;
mod variables;

use anyhow::{Context, Result};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use instances::IDLE_INSTANCE_TIMEOUT;

/// What to serve and how.
#[derive(Clone, Debug)]
pub struct HostOptions {
    /// Path of `spin.toml`; component sources are relative to its directory.
    pub manifest: PathBuf,
    /// Address to listen on (`127.0.0.1:0` picks a free port).
    pub listen: SocketAddr,
    /// How component instances are reused across requests.
    pub instances: InstanceMode,
    /// Application variable values; they win over `SPIN_VARIABLE_*` environment variables.
    pub variables: HashMap<String, String>,
    /// Sets TCP_NODELAY on accepted connections. **Not Spin's behaviour**:
    /// Spin 4.1 leaves Nagle's algorithm on, and so does this host by
    /// default (`false`). Only for measuring what setting it would change
    /// (see `docs/latency.md`).
    pub tcp_nodelay: bool,
    /// Serve only these components (`spin up --component-id`, repeatable):
    /// their routes alone, any other path a plain 404. Empty: all of them.
    pub components: Vec<String>,
    /// Sends what the components write to stdout and stderr to /dev/null
    /// (`spin up --quiet`, where it goes to the log files only), still a
    /// write per line. For the benchmark, whose hundred thousand access
    /// lines would bury its figures.
    pub quiet: bool,
}

/// How requests map to component instances.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstanceMode {
    /// A fresh store and instance for every request.
    PerRequest,
    /// Spin 4.1's reuse of WASIp3 instances: one instance serves up to
    /// `max_requests` requests in total and up to `max_concurrent` at once;
    /// another instance starts when all are saturated. An instance idle for
    /// [`IDLE_INSTANCE_TIMEOUT`] is dropped, as in Spin.
    Reuse {
        /// Requests one instance serves before it is retired.
        max_requests: usize,
        /// Requests one instance serves at the same time.
        max_concurrent: usize,
    },
}

impl InstanceMode {
    /// Spin 4.1's default for WASIp3 components: `Reuse { max_requests: 128, max_concurrent: 16 }`.
    pub fn spin_default() -> InstanceMode {
        InstanceMode::Reuse { max_requests: 128, max_concurrent: 16 }
    }
}

impl Default for InstanceMode {
    /// Same as [`InstanceMode::spin_default`].
    fn default() -> InstanceMode {
        InstanceMode::spin_default()
    }
}

/// Cumulative Redis activity of a host since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RedisStats {
    /// `connection.open` calls, successful or not.
    pub opens: u64,
    /// Calls on connections that go to Redis (one per round trip).
    pub commands: u64,
}

/// A route the host serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServedRoute {
    /// The component serving it.
    pub component: String,
    /// The route as written in the manifest (e.g. `/v1/touch`, `/...`).
    pub route: String,
}

/// A host serving in background tokio tasks; stop it with [`RunningHost::shutdown`].
pub struct RunningHost {
    local_addr: SocketAddr,
    counters: Arc<redis::RedisCounters>,
    routes: Vec<ServedRoute>,
    stopping: Arc<AtomicBool>,
    stop: watch::Sender<bool>,
    server: Option<JoinHandle<()>>,
}

impl RunningHost {
    /// Loads the application, compiles its components and starts serving.
    ///
    /// Fails if the manifest is invalid, a selected component does not exist,
    /// a required variable has no value, a component cannot be loaded or
    /// linked, or the address cannot be bound.
    pub async fn start(opts: HostOptions) -> Result<RunningHost> {
        let counters = Arc::new(redis::RedisCounters::default());
        let stopping = Arc::new(AtomicBool::new(false));
        let app = app::load(&opts, counters.clone(), stopping.clone()).await?;
        let listener = tokio::net::TcpListener::bind(opts.listen)
            .await
            .with_context(|| format!("cannot listen on {}", opts.listen))?;
        let local_addr = listener.local_addr()?;
        let routes = app
            .router
            .routes()
            .iter()
            .map(|r| ServedRoute { component: r.component.clone(), route: r.raw.clone() })
            .collect();
        let (stop, stopped) = watch::channel(false);
        let server = tokio::spawn(server::serve(listener, Arc::new(app), opts.tcp_nodelay, stopped));
        Ok(RunningHost { local_addr, counters, routes, stopping, stop, server: Some(server) })
    }

    /// The address the host listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The routes served, in manifest order.
    pub fn routes(&self) -> &[ServedRoute] {
        &self.routes
    }

    /// Redis activity since start.
    pub fn redis_stats(&self) -> RedisStats {
        let (opens, commands) = self.counters.snapshot();
        RedisStats { opens, commands }
    }

    /// Stops accepting connections and closes open ones.
    ///
    /// Idle reusable instances end on their own within [`IDLE_INSTANCE_TIMEOUT`].
    pub async fn shutdown(mut self) {
        self.signal_stop();
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }

    fn signal_stop(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        let _ = self.stop.send(true);
    }
}

impl Drop for RunningHost {
    /// A host dropped without [`RunningHost::shutdown`] still stops serving (in the background).
    fn drop(&mut self) {
        self.signal_stop();
    }
}
