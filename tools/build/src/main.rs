//! `cargo run -p unread-build --release`: builds every component for
//! `wasm32-wasip2` and plugs the core into each HTTP function, writing one
//! self-contained component per function to `target/unread/` — the sources
//! `spin.toml` names. `spin build` runs this; so do the scripts and tests.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use wac_graph::types::Package;
use wac_graph::{CompositionGraph, EncodeOptions, PlugError, plug};

const TARGET: &str = "wasm32-wasip2";
/// The functions that import the core; other components are copied as built.
const FUNCTIONS: &[&str] = &[
    "touch",
    "mark-read",
    "list",
    "badge",
    "reconcile",
    "delete-conversation",
    "conversation-flags",
    "recall",
    "clear-category",
    "join",
];
const STANDALONE: &[&str] = &["not-found"];

fn main() -> Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize()?;
    ensure_target()?;
    cargo_build(&root)?;
    let built = target_dir(&root).join(TARGET).join("release");
    let out = root.join("target").join("unread");
    std::fs::create_dir_all(&out)?;
    let core = std::fs::read(built.join("unread_core.wasm")).context("reading the core component")?;
    for function in FUNCTIONS {
        let adapter = std::fs::read(built.join(artifact(function)))?;
        let composed = plug_core(&core, &adapter).with_context(|| format!("composing {function}"))?;
        std::fs::write(out.join(format!("{function}.wasm")), composed)?;
    }
    for component in STANDALONE {
        std::fs::copy(built.join(artifact(component)), out.join(format!("{component}.wasm")))?;
    }
    eprintln!("unread-build: components written to {}", out.display());
    Ok(())
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

fn artifact(component: &str) -> String {
    format!("unread_{}.wasm", component.replace('-', "_"))
}

/// The adapter with its `unread:core/counts` import satisfied by the core.
fn plug_core(core: &[u8], adapter: &[u8]) -> Result<Vec<u8>> {
    let mut graph = CompositionGraph::new();
    let core = Package::from_bytes("unread:core", None, core.to_vec(), graph.types_mut())?;
    let core = graph.register_package(core)?;
    let adapter = Package::from_bytes("unread:function", None, adapter.to_vec(), graph.types_mut())?;
    let adapter = graph.register_package(adapter)?;
    match plug(&mut graph, vec![core], adapter) {
        Ok(()) => {}
        Err(PlugError::NoPlugHappened) => bail!("the function does not import unread:core/counts"),
        Err(e) => return Err(e.into()),
    }
    Ok(graph.encode(EncodeOptions::default())?)
}
