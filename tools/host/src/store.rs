//! The per-instance store data and the views each host interface gets of it.

use crate::capability::CapabilityView;
use crate::mysql::MysqlCtx;
use crate::outbound::AllowedHosts;
use crate::postgres::PgCtx;
use crate::redis::RedisCtx;
use crate::variables::ComponentVariables;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::OutputFile;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiBody, WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView};

/// What every store of one component shares: its identity, variables and
/// outbound capability settings.
#[derive(Clone)]
pub struct ComponentContext {
    /// The component id from the manifest.
    pub id: String,
    /// The component's resolved variables.
    pub variables: Arc<ComponentVariables>,
    /// The manifest's `environment` table: the WASI environment of every instance, as in Spin.
    pub environment: Arc<Vec<(String, String)>>,
    /// The component's Redis permissions and the host's counters (each
    /// store takes its own copy, with its own count of held connections).
    pub redis: RedisCtx,
    /// The component's MySQL permissions.
    pub mysql: MysqlCtx,
    /// The component's PostgreSQL permissions.
    pub postgres: PgCtx,
    /// The component's resolved `allowed_outbound_hosts`, for outbound HTTP.
    pub allowed_hosts: Arc<AllowedHosts>,
    /// Set once the host is shutting down (instances dropped then are not failures).
    pub host_stopping: Arc<AtomicBool>,
    /// Where the instances' stdout and stderr go when they are dropped
    /// (`spin up --quiet`): /dev/null, opened once at load; `None` inherits
    /// the host's.
    pub quiet: Option<OutputFile>,
}

/// The data of one store, i.e. of one component instance.
pub struct StoreState {
    table: ResourceTable,
    wasi: WasiCtx,
    http: WasiHttpCtx,
    hooks: OutboundHttp,
    variables: Arc<ComponentVariables>,
    redis: RedisCtx,
    mysql: MysqlCtx,
    postgres: PgCtx,
}

impl StoreState {
    /// Fresh state for a new instance of `component`; guest stdout/stderr go
    /// to the host's, or nowhere when it is quiet.
    pub fn new(component: &ComponentContext) -> StoreState {
        let mut wasi = WasiCtxBuilder::new();
        wasi.envs(&component.environment);
        match &component.quiet {
            // Still written, a write per line, as Spin writes its log files
            // under `--quiet`: what the guests pay stays what Spin's cost.
            Some(null) => {
                wasi.stdout(null.clone()).stderr(null.clone());
            }
            None => {
                wasi.inherit_stdout().inherit_stderr();
            }
        }
        StoreState {
            table: ResourceTable::new(),
            wasi: wasi.build(),
            http: WasiHttpCtx::new(),
            hooks: OutboundHttp { allowed_hosts: component.allowed_hosts.clone() },
            variables: component.variables.clone(),
            redis: component.redis.for_instance(),
            mysql: component.mysql.for_instance(),
            postgres: component.postgres.for_instance(),
        }
    }
}

impl WasiView for StoreState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl WasiHttpView for StoreState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        http_view(self)
    }
}

/// The `wasi:http` view of a store.
pub fn http_view(state: &mut StoreState) -> WasiHttpCtxView<'_> {
    WasiHttpCtxView { hooks: &mut state.hooks, table: &mut state.table, ctx: &mut state.http }
}

/// The `spin:redis` view of a store.
pub fn redis_view(state: &mut StoreState) -> CapabilityView<'_, RedisCtx> {
    CapabilityView { table: &mut state.table, ctx: &state.redis }
}

/// The `spin:mysql` view of a store.
pub fn mysql_view(state: &mut StoreState) -> CapabilityView<'_, MysqlCtx> {
    CapabilityView { table: &mut state.table, ctx: &state.mysql }
}

/// The `spin:postgres` view of a store.
pub fn postgres_view(state: &mut StoreState) -> CapabilityView<'_, PgCtx> {
    CapabilityView { table: &mut state.table, ctx: &state.postgres }
}

/// The `spin:variables` view of a store.
pub fn variables_view(state: &mut StoreState) -> &ComponentVariables {
    &state.variables
}

/// `wasi:http` hooks for outbound HTTP: a request goes out only to a
/// destination the component's `allowed_outbound_hosts` permit (the guest
/// sees `HTTP-request-denied` otherwise, as under Spin), then as wasmtime
/// sends it by default (HTTPS verified against the web PKI roots).
struct OutboundHttp {
    allowed_hosts: Arc<AllowedHosts>,
}

impl WasiHttpHooks for OutboundHttp {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<wasmtime_wasi_http::RequestOptions>,
        fut: Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
    ) -> Box<
        dyn Future<
                Output = wasmtime_wasi_http::Result<(
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
                )>,
            > + Send,
    > {
        let scheme = request.uri().scheme_str().unwrap_or("https").to_string();
        if self.allowed_hosts.permit(&request.uri().to_string(), &scheme).is_err() {
            return Box::new(async { Err(wasmtime_wasi_http::Error::HttpRequestDenied) });
        }
        let _ = fut;
        Box::new(async move {
            use http_body_util::BodyExt;
            let (response, io) = wasmtime_wasi_http::default_send_request(request, options).await?;
            Ok((
                response.map(BodyExt::boxed_unsync),
                Box::new(io) as Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
            ))
        })
    }
}
