//! Generates the wasmtime bindings for the Spin interfaces the host implements.
//!
//! The WIT is not copied into this repository: it is taken from the `spin-sdk`
//! package the components are built with (found through `cargo metadata`), so
//! host and guests always agree on the interface text. The generated file,
//! `$OUT_DIR/spin_bindings.rs`, holds one `bindgen!` invocation that
//! `src/bindings.rs` includes.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The spin-sdk major version whose WIT we bind to.
const SPIN_SDK_MAJOR: &str = "7.";

/// The world the host implements: the Spin interfaces it provides to components.
const HOST_WORLD: &str = "package unread:host;

world spin-imports {
    import spin:redis/redis@3.0.0;
    import spin:variables/variables@3.0.0;
    import spin:mysql/mysql@3.0.0;
    import spin:postgres/postgres@4.2.0;
}
";

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));

    println!("cargo:rerun-if-changed=build.rs");
    let wit_dir = match locate_with_cargo_metadata(&manifest_dir) {
        Ok(dir) => dir,
        Err(metadata_error) => locate_in_cargo_home().unwrap_or_else(|| {
            panic!(
                "cannot find the spin-sdk {SPIN_SDK_MAJOR}x WIT directory: \
                 `cargo metadata` failed ({metadata_error}) and no spin-sdk-{SPIN_SDK_MAJOR}* \
                 was found under $CARGO_HOME/registry/src"
            )
        }),
    };
    println!("cargo:rerun-if-changed={}", wit_dir.display());

    let bindings = render_bindgen(&wit_dir);
    fs::write(out_dir.join("spin_bindings.rs"), bindings).expect("write spin_bindings.rs");
}

/// Asks cargo where the workspace's `spin-sdk` package lives and returns its `wit` dir.
fn locate_with_cargo_metadata(manifest_dir: &Path) -> Result<PathBuf, String> {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--offline", "--manifest-path"])
        .arg(manifest_dir.join("Cargo.toml"))
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).trim().to_owned());
    }
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).map_err(|e| format!("bad metadata: {e}"))?;
    if let Some(root) = metadata["workspace_root"].as_str() {
        println!("cargo:rerun-if-changed={}", Path::new(root).join("Cargo.lock").display());
    }
    spin_sdk_wit_dir(&metadata).ok_or_else(|| "no spin-sdk 7.x package in the workspace".to_owned())
}

/// Picks the `wit` directory of the newest spin-sdk 7.x package in `metadata`.
fn spin_sdk_wit_dir(metadata: &serde_json::Value) -> Option<PathBuf> {
    let packages = metadata["packages"].as_array()?;
    packages
        .iter()
        .filter(|p| p["name"] == "spin-sdk")
        .filter(|p| p["version"].as_str().is_some_and(|v| v.starts_with(SPIN_SDK_MAJOR)))
        .filter_map(|p| p["manifest_path"].as_str())
        .map(|manifest| Path::new(manifest).with_file_name("wit"))
        .filter(|dir| dir.is_dir())
        .max()
}

/// Fallback when cargo metadata is unavailable: look in the registry source cache.
fn locate_in_cargo_home() -> Option<PathBuf> {
    let cargo_home = env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
    let mut candidates = Vec::new();
    for registry in fs::read_dir(cargo_home.join("registry/src")).ok()?.flatten() {
        for package in fs::read_dir(registry.path()).into_iter().flatten().flatten() {
            let name = package.file_name().to_string_lossy().into_owned();
            let wit = package.path().join("wit");
            if name.starts_with(&format!("spin-sdk-{SPIN_SDK_MAJOR}")) && wit.is_dir() {
                candidates.push(wit);
            }
        }
    }
    candidates.into_iter().max()
}

/// The `imports` rules of the WIT functions that are not `async`: they run
/// with the store borrowed for the whole call, so they are plain (`async` only
/// where they do I/O) methods on the capability's view instead of `...WithStore`
/// functions. Every other function is `async | store`.
const SYNC_IMPORTS: &str = "        \"spin:postgres/postgres.[static]connection.open\": async | trappable,
        \"spin:postgres/postgres.[method]connection.query\": async | trappable,
        \"spin:postgres/postgres.[method]connection.execute\": async | trappable,
        \"spin:postgres/postgres.[constructor]connection-builder\": trappable,
        \"spin:postgres/postgres.[method]connection-builder.set-ca-root\": trappable,
        \"spin:postgres/postgres.[method]connection-builder.build\": async | trappable,
";

/// Every WIT `error` type becomes `crate::error::HostError<that type>`, as in
/// Spin's `crates/world`: host functions return `Result<T, HostError<E>>`.
const TRAPPABLE_ERRORS: &str = "        \"spin:redis/redis.error\" => crate::error::HostError<crate::bindings::spin::redis::redis::Error>,
        \"spin:mysql/mysql.error\" => crate::error::HostError<crate::bindings::spin::mysql::mysql::Error>,
        \"spin:postgres/postgres.error\" => crate::error::HostError<crate::bindings::spin::postgres::postgres::Error>,
        \"spin:variables/variables.error\" => crate::error::HostError<crate::bindings::spin::variables::variables::Error>,
";

/// The text of the generated bindings file.
fn render_bindgen(wit_dir: &Path) -> String {
    let path = wit_dir.to_str().expect("spin-sdk WIT path is not UTF-8");
    format!(
        "// @generated by tools/host/build.rs from {path}\n\
         wasmtime::component::bindgen!({{\n    \
             path: {path:?},\n    \
             inline: {HOST_WORLD:?},\n    \
             with: {{\n        \
                 \"spin:redis/redis.connection\": crate::redis::RedisConnection,\n        \
                 \"spin:mysql/mysql.connection\": crate::mysql::MysqlConnection,\n        \
                 \"spin:postgres/postgres.connection\": crate::postgres::PgConnection,\n        \
                 \"spin:postgres/postgres.connection-builder\": crate::postgres::PgConnectionBuilder,\n    \
             }},\n    \
             imports: {{\n{SYNC_IMPORTS}        default: async | store | trappable,\n    \
             }},\n    \
             trappable_error_type: {{\n{TRAPPABLE_ERRORS}    }},\n\
         }});\n"
    )
}
