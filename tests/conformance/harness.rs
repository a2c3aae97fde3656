//! Runs one conformance case the way Spin's conformance runner does, with the
//! development host in place of `spin up`.
//!
//! A case is a directory under `tests/conformance/cases/` holding a manifest
//! template `spin.toml` and the expectations `test.json`, in the suite's
//! `test.json5` schema (written as plain JSON):
//!
//! - `invocations`: requests (`method` GET or POST, `path` with the query,
//!   `headers`, `body`) and the responses they must get (`status`, 200 when
//!   left out; `headers`, each with `name`, an optional `value` and
//!   `optional`; `body`, empty when left out);
//! - `preconditions`: `{"kind": "redis"}` starts a Redis server.
//!
//! Templates, in the manifest and in request header values: `%{port=6379}`
//! becomes the port of the case's own Redis server (the one service that
//! listens on the guest port 6379); `%{source=NAME}` copies the component
//! built from `tests/conformance/components/NAME` next to the rendered
//! manifest and becomes its file name.
//!
//! A response passes as with the suite's runner: the status first, then the
//! body, then the headers. Header names and values are compared in lower
//! case; every expected header must be present unless `optional`, with the
//! given value if there is one, and no other header may be present.

use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;
use std::collections::HashMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use unread_host::{HostOptions, InstanceMode, RunningHost};

/// The command that builds the components the cases load.
pub const BUILD_COMMAND: &str = "cargo build --release --target wasm32-wasip2 \
     -p conformance-outbound-redis -p conformance-variables -p conformance-request-shape";

/// The guest port the suite's Redis service listens on.
const REDIS_GUEST_PORT: u16 = 6379;

/// How long one request may take before the case fails.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// How many times a case's invocations are sent to one running host. The
/// second round reaches an instance that has served before when the host
/// reuses instances, as Spin does.
const ROUNDS: usize = 2;

/// Both ways Spin may run a WASIp3 component: a fresh instance per request,
/// and Spin 4.1's default reuse.
pub fn modes() -> [InstanceMode; 2] {
    [InstanceMode::PerRequest, InstanceMode::spin_default()]
}

/// Runs case `name` in each of `modes`; panics with every failure.
pub async fn run_case(name: &str, modes: &[InstanceMode]) {
    run_case_with_variables(name, modes, &[]).await;
}

/// Runs case `name` in each of `modes` with application variable values
/// given at run time (as `spin up --variable NAME=VALUE` does); the values
/// may hold `%{port=...}` templates.
pub async fn run_case_with_variables(name: &str, modes: &[InstanceMode], variables: &[(&str, &str)]) {
    let case = Case::load(name).unwrap_or_else(|e| panic!("conformance case {name}: {e:#}"));
    let variables: HashMap<String, String> =
        variables.iter().map(|(name, value)| (name.to_string(), value.to_string())).collect();
    let mut failures = Vec::new();
    for &mode in modes {
        if let Err(e) = case.run(mode, &variables).await {
            failures.push(format!("conformance case {name}, instances {mode:?}: {e:#}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Runs case `name`, whose manifest the host must refuse to load (as `spin up`
/// refuses it) with a message containing `reason` (Spin's words); its
/// `invocations` are not sent.
pub async fn run_refused_case(name: &str, reason: &str) {
    let case = Case::load(name).unwrap_or_else(|e| panic!("conformance case {name}: {e:#}"));
    match case.run_refused().await {
        Ok(refusal) => {
            assert!(refusal.contains(reason), "conformance case {name}: refused, but not with {reason:?}: {refusal}")
        }
        Err(e) => panic!("conformance case {name}: {e:#}"),
    }
}

/// One case: its manifest template and what it expects.
struct Case {
    name: String,
    dir: PathBuf,
    invocations: Vec<Invocation>,
    needs_redis: bool,
}

struct Invocation {
    request: RequestSpec,
    response: ResponseSpec,
}

struct RequestSpec {
    method: reqwest::Method,
    path: String,
    headers: Vec<(String, String)>,
    body: Option<String>,
}

struct ResponseSpec {
    status: u16,
    headers: Vec<ExpectedHeader>,
    body: String,
}

struct ExpectedHeader {
    name: String,
    value: Option<String>,
    optional: bool,
}

/// What came back.
struct Actual {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Case {
    fn load(name: &str) -> Result<Case> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/cases").join(name);
        let path = dir.join("test.json");
        let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let config: Value = serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
        let config = object(&config, "test.json", &["invocations", "preconditions"])?;
        let invocations = config
            .get("invocations")
            .and_then(Value::as_array)
            .context("`invocations` must be a list")?
            .iter()
            .map(Invocation::parse)
            .collect::<Result<Vec<_>>>()?;
        let mut needs_redis = false;
        for precondition in config.get("preconditions").and_then(Value::as_array).into_iter().flatten() {
            match precondition.get("kind").and_then(Value::as_str) {
                Some("redis") => needs_redis = true,
                other => bail!("unsupported precondition {other:?}"),
            }
        }
        Ok(Case { name: name.to_owned(), dir, invocations, needs_redis })
    }

    /// Starts the case's services and a host on the rendered manifest, then
    /// sends every invocation [`ROUNDS`] times and checks every response.
    async fn run(&self, mode: InstanceMode, variables: &HashMap<String, String>) -> Result<()> {
        let redis = self.needs_redis.then(RedisServer::start).transpose()?;
        let ports: HashMap<u16, u16> = redis.iter().map(|r| (REDIS_GUEST_PORT, r.port)).collect();
        let work = WorkDir::new(&self.name)?;
        let manifest = self.render_manifest(&work, &ports)?;
        let host = RunningHost::start(host_options(manifest, mode, variables, &ports)?)
            .await
            .context("the host does not start")?;
        let base = format!("http://{}", host.local_addr());
        let client = reqwest::Client::new();
        let mut outcome = Ok(());
        'rounds: for round in 1..=ROUNDS {
            for (index, invocation) in self.invocations.iter().enumerate() {
                let checked = invocation.run(&client, &base, &ports).await;
                if let Err(e) = checked {
                    outcome = Err(e.context(format!(
                        "invocation {} ({}), round {round}",
                        index + 1,
                        invocation.request.path
                    )));
                    break 'rounds;
                }
            }
        }
        host.shutdown().await;
        drop(redis);
        outcome
    }

    /// Starts the case's services and a host on the rendered manifest, which
    /// must refuse to load it (and so refuse to serve).
    async fn run_refused(&self) -> Result<String> {
        let redis = self.needs_redis.then(RedisServer::start).transpose()?;
        let ports: HashMap<u16, u16> = redis.iter().map(|r| (REDIS_GUEST_PORT, r.port)).collect();
        let work = WorkDir::new(&self.name)?;
        let manifest = self.render_manifest(&work, &ports)?;
        let options = host_options(manifest, InstanceMode::spin_default(), &HashMap::new(), &ports)?;
        match RunningHost::start(options).await {
            Ok(host) => {
                host.shutdown().await;
                bail!("the host loaded the application")
            }
            Err(e) => Ok(format!("{e:#}")),
        }
    }

    /// Writes the manifest with its templates filled in, next to copies of the components.
    fn render_manifest(&self, work: &WorkDir, ports: &HashMap<u16, u16>) -> Result<PathBuf> {
        let template = std::fs::read_to_string(self.dir.join("spin.toml")).context("cannot read spin.toml")?;
        let rendered = render(&template, |key, value| match key {
            "port" => port(ports, value),
            "source" => {
                let built = component_wasm(value)?;
                let file_name = built.file_name().context("component path has no file name")?.to_owned();
                std::fs::copy(&built, work.path.join(&file_name))
                    .with_context(|| format!("cannot copy {}", built.display()))?;
                Ok(file_name.to_string_lossy().into_owned())
            }
            other => bail!("unknown template key {other:?}"),
        })?;
        let manifest = work.path.join("spin.toml");
        std::fs::write(&manifest, rendered)?;
        Ok(manifest)
    }
}

/// The host's options: the manifest, the instance mode and the variables
/// with their templates filled in.
fn host_options(
    manifest: PathBuf,
    mode: InstanceMode,
    variables: &HashMap<String, String>,
    ports: &HashMap<u16, u16>,
) -> Result<HostOptions> {
    let variables = variables
        .iter()
        .map(|(name, value)| {
            let value = render(value, |key, value| match key {
                "port" => port(ports, value),
                other => bail!("unknown template key {other:?} in a variable"),
            })?;
            Ok((name.clone(), value))
        })
        .collect::<Result<_>>()?;
    Ok(HostOptions {
        manifest,
        listen: "127.0.0.1:0".parse()?,
        instances: mode,
        variables,
        tcp_nodelay: false,
        components: Vec::new(),
        quiet: false,
    })
}

impl Invocation {
    fn parse(value: &Value) -> Result<Invocation> {
        let invocation = object(value, "invocation", &["request", "response"])?;
        let request = invocation.get("request").context("invocation without `request`")?;
        let request = object(request, "request", &["method", "path", "headers", "body"])?;
        let method = match request.get("method").and_then(Value::as_str).unwrap_or("GET") {
            "GET" => reqwest::Method::GET,
            "POST" => reqwest::Method::POST,
            other => bail!("unsupported method {other:?}"),
        };
        let headers = list(request.get("headers"), "request headers")?
            .iter()
            .map(|header| {
                let header = object(header, "request header", &["name", "value"])?;
                Ok((text(header.get("name"), "header name")?, text(header.get("value"), "header value")?))
            })
            .collect::<Result<_>>()?;
        let response = invocation.get("response").context("invocation without `response`")?;
        let response = object(response, "response", &["status", "headers", "body"])?;
        let status = match response.get("status") {
            None => 200,
            Some(status) => status.as_u64().and_then(|s| u16::try_from(s).ok()).context("`status` is not a status")?,
        };
        let expected_headers = list(response.get("headers"), "response headers")?
            .iter()
            .map(|header| {
                let header = object(header, "response header", &["name", "value", "optional"])?;
                Ok(ExpectedHeader {
                    name: text(header.get("name"), "header name")?,
                    value: header.get("value").map(|v| text(Some(v), "header value")).transpose()?,
                    optional: header
                        .get("optional")
                        .map(|v| v.as_bool().context("`optional` is not a boolean"))
                        .transpose()?
                        .unwrap_or(false),
                })
            })
            .collect::<Result<_>>()?;
        Ok(Invocation {
            request: RequestSpec {
                method,
                path: text(request.get("path"), "path")?,
                headers,
                body: request.get("body").map(|b| text(Some(b), "body")).transpose()?,
            },
            response: ResponseSpec {
                status,
                headers: expected_headers,
                body: response.get("body").map(|b| text(Some(b), "body")).transpose()?.unwrap_or_default(),
            },
        })
    }

    async fn run(&self, client: &reqwest::Client, base: &str, ports: &HashMap<u16, u16>) -> Result<()> {
        let mut request = client.request(self.request.method.clone(), format!("{base}{}", self.request.path));
        for (name, value) in &self.request.headers {
            let value = render(value, |key, value| match key {
                "port" => port(ports, value),
                other => bail!("unknown template key {other:?} in a request header"),
            })?;
            request = request.header(name, value);
        }
        if let Some(body) = &self.request.body {
            request = request.body(body.clone());
        }
        let response = tokio::time::timeout(REQUEST_TIMEOUT, request.send())
            .await
            .context("no answer in time")?
            .context("the request failed")?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(name, value)| (name.as_str().to_owned(), value.to_str().unwrap_or("<non-utf8>").to_owned()))
            .collect();
        let body = tokio::time::timeout(REQUEST_TIMEOUT, response.bytes()).await.context("no body in time")??.to_vec();
        check_response(&self.response, &Actual { status, headers, body })
    }
}

/// The suite runner's assertion: status, then body, then the exact header set.
fn check_response(expected: &ResponseSpec, actual: &Actual) -> Result<()> {
    let body = String::from_utf8(actual.body.clone()).unwrap_or_else(|_| "<invalid utf-8>".to_owned());
    ensure!(actual.status == expected.status, "status {} != expected {}; body: {body}", actual.status, expected.status);
    ensure!(body == expected.body, "body != expected body\n  actual:   {body:?}\n  expected: {:?}", expected.body);
    let mut headers: HashMap<String, String> =
        actual.headers.iter().map(|(name, value)| (name.to_lowercase(), value.to_lowercase())).collect();
    for header in &expected.headers {
        let Some(value) = headers.remove(&header.name.to_lowercase()) else {
            ensure!(
                header.optional,
                "expected header {:?} not found in the response; its headers: {:?}",
                header.name,
                actual.headers
            );
            continue;
        };
        if let Some(expected_value) = &header.value {
            ensure!(
                value == expected_value.to_lowercase(),
                "header {:?} is {value:?}, expected {:?}",
                header.name,
                expected_value.to_lowercase()
            );
        }
    }
    ensure!(headers.is_empty(), "unexpected headers: {headers:?}");
    Ok(())
}

/// Replaces every `%{key=value}` in `text` with `replace(key, value)`.
fn render(text: &str, mut replace: impl FnMut(&str, &str) -> Result<String>) -> Result<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("%{") {
        out.push_str(&rest[..start]);
        let inner = &rest[start + 2..];
        let end = inner.find('}').with_context(|| format!("unclosed template in {text:?}"))?;
        let (key, value) = inner[..end]
            .split_once('=')
            .with_context(|| format!("template {:?} is not of the form KEY=VALUE", &inner[..end]))?;
        out.push_str(&replace(key.trim(), value.trim())?);
        rest = &inner[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The host port serving guest port `guest`.
fn port(ports: &HashMap<u16, u16>, guest: &str) -> Result<String> {
    let guest: u16 = guest.parse().with_context(|| format!("{guest:?} is not a port"))?;
    let port = ports.get(&guest).with_context(|| format!("no service listens on port {guest} in this case"))?;
    Ok(port.to_string())
}

/// The built component of `tests/conformance/components/<name>`.
///
/// Looked for under `CARGO_TARGET_DIR` when set (at build or run time), under
/// every directory above the test executable (which lives in the target
/// directory), and under the workspace's `target/`.
fn component_wasm(name: &str) -> Result<PathBuf> {
    let file = format!("conformance_{}.wasm", name.replace('-', "_"));
    let mut target_dirs: Vec<PathBuf> = Vec::new();
    target_dirs.extend(std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from));
    target_dirs.extend(option_env!("CARGO_TARGET_DIR").map(PathBuf::from));
    if let Ok(exe) = std::env::current_exe() {
        target_dirs.extend(exe.ancestors().skip(1).map(Path::to_path_buf));
    }
    target_dirs.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target_dirs
        .iter()
        .map(|dir| dir.join("wasm32-wasip2/release").join(&file))
        .find(|path| path.is_file())
        .with_context(|| {
            format!("the conformance component {file} is not built; build the components with `{BUILD_COMMAND}`")
        })
}

/// Fails early, with the build command, if a component is missing.
pub fn require_components() {
    for name in ["outbound-redis", "variables", "request-shape"] {
        if let Err(e) = component_wasm(name) {
            panic!("{e:#}");
        }
    }
}

/// A private directory for one run of a case; removed on drop.
struct WorkDir {
    path: PathBuf,
}

impl WorkDir {
    fn new(case: &str) -> Result<WorkDir> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("unread-conformance-{}-{n}-{case}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).with_context(|| format!("cannot create {}", path.display()))?;
        Ok(WorkDir { path })
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A redis-server of the case's own, on a free port, reachable as
/// `localhost` over IPv4 (and IPv6 where the machine has it); killed on drop.
struct RedisServer {
    child: Child,
    port: u16,
}

impl RedisServer {
    fn start() -> Result<RedisServer> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let child = Command::new("redis-server")
            // `-::1`: IPv6 loopback if available, without failing where it is not.
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1 -::1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .context("cannot start redis-server (is it installed?)")?;
        let server = RedisServer { child, port };
        for _ in 0..500 {
            let ready = redis::Client::open(format!("redis://127.0.0.1:{port}"))
                .and_then(|client| client.get_connection())
                .and_then(|mut connection| redis::cmd("PING").query::<String>(&mut connection));
            if ready.is_ok() {
                return Ok(server);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        bail!("redis-server did not start on port {port}")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `value` as a JSON object with only `allowed` keys.
fn object<'a>(value: &'a Value, what: &str, allowed: &[&str]) -> Result<&'a serde_json::Map<String, Value>> {
    let map = value.as_object().with_context(|| format!("{what} is not an object"))?;
    if let Some(unknown) = map.keys().find(|key| !allowed.contains(&key.as_str())) {
        bail!("{what} has an unknown field {unknown:?}");
    }
    Ok(map)
}

/// A list, empty when absent.
fn list<'a>(value: Option<&'a Value>, what: &str) -> Result<&'a [Value]> {
    match value {
        None => Ok(&[]),
        Some(value) => value.as_array().map(Vec::as_slice).with_context(|| format!("{what} is not a list")),
    }
}

fn text(value: Option<&Value>, what: &str) -> Result<String> {
    value.and_then(Value::as_str).map(str::to_owned).with_context(|| format!("{what} is missing or not a string"))
}
