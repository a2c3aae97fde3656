//! Loading an application: manifest, variables, permissions and compiled components.

use crate::HostOptions;
use crate::engine;
use crate::instances;
use crate::manifest::Manifest;
use crate::mysql::MysqlCtx;
use crate::outbound::AllowedHosts;
use crate::postgres::PgCtx;
use crate::redis::{RedisCounters, RedisCtx};
use crate::routes::Router;
use crate::server::App;
use crate::store::ComponentContext;
use crate::variables::{AppVariables, ComponentVariables};
use anyhow::{Context, Result};
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use wasmtime_wasi::cli::OutputFile;

/// Loads everything `opts` describes; fails with a clear message on any problem.
pub async fn load(opts: &HostOptions, counters: Arc<RedisCounters>, host_stopping: Arc<AtomicBool>) -> Result<App> {
    let mut manifest = Manifest::load(&opts.manifest)?;
    if !opts.components.is_empty() {
        manifest
            .retain_components(&opts.components)
            .context("failed to resolve application with only components selected with --component")?;
    }
    let manifest_dir = opts.manifest.parent().unwrap_or(Path::new(".")).to_owned();
    let app_variables = AppVariables::resolve_from_process_env(&manifest.variables, &opts.variables)?;
    let router = Router::new(&manifest.trigger.http)?;
    let contexts = component_contexts(&manifest, &app_variables, &counters, &host_stopping, opts.quiet)?;

    let engine = engine::shared_engine()?;
    let linker = engine::build_linker(&engine)?;
    let mut handlers = HashMap::new();
    for id in routed_components(&router) {
        let path = manifest.component_path(&manifest_dir, &id)?;
        let component = compile(&engine, &path).await.with_context(|| format!("component `{id}`"))?;
        let context = contexts[&id].clone();
        let handler = instances::component_handler(&engine, &linker, &component, context, &opts.instances)?;
        handlers.insert(id, handler);
    }
    Ok(App { router, handlers, info_json: info_json(&manifest) })
}

/// Resolves every component's variables and outbound permissions.
///
/// Templated `allowed_outbound_hosts` are validated with the manifest defaults
/// (as Spin does when loading) and resolved with `app_variables`.
fn component_contexts(
    manifest: &Manifest,
    app_variables: &AppVariables,
    counters: &Arc<RedisCounters>,
    host_stopping: &Arc<AtomicBool>,
    quiet: bool,
) -> Result<HashMap<String, ComponentContext>> {
    let defaults = AppVariables::defaults_only(&manifest.variables);
    let quiet = match quiet {
        true => {
            let null =
                std::fs::OpenOptions::new().write(true).open("/dev/null").context("opening /dev/null for --quiet")?;
            Some(OutputFile::new(null))
        }
        false => None,
    };
    let mut contexts = HashMap::new();
    for (id, decl) in &manifest.component {
        let variables = ComponentVariables::resolve(id, &decl.variables, app_variables)?;
        let allowed_hosts =
            Arc::new(AllowedHosts::resolve(id, &decl.allowed_outbound_hosts, app_variables, &defaults)?);
        let context = ComponentContext {
            id: id.clone(),
            variables: Arc::new(variables),
            environment: Arc::new(decl.environment.clone().into_iter().collect()),
            redis: RedisCtx::new(allowed_hosts.clone(), counters.clone()),
            mysql: MysqlCtx::new(allowed_hosts.clone()),
            postgres: PgCtx::new(allowed_hosts.clone()),
            allowed_hosts,
            host_stopping: host_stopping.clone(),
            quiet: quiet.clone(),
        };
        contexts.insert(id.clone(), context);
    }
    Ok(contexts)
}

/// The components that serve at least one route.
fn routed_components(router: &Router) -> BTreeSet<String> {
    router.routes().iter().map(|route| route.component.clone()).collect()
}

/// Compiles a component file off the async runtime (compilation is CPU-bound).
async fn compile(engine: &wasmtime::Engine, path: &Path) -> Result<wasmtime::component::Component> {
    let (engine, path) = (engine.clone(), path.to_owned());
    tokio::task::spawn_blocking(move || engine::load_component(&engine, &path))
        .await
        .context("compilation task failed")?
}

/// The body of `/.well-known/spin/info`: application name and version.
fn info_json(manifest: &Manifest) -> String {
    let mut info = serde_json::Map::new();
    info.insert("name".into(), manifest.application.name.clone().into());
    if let Some(version) = &manifest.application.version {
        info.insert("version".into(), version.clone().into());
    }
    serde_json::to_string_pretty(&info).unwrap_or_default()
}
