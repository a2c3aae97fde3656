//! The wasmtime engine, the linker with every interface our components import,
//! and compilation of component files.

use crate::mysql::MysqlHost;
use crate::postgres::PgHost;
use crate::redis::RedisHost;
use crate::store::{self, StoreState};
use crate::variables::VariablesHost;
use anyhow::{Context, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;
use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine};
use wasmtime_wasi_http::p3::bindings::ServicePre;

/// Adds context to a wasmtime error, giving an `anyhow` error.
trait WasmtimeContext<T> {
    fn context_for(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T> WasmtimeContext<T> for wasmtime::Result<T> {
    fn context_for(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(anyhow::Error::from).with_context(what)
    }
}

/// The process-wide engine (one engine lets hosts in one process share compiled components).
pub fn shared_engine() -> Result<Engine> {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    if let Some(engine) = ENGINE.get() {
        return Ok(engine.clone());
    }
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.wasm_component_model_async(true);
    let engine = Engine::new(&config).context_for(|| "cannot create the wasmtime engine".into())?;
    Ok(ENGINE.get_or_init(|| engine).clone())
}

/// A linker providing WASI 0.2 (async) and 0.3, `wasi:http` 0.3, `spin:redis`,
/// `spin:mysql`, `spin:postgres` and `spin:variables`.
pub fn build_linker(engine: &Engine) -> Result<Linker<StoreState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).context_for(|| "linking WASI 0.2".into())?;
    wasmtime_wasi::p3::add_to_linker(&mut linker).context_for(|| "linking WASI 0.3".into())?;
    wasmtime_wasi_http::p3::add_to_linker(&mut linker).context_for(|| "linking wasi:http 0.3".into())?;
    crate::bindings::spin::redis::redis::add_to_linker::<StoreState, RedisHost>(&mut linker, store::redis_view)
        .context_for(|| "linking spin:redis".into())?;
    crate::bindings::spin::mysql::mysql::add_to_linker::<StoreState, MysqlHost>(&mut linker, store::mysql_view)
        .context_for(|| "linking spin:mysql".into())?;
    crate::bindings::spin::postgres::postgres::add_to_linker::<StoreState, PgHost>(&mut linker, store::postgres_view)
        .context_for(|| "linking spin:postgres".into())?;
    crate::bindings::spin::variables::variables::add_to_linker::<StoreState, VariablesHost>(
        &mut linker,
        store::variables_view,
    )
    .context_for(|| "linking spin:variables".into())?;
    Ok(linker)
}

/// Pre-links a compiled component as a `wasi:http/service`, ready for cheap instantiation.
pub fn prepare_service(linker: &Linker<StoreState>, component: &Component, id: &str) -> Result<ServicePre<StoreState>> {
    let instance_pre = linker
        .instantiate_pre(component)
        .context_for(|| format!("component `{id}` imports something this host does not provide"))?;
    ServicePre::new(instance_pre).context_for(|| format!("component `{id}` does not export wasi:http/handler@0.3.0"))
}

/// Identity of a component file's contents, for the compile cache.
#[derive(Clone, PartialEq, Eq, Hash)]
struct FileStamp {
    path: PathBuf,
    len: u64,
    modified: Option<SystemTime>,
}

/// Compiles the component at `path`, reusing an earlier compilation of the same unchanged file.
pub fn load_component(engine: &Engine, path: &Path) -> Result<Component> {
    static CACHE: OnceLock<Mutex<HashMap<FileStamp, Component>>> = OnceLock::new();
    let metadata = std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    let stamp = FileStamp {
        path: path.canonicalize().unwrap_or_else(|_| path.to_owned()),
        len: metadata.len(),
        modified: metadata.modified().ok(),
    };
    let cache = CACHE.get_or_init(Default::default);
    if let Some(component) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&stamp) {
        return Ok(component.clone());
    }
    let component = Component::from_file(engine, path).context_for(|| format!("cannot compile {}", path.display()))?;
    cache.lock().unwrap_or_else(|e| e.into_inner()).insert(stamp, component.clone());
    Ok(component)
}
