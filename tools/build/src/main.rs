//! `cargo run -p unread-build --release`: builds every component for
//! `wasm32-wasip2` and plugs the core into each HTTP function, writing one
//! self-contained component per function to `target/unread/` — the sources
//! `spin.toml` names. `spin build` runs this; so do the scripts and tests.
//!
//! `spin.toml` is the list of functions: each `[component.<id>]` whose
//! source is `target/unread/<id>.wasm` is built from `components/<id>`.
//! A function that imports `unread:core/counts` gets the core plugged in;
//! one that does not is copied as built.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use wac_graph::types::Package;
use wac_graph::{CompositionGraph, EncodeOptions, PlugError, plug};

const TARGET: &str = "wasm32-wasip2";
/// Where the functions' sources are written, relative to the workspace.
const OUT: &str = "target/unread";
/// The component every function shares (`components/core`), not served itself.
const CORE: &str = "core";

fn main() -> Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize()?;
    let functions = functions(&root)?;
    ensure_target()?;
    cargo_build(&root)?;
    let built = target_dir(&root).join(TARGET).join("release");
    let out = root.join(OUT);
    std::fs::create_dir_all(&out)?;
    let core = std::fs::read(built.join("unread_core.wasm")).context("reading the core component")?;
    for function in &functions {
        let adapter = std::fs::read(built.join(artifact(function)))
            .with_context(|| format!("reading the built component of {function}"))?;
        let composed = plug_core(&core, &adapter).with_context(|| format!("composing {function}"))?;
        std::fs::write(out.join(format!("{function}.wasm")), composed)?;
    }
    eprintln!("unread-build: {} components written to {}", functions.len(), out.display());
    Ok(())
}

/// The functions `spin.toml` serves from `target/unread/`. `components/`
/// holds exactly their crates and the core: one that spin.toml does not name
/// would be built and never shipped, one without a crate cannot be built.
fn functions(root: &Path) -> Result<Vec<String>> {
    let manifest: toml::Table =
        std::fs::read_to_string(root.join("spin.toml"))?.parse().context("parsing spin.toml")?;
    let components = manifest.get("component").and_then(|c| c.as_table()).context("spin.toml has no components")?;
    let mut functions = Vec::new();
    for (id, component) in components {
        let source = component.get("source").and_then(|s| s.as_str()).unwrap_or_default();
        if source != format!("{OUT}/{id}.wasm") {
            bail!("spin.toml: component {id:?} must have source = \"{OUT}/{id}.wasm\"");
        }
        if !root.join("components").join(id).join("Cargo.toml").exists() {
            bail!("spin.toml names component {id:?}, but components/{id} has no crate");
        }
        functions.push(id.clone());
    }
    for entry in std::fs::read_dir(root.join("components"))? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name != CORE && !functions.contains(&name) {
            bail!("components/{name} is not a component of spin.toml: add it there, or move a library to crates/");
        }
    }
    Ok(functions)
}

/// `rustup target add` is idempotent and quick when the target is there.
fn ensure_target() -> Result<()> {
    match Command::new("rustup").args(["target", "add", TARGET]).output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => bail!("rustup target add {TARGET} failed: {}", String::from_utf8_lossy(&out.stderr)),
        // No rustup (a distro toolchain): cargo will say if the target is missing.
        Err(_) => Ok(()),
    }
}

/// Builds the workspace's default members: everything in `components/`.
fn cargo_build(root: &Path) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(root)
        .args(["build", "--quiet", "--target", TARGET, "--release"])
        .status()
        .context("running cargo")?;
    if !status.success() {
        bail!("cargo build --target {TARGET} failed");
    }
    Ok(())
}

fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"))
}

/// The file cargo writes for crate `unread-<id>`.
fn artifact(component: &str) -> String {
    format!("unread_{}.wasm", component.replace('-', "_"))
}

/// The function with its `unread:core/counts` import satisfied by the core;
/// a function without that import, as it is.
fn plug_core(core: &[u8], adapter: &[u8]) -> Result<Vec<u8>> {
    let mut graph = CompositionGraph::new();
    let core = Package::from_bytes("unread:core", None, core.to_vec(), graph.types_mut())?;
    let core = graph.register_package(core)?;
    let function = Package::from_bytes("unread:function", None, adapter.to_vec(), graph.types_mut())?;
    let function = graph.register_package(function)?;
    match plug(&mut graph, vec![core], function) {
        Ok(()) => Ok(graph.encode(EncodeOptions::default())?),
        Err(PlugError::NoPlugHappened) => Ok(adapter.to_vec()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spin_toml_and_components_name_the_same_functions() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let functions = functions(&root).unwrap();
        assert!(
            functions.contains(&"touch".to_string()) && functions.contains(&"not-found".to_string()),
            "{functions:?}"
        );
    }
}
