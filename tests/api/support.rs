//! Test fixtures: a private redis-server per test, the host serving the
//! composed components from `target/unread/`, and a small API client.

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use unread_host::{HostOptions, InstanceMode, RedisStats, RunningHost};

/// At least 32 bytes: unread refuses shorter HS256 keys.
pub const JWT_SECRET: &str = "test-jwt-secret-of-at-least-32-bytes";
/// The message store's token (touch, recall, join, leave).
pub const SERVICE_TOKEN: &str = "test-service-token";
/// The operator's token (reconcile, delete-conversation, clear-category).
pub const ADMIN_TOKEN: &str = "test-admin-token";

/// The password of the tests' redis-servers: production Redis has one.
pub const REDIS_PASSWORD: &str = "test-redis-password";

/// The cache-only data set's record (docs/layout.md).
pub const DATASET_KEY: &str = "un:v2:dataset";

/// A redis-server of this test's own, on a free port, with a password;
/// killed on drop.
pub struct RedisServer {
    child: std::sync::Mutex<Option<Child>>,
    /// The port it listens on (kept across restarts).
    pub port: u16,
    password: String,
    /// A Redis Cluster node (see [`RedisCluster`]).
    cluster: bool,
    /// On the node `redis_url` names: the ports of every node of its
    /// cluster, so that looking at what the app stored sees all of it.
    peers: std::sync::Mutex<Vec<u16>>,
}

impl RedisServer {
    /// Starts an empty server on a free port.
    pub fn start() -> Self {
        RedisServer::with_password(REDIS_PASSWORD)
    }

    /// Starts an empty server on a free port that takes `password`. A port
    /// another test's server took meanwhile is given up for another.
    pub fn with_password(password: &str) -> Self {
        RedisServer::new(password, false)
    }

    fn new(password: &str, cluster: bool) -> Self {
        for _ in 0..20 {
            let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            let password = password.to_string();
            let peers = std::sync::Mutex::new(Vec::new());
            let server = RedisServer { child: std::sync::Mutex::new(None), port, password, cluster, peers };
            if server.started() {
                return server;
            }
        }
        panic!("redis-server did not start on any of 20 free ports");
    }

    /// Starts (again) on the same port, empty.
    pub fn restart(&self) {
        assert!(self.started(), "redis-server did not start on port {}", self.port);
    }

    /// Saves what the server holds, kills it and starts it again on the same
    /// port from the saved file, as a restart with persistence does: a new
    /// process, whose keys hash with a new seed.
    pub fn restart_keeping_data(&self) {
        self.stop_keeping_data();
        self.start_keeping_data();
    }

    /// The first half of [`RedisServer::restart_keeping_data`]: saves what
    /// the server holds and kills it.
    pub fn stop_keeping_data(&self) {
        let _: () = self.command(&["SAVE"]);
        self.kill();
    }

    /// The second half of [`RedisServer::restart_keeping_data`].
    pub fn start_keeping_data(&self) {
        assert!(self.start_process(false), "redis-server did not start again on port {}", self.port);
    }

    /// Starts a server on the port, empty; whether the one answering there
    /// is it (by its process id), and not another test's that took the port.
    fn started(&self) -> bool {
        self.start_process(true)
    }

    /// [`RedisServer::started`], loading what its directory holds unless
    /// `empty`.
    fn start_process(&self, empty: bool) -> bool {
        let port = self.port.to_string();
        // A directory of its own, emptied: a replica's full sync writes an
        // RDB file there, which a server started in the same place would load.
        let dir = self.dir();
        if empty {
            let _ = std::fs::remove_dir_all(&dir);
        }
        std::fs::create_dir_all(&dir).unwrap();
        let child = Command::new("redis-server")
            .args(["--port", &port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--dir", dir.to_str().unwrap()])
            .args(["--requirepass", &self.password, "--masterauth", &self.password])
            .args(self.cluster_args())
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server must be installed");
        let pid = child.id();
        *self.child.lock().unwrap() = Some(child);
        for _ in 0..200 {
            // Bounded: what answers on the port may not even speak Redis.
            let timeout = Duration::from_millis(500);
            let connection = redis::Client::open(self.url()).and_then(|c| c.get_connection_with_timeout(timeout));
            if let Ok(mut connection) = connection {
                let _ = connection.set_read_timeout(Some(timeout));
                let info: String = redis::cmd("INFO").arg("server").query(&mut connection).unwrap_or_default();
                let serving = info.lines().find_map(|l| l.strip_prefix("process_id:")).map(str::trim);
                if serving == Some(pid.to_string().as_str()) {
                    return true;
                }
            }
            let exited = self.child.lock().unwrap().as_mut().is_some_and(|c| c.try_wait().ok().flatten().is_some());
            if exited {
                self.kill();
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
        false
    }

    /// The server's working directory.
    fn dir(&self) -> PathBuf {
        std::env::temp_dir().join(format!("unread-redis-{}-{}", std::process::id(), self.port))
    }

    /// A cluster node's options: its node file (in its emptied directory);
    /// a short node timeout so that a failover happens within a test.
    fn cluster_args(&self) -> Vec<&'static str> {
        if !self.cluster {
            return Vec::new();
        }
        vec!["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000"]
    }

    /// Runs a command on this server.
    pub fn command<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let mut command = redis::cmd(args[0]);
        for arg in &args[1..] {
            command.arg(*arg);
        }
        command.query(&mut self.connection().unwrap()).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    /// How many `code` errors (`MOVED`, `ASK`, ...) the server answered.
    pub fn errors(&self, code: &str) -> u64 {
        let info: String = self.command(&["INFO", "errorstats"]);
        let prefix = format!("errorstat_{code}:count=");
        info.lines().find_map(|l| l.strip_prefix(&prefix)).map_or(0, |n| n.trim().parse().unwrap())
    }

    /// `kill -9`: everything it held is gone.
    pub fn kill(&self) {
        if let Some(mut child) = self.child.lock().unwrap().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Makes this server a replica of `primary` and waits until it has
    /// synced and the primary counts it online.
    pub fn replicate(&self, primary: &RedisServer) {
        let _: () = self.command(&["REPLICAOF", "127.0.0.1", &primary.port.to_string()]);
        for _ in 0..500 {
            let info: String = self.command(&["INFO", "replication"]);
            let seen: String = primary.command(&["INFO", "replication"]);
            let online = seen.lines().any(|l| l.contains(&format!("port={},state=online", self.port)));
            if info.contains("master_link_status:up") && info.contains("master_sync_in_progress:0") && online {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the replica did not sync");
    }

    /// `SIGSTOP` (`resume`: `SIGCONT`): the server keeps its connections
    /// but answers nothing, as a hung server or a dropped network does.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Undoes [`RedisServer::pause`].
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.lock().unwrap().as_ref().expect("running").id();
        assert!(Command::new("kill").args([signal, &pid.to_string()]).status().unwrap().success());
    }

    /// The address the app is configured with (`redis_url`), password included.
    pub fn url(&self) -> String {
        format!("redis://:{}@127.0.0.1:{}", self.password, self.port)
    }

    /// The server as Spin's allowed hosts take it (`redis_host`).
    pub fn host(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A direct connection, to look at or corrupt what the app stored.
    pub fn connection(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(self.url())?.get_connection()
    }

    /// Every key of users' state, sorted. The cache-only data set's record
    /// (`un:v2:dataset`, written on the app's first connection) is no user's
    /// state and is left out; lost.rs tests it.
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = Vec::new();
        for mut connection in self.primaries() {
            keys.extend(redis::cmd("KEYS").arg("*").query::<Vec<String>>(&mut connection).unwrap());
        }
        keys.retain(|key| key != DATASET_KEY);
        keys.sort();
        keys
    }

    /// A field of a hash the app stored, from whichever primary holds it.
    pub fn stored(&self, key: &str, field: &str) -> Option<String> {
        self.primaries().into_iter().find_map(|mut connection| {
            redis::cmd("HGET").arg(key).arg(field).query::<Option<String>>(&mut connection).ok().flatten()
        })
    }

    /// The members of a sorted set the app stored, lowest score first, from
    /// whichever primary holds it (empty if none does).
    pub fn sorted_set(&self, key: &str) -> Vec<(String, f64)> {
        self.primaries()
            .into_iter()
            .find_map(|mut connection| {
                let found: Vec<(String, f64)> =
                    redis::cmd("ZRANGE").arg(key).arg(0).arg(-1).arg("WITHSCORES").query(&mut connection).ok()?;
                (!found.is_empty()).then_some(found)
            })
            .unwrap_or_default()
    }

    /// Deletes every key whose name begins with `prefix`, on every primary.
    pub fn delete_keys(&self, prefix: &str) {
        for mut connection in self.primaries() {
            let keys: Vec<String> = redis::cmd("KEYS").arg(format!("{prefix}*")).query(&mut connection).unwrap();
            for key in keys {
                let _: u64 = redis::cmd("DEL").arg(key).query(&mut connection).unwrap();
            }
        }
    }

    /// Scripts run so far (`EVALSHA` and `EVAL` calls), on every primary.
    pub fn scripts_run(&self) -> u64 {
        self.script_stats().0
    }

    /// Scripts run so far and the Redis CPU they took (usec), summed over
    /// every primary, from `INFO commandstats`.
    pub fn script_stats(&self) -> (u64, u64) {
        self.command_stats()
            .into_iter()
            .filter(|(name, _)| name == "evalsha" || name == "eval")
            .fold((0, 0), |total, (_, (calls, usec))| (total.0 + calls, total.1 + usec))
    }

    /// Every command run so far, by name as `INFO commandstats` names it
    /// (`config|set`), with its calls and the Redis CPU it took (usec),
    /// summed over every primary. Commands run inside scripts count, and so
    /// do the scripts themselves.
    pub fn command_stats(&self) -> std::collections::BTreeMap<String, (u64, u64)> {
        let mut totals: std::collections::BTreeMap<String, (u64, u64)> = std::collections::BTreeMap::new();
        for mut connection in self.primaries() {
            let info: String = redis::cmd("INFO").arg("commandstats").query(&mut connection).unwrap();
            for line in info.lines().filter_map(|line| line.strip_prefix("cmdstat_")) {
                let Some((name, stats)) = line.split_once(':') else { continue };
                let field = |f: &str| -> u64 {
                    stats.split(',').find_map(|kv| kv.strip_prefix(f)).and_then(|v| v.parse().ok()).unwrap_or(0)
                };
                let total = totals.entry(name.to_string()).or_default();
                total.0 += field("calls=");
                total.1 += field("usec=");
            }
        }
        totals
    }

    /// Redis commands run so far, inside scripts included (every `cmdstat_`
    /// line of `INFO commandstats` but the scripts' own calls and `INFO`).
    pub fn commands_run(&self) -> u64 {
        self.commands_by_name().values().sum()
    }

    /// Commands that write data run so far (those Redis flags `write`; not
    /// `PUBLISH`), on every primary.
    pub fn writes_run(&self) -> u64 {
        let mut connection = self.primaries().remove(0);
        self.commands_by_name()
            .into_iter()
            .filter(|(name, _)| {
                let info: redis::Value = redis::cmd("COMMAND").arg("INFO").arg(name).query(&mut connection).unwrap();
                let redis::Value::Array(mut commands) = info else { return false };
                let Some(redis::Value::Array(command)) = commands.pop() else { return false };
                let Some(redis::Value::Array(flags)) = command.get(2) else { return false };
                flags.iter().any(|flag| matches!(flag, redis::Value::SimpleString(f) if f == "write"))
            })
            .map(|(_, count)| count)
            .sum()
    }

    /// How many times each command ran so far (on a cluster, summed over
    /// every primary), from `INFO commandstats`: what scripts ran inside
    /// them, not the scripts themselves, nor the test's own INFO and the
    /// cluster client's bookkeeping.
    pub fn commands_by_name(&self) -> std::collections::BTreeMap<String, u64> {
        self.command_stats()
            .into_iter()
            .filter(|(name, _)| {
                let base = name.split('|').next().unwrap_or(name);
                !["info", "evalsha", "eval", "cluster", "asking", "command"].contains(&base)
            })
            .map(|(name, (calls, _))| (name, calls))
            .collect()
    }

    /// Empties the server (on a cluster, every primary), as a Redis that
    /// lost its data would be.
    pub fn flush_all(&self) {
        for mut connection in self.primaries() {
            let _: () = redis::cmd("FLUSHALL").query(&mut connection).unwrap();
        }
    }

    /// Connections to the servers that hold data: this one, or on a cluster
    /// every primary.
    pub fn primaries(&self) -> Vec<redis::Connection> {
        let peers = self.peers.lock().unwrap().clone();
        if peers.is_empty() {
            return vec![self.connection().unwrap()];
        }
        peers
            .into_iter()
            .filter_map(|port| {
                let url = format!("redis://:{}@127.0.0.1:{port}", self.password);
                let mut connection = redis::Client::open(url).ok()?.get_connection().ok()?;
                let role: String = redis::cmd("INFO").arg("replication").query(&mut connection).ok()?;
                role.contains("role:master").then_some(connection)
            })
            .collect()
    }
}

/// A Redis Cluster of this test's own on loopback: three primaries, each
/// with a replica, every node with the tests' password.
pub struct RedisCluster {
    /// The nodes; the app's `redis_url` names the first.
    pub nodes: Vec<std::sync::Arc<RedisServer>>,
}

impl RedisCluster {
    /// Starts six nodes and makes them a cluster (`redis-cli --cluster
    /// create`), then waits until every node sees every slot served and
    /// every replica in sync.
    pub fn start() -> Self {
        let nodes: Vec<std::sync::Arc<RedisServer>> =
            (0..6).map(|_| std::sync::Arc::new(RedisServer::new(REDIS_PASSWORD, true))).collect();
        let addresses: Vec<String> = nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)).collect();
        let created = Command::new("redis-cli")
            .args(["-a", REDIS_PASSWORD, "--no-auth-warning", "--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .output()
            .expect("redis-cli must be installed");
        assert!(
            created.status.success(),
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&created.stdout),
            String::from_utf8_lossy(&created.stderr)
        );
        *nodes[0].peers.lock().unwrap() = nodes.iter().map(|node| node.port).collect();
        let cluster = RedisCluster { nodes };
        cluster.wait_until_settled();
        cluster
    }

    /// Waits until every node says the cluster is ok, knows all six nodes,
    /// every replica's link to its primary is up, and every primary counts
    /// its replica online.
    pub fn wait_until_settled(&self) {
        for _ in 0..600 {
            let settled = self.nodes.iter().all(|node| {
                let Ok(mut connection) = node.connection() else { return false };
                let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut connection).unwrap_or_default();
                let nodes: String = redis::cmd("CLUSTER").arg("NODES").query(&mut connection).unwrap_or_default();
                let replication: String =
                    redis::cmd("INFO").arg("replication").query(&mut connection).unwrap_or_default();
                info.contains("cluster_state:ok")
                    && nodes.lines().filter(|l| !l.contains("fail")).count() == 6
                    && !nodes.contains("handshake")
                    // A primary counts its replica online (what a write that
                    // waits for replicas waits for), a replica its link up.
                    && ((replication.contains("role:master") && replication.contains("state=online"))
                        || replication.contains("master_link_status:up"))
            });
            if settled {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the cluster did not settle");
    }

    /// The primaries, by the slots they serve now.
    pub fn primaries(&self) -> Vec<&std::sync::Arc<RedisServer>> {
        let nodes: String = self.nodes[0].command(&["CLUSTER", "NODES"]);
        self.nodes
            .iter()
            .filter(|node| {
                nodes.lines().any(|line| {
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    fields[1].starts_with(&format!("127.0.0.1:{}@", node.port))
                        && fields[2].contains("master")
                        && fields.len() > 8
                })
            })
            .collect()
    }

    /// The primary that serves `key`'s hash slot now.
    pub fn primary_of(&self, key: &str) -> &std::sync::Arc<RedisServer> {
        let slot: u16 = self.nodes[0].command(&["CLUSTER", "KEYSLOT", key]);
        let nodes: String = self.nodes[0].command(&["CLUSTER", "NODES"]);
        let serves = |line: &str| {
            line.split_whitespace().skip(8).any(|range| {
                let (low, high) = range.split_once('-').unwrap_or((range, range));
                matches!((low.parse::<u16>(), high.parse::<u16>()), (Ok(low), Ok(high)) if (low..=high).contains(&slot))
            })
        };
        let line = nodes.lines().find(|line| line.contains("master") && serves(line)).expect("a primary serves it");
        let address = line.split_whitespace().nth(1).unwrap();
        self.nodes.iter().find(|node| address.starts_with(&format!("127.0.0.1:{}@", node.port))).unwrap()
    }

    /// A node's cluster id.
    pub fn id(&self, node: &RedisServer) -> String {
        node.command(&["CLUSTER", "MYID"])
    }

    /// Moves `slots` slots from one primary to another while the app runs
    /// (`redis-cli --cluster reshard`).
    pub fn reshard(&self, from: &RedisServer, to: &RedisServer, slots: u32) {
        let status = Command::new("redis-cli")
            .args(["-a", REDIS_PASSWORD, "--no-auth-warning", "--cluster", "reshard"])
            .arg(format!("127.0.0.1:{}", self.nodes[0].port))
            .args(["--cluster-from", &self.id(from), "--cluster-to", &self.id(to)])
            .args(["--cluster-slots", &slots.to_string(), "--cluster-yes", "--cluster-pipeline", "10"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "redis-cli --cluster reshard failed");
    }

    /// The replica of `primary`.
    pub fn replica_of(&self, primary: &RedisServer) -> &std::sync::Arc<RedisServer> {
        let id = self.id(primary);
        self.nodes
            .iter()
            .find(|node| {
                let info: String = node.command(&["INFO", "replication"]);
                info.contains("role:slave") && {
                    let nodes: String = node.command(&["CLUSTER", "NODES"]);
                    nodes.lines().any(|l| l.contains("myself") && l.contains(&id))
                }
            })
            .expect("the primary has a replica")
    }

    /// Fails `primary` over to its replica (`CLUSTER FAILOVER` on the
    /// replica: the primary stops taking writes, the replica catches up,
    /// then takes over), and waits until the cluster settles.
    pub fn fail_over(&self, primary: &RedisServer) {
        let replica = self.replica_of(primary);
        let _: () = replica.command(&["CLUSTER", "FAILOVER"]);
        for _ in 0..600 {
            let info: String = replica.command(&["INFO", "replication"]);
            if info.contains("role:master") {
                self.wait_until_settled();
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the failover did not happen");
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(self.dir());
    }
}

/// The app as a client sees it, served by the host against its own Redis.
pub struct App {
    host: Option<RunningHost>,
    /// The app's Redis (on a cluster, the node `redis_url` names).
    pub redis: std::sync::Arc<RedisServer>,
    /// The cluster, when the app runs on one.
    pub cluster: Option<RedisCluster>,
    http: reqwest::Client,
    base: String,
}

/// How an app under test is set up.
pub struct Setup {
    pub instances: InstanceMode,
    pub max_conversations: u32,
    /// The SQL message store; None: cache-only.
    pub sql_url: Option<String>,
    /// More variables, or other values for the ones above.
    pub variables: Vec<(&'static str, String)>,
    /// TCP_NODELAY on the host's accepted connections: not Spin's
    /// behaviour, for the benchmark's comparison only (docs/latency.md).
    pub tcp_nodelay: bool,
    /// Serve only these components (`--component-id`); empty: all.
    pub components: Vec<String>,
    /// Redis Cluster (three primaries, three replicas) instead of one server.
    pub cluster: bool,
    /// Drop what the components print (`spin up --quiet`): for the benchmark.
    pub quiet: bool,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            instances: InstanceMode::spin_default(),
            max_conversations: 100,
            sql_url: None,
            variables: Vec::new(),
            tcp_nodelay: false,
            components: Vec::new(),
            // UNREAD_TEST_REDIS=cluster: every test on a cluster.
            cluster: std::env::var("UNREAD_TEST_REDIS").is_ok_and(|v| v == "cluster"),
            quiet: false,
        }
    }
}

impl Setup {
    /// The default setup on one Redis server, whatever `UNREAD_TEST_REDIS`
    /// says: for a test of one server by design (it kills, restarts or
    /// flushes it, counts its round trips, or uses what a cluster lacks).
    pub fn one_server() -> Self {
        Setup { cluster: false, ..Setup::default() }
    }
}

/// Both ways Spin may run a P3 component.
pub fn modes() -> [InstanceMode; 2] {
    [InstanceMode::PerRequest, InstanceMode::spin_default()]
}

/// An HTTP answer: status, `content-length` header if any, JSON body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub content_length: Option<usize>,
    /// How many body bytes arrived.
    pub length: usize,
    pub body: Value,
    /// Every header, names lowercase, values as text (lossy).
    pub headers: Vec<(String, String)>,
    /// The body as it arrived, as text (lossy).
    pub text: String,
}

impl Answer {
    /// The value of header `name` (lowercase), if any.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// Reads a reqwest response into an answer.
    pub async fn read(response: reqwest::Response) -> Answer {
        let status = response.status().as_u16();
        let content_length = response.headers().get("content-length").and_then(|v| v.to_str().ok()?.parse().ok());
        let headers = response
            .headers()
            .iter()
            .map(|(n, v)| (n.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
            .collect();
        let bytes = response.bytes().await.unwrap();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let body = serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(text.clone()));
        Answer { status, content_length, length: bytes.len(), body, headers, text }
    }
}

impl App {
    /// Starts Redis and the host with the default setup.
    pub async fn start() -> Self {
        App::with(Setup::default()).await
    }

    /// Starts Redis and the host with `setup`.
    pub async fn with(setup: Setup) -> Self {
        let cluster = setup.cluster.then(RedisCluster::start);
        let redis = match &cluster {
            Some(cluster) => cluster.nodes[0].clone(),
            None => std::sync::Arc::new(RedisServer::start()),
        };
        let mut variables = HashMap::from([
            ("redis_url".to_string(), redis.url()),
            ("redis_host".to_string(), redis.host()),
            ("redis_cluster".to_string(), setup.cluster.to_string()),
            (
                "redis_cluster_hosts".to_string(),
                if setup.cluster { "redis://127.0.0.1:*".into() } else { String::new() },
            ),
            ("jwt_secret".to_string(), JWT_SECRET.to_string()),
            ("service_token".to_string(), SERVICE_TOKEN.to_string()),
            ("admin_token".to_string(), ADMIN_TOKEN.to_string()),
            ("max_conversations".to_string(), setup.max_conversations.to_string()),
            ("sql_host".to_string(), setup.sql_url.as_deref().map(server_of).unwrap_or_default()),
            ("sql_url".to_string(), setup.sql_url.unwrap_or_default()),
        ]);
        variables.extend(setup.variables.into_iter().map(|(name, value)| (name.to_string(), value)));
        let host = RunningHost::start(HostOptions {
            manifest: manifest(),
            listen: "127.0.0.1:0".parse().unwrap(),
            instances: setup.instances,
            variables,
            tcp_nodelay: setup.tcp_nodelay,
            components: setup.components,
            quiet: setup.quiet,
        })
        .await
        .expect("the host starts");
        let base = format!("http://{}", host.local_addr());
        App { host: Some(host), redis, cluster, http: reqwest::Client::new(), base }
    }

    /// The server that holds `key`: the app's Redis, or on a cluster the
    /// primary serving its slot now.
    pub fn holder(&self, key: &str) -> &std::sync::Arc<RedisServer> {
        self.cluster.as_ref().map_or(&self.redis, |cluster| cluster.primary_of(key))
    }

    /// Where the host serves: `http://127.0.0.1:<port>`.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Redis calls made so far through the host.
    pub fn redis_stats(&self) -> RedisStats {
        self.host.as_ref().unwrap().redis_stats()
    }

    /// `POST /v1/touch` with the service token.
    pub async fn touch(&self, body: Value) -> Answer {
        self.send("POST", "/v1/touch", Some(SERVICE_TOKEN.to_string()), Some(body.to_string())).await
    }

    /// `POST /v1/mark-read` as `user` of `tenant`.
    pub async fn mark_read(&self, tenant: &str, user: &str, conversation: &str, seq: u64) -> Answer {
        let body = json!({"conversation": conversation, "seq": seq}).to_string();
        self.send("POST", "/v1/mark-read", Some(jwt(tenant, user)), Some(body)).await
    }

    /// `GET /v1/conversations?<query>` as `user` of `tenant`.
    pub async fn list(&self, tenant: &str, user: &str, query: &str) -> Answer {
        self.send("GET", &format!("/v1/conversations?{query}"), Some(jwt(tenant, user)), None).await
    }

    /// `GET /v1/badge` as `user` of `tenant`.
    pub async fn badge(&self, tenant: &str, user: &str) -> Answer {
        self.send("GET", "/v1/badge", Some(jwt(tenant, user)), None).await
    }

    /// `POST /v1/admin/reconcile` with the admin token.
    pub async fn reconcile(&self, body: Value) -> Answer {
        self.send("POST", "/v1/admin/reconcile", Some(ADMIN_TOKEN.to_string()), Some(body.to_string())).await
    }

    /// Reconciles every user of `tenant`, following cursors; the summed report.
    pub async fn reconcile_all(&self, tenant: &str) -> Value {
        let mut total = json!({"checked": 0, "drifted": 0, "fixed": 0, "max_drift": 0});
        let mut cursor = Value::Null;
        loop {
            let answer = self.reconcile(json!({"tenant": tenant, "cursor": cursor})).await;
            assert_eq!(answer.status, 200, "{:?}", answer.body);
            for field in ["checked", "drifted", "fixed"] {
                total[field] = json!(total[field].as_u64().unwrap() + answer.body[field].as_u64().unwrap());
            }
            total["max_drift"] =
                json!(total["max_drift"].as_u64().unwrap().max(answer.body["max_drift"].as_u64().unwrap()));
            cursor = answer.body["next_cursor"].clone();
            if cursor.is_null() {
                return total;
            }
        }
    }

    /// `POST /v1/admin/conversations/{id}/delete` with the admin token.
    pub async fn delete_conversation(&self, tenant: &str, conversation: &str, members: &[&str]) -> Answer {
        let body = json!({"tenant": tenant, "members": members}).to_string();
        self.send(
            "POST",
            &format!("/v1/admin/conversations/{conversation}/delete"),
            Some(ADMIN_TOKEN.to_string()),
            Some(body),
        )
        .await
    }

    /// `POST /v1/conversations/{id}/{action}` as `user` of `tenant`.
    pub async fn flag(&self, tenant: &str, user: &str, conversation: &str, action: &str, body: Value) -> Answer {
        let path = format!("/v1/conversations/{conversation}/{action}");
        self.send("POST", &path, Some(jwt(tenant, user)), Some(body.to_string())).await
    }

    /// A service call: `POST path` with `body` and the token its route
    /// takes (the admin token on `/v1/admin/...`, else the service token).
    pub async fn service(&self, path: &str, body: Value) -> Answer {
        let token = if path.starts_with("/v1/admin/") { ADMIN_TOKEN } else { SERVICE_TOKEN };
        self.send("POST", path, Some(token.to_string()), Some(body.to_string())).await
    }

    /// `POST /v1/recall` of message `seq` for `members`, with a replacement preview if given.
    pub async fn recall(
        &self,
        tenant: &str,
        conversation: &str,
        seq: u64,
        members: &[&str],
        preview: Option<Value>,
    ) -> Answer {
        let mut body = json!({"tenant": tenant, "conversation": conversation, "seq": seq, "members": members});
        if let Some(preview) = preview {
            body["preview"] = preview;
        }
        self.service("/v1/recall", body).await
    }

    /// `POST /v1/badges` with the service token: the badges of `users`.
    pub async fn badges(&self, tenant: &str, users: &[&str]) -> Answer {
        self.service("/v1/badges", json!({"tenant": tenant, "users": users})).await
    }

    /// `POST /v1/join`: `members` joined after message `seq`.
    pub async fn join(&self, tenant: &str, conversation: &str, seq: u64, members: &[&str]) -> Answer {
        self.service(
            "/v1/join",
            json!({"tenant": tenant, "conversation": conversation, "seq": seq, "members": members}),
        )
        .await
    }

    /// `POST /v1/leave`: `members` left.
    pub async fn leave(&self, tenant: &str, conversation: &str, members: &[&str]) -> Answer {
        self.service("/v1/leave", json!({"tenant": tenant, "conversation": conversation, "members": members})).await
    }

    /// The row of `conversation` in the user's whole list, if it is listed.
    pub async fn row(&self, tenant: &str, user: &str, conversation: &str) -> Option<Value> {
        self.whole_list(tenant, user, 100).await.into_iter().find(|r| r["id"] == conversation)
    }

    /// Every conversation of the user, following cursors.
    pub async fn whole_list(&self, tenant: &str, user: &str, page_size: u32) -> Vec<Value> {
        let mut rows = Vec::new();
        let mut query = format!("limit={page_size}");
        loop {
            let page = self.list(tenant, user, &query).await;
            assert_eq!(page.status, 200, "{:?}", page.body);
            rows.extend(page.body["conversations"].as_array().unwrap().iter().cloned());
            match page.body["next_cursor"].as_str() {
                Some(cursor) => query = format!("limit={page_size}&cursor={cursor}"),
                None => return rows,
            }
        }
    }

    /// Any request; `token` goes in `Authorization: Bearer`.
    pub async fn send(&self, method: &str, path: &str, token: Option<String>, body: Option<String>) -> Answer {
        self.send_bytes(method, path, token, body.map(String::into_bytes)).await
    }

    /// Any request with a raw body.
    pub async fn send_bytes(&self, method: &str, path: &str, token: Option<String>, body: Option<Vec<u8>>) -> Answer {
        self.send_with_headers(method, path, token, body, &[]).await
    }

    /// Any request with a raw body and extra headers.
    pub async fn send_with_headers(
        &self,
        method: &str,
        path: &str,
        token: Option<String>,
        body: Option<Vec<u8>>,
        headers: &[(&str, &str)],
    ) -> Answer {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(body) = body {
            request = request.header("content-type", "application/json").body(body);
        }
        Answer::read(request.send().await.expect("the host answers")).await
    }
}

impl Drop for App {
    fn drop(&mut self) {
        // Shut the host down before its Redis goes away.
        drop(self.host.take());
    }
}

/// `scheme://host:port` of a connection URL: what allowed_outbound_hosts takes.
fn server_of(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    format!("{scheme}://{}", rest.split('/').next().unwrap())
}

fn manifest() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../spin.toml");
    let built = manifest.parent().unwrap().join("target/unread/touch.wasm");
    assert!(built.exists(), "components not built: run `cargo run --release -p unread-build` first");
    manifest
}

/// An HS256 JWT for `user` of `tenant`, valid for an hour.
pub fn jwt(tenant: &str, user: &str) -> String {
    let exp = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() + 3600;
    signed_jwt(r#"{"alg":"HS256","typ":"JWT"}"#, &json!({"sub": user, "tid": tenant, "exp": exp}), JWT_SECRET)
}

/// A JWT with any header and claims, signed with `secret`.
pub fn signed_jwt(header: &str, claims: &Value, secret: &str) -> String {
    let head = format!("{}.{}", URL_SAFE_NO_PAD.encode(header), URL_SAFE_NO_PAD.encode(claims.to_string()));
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(head.as_bytes());
    format!("{head}.{}", URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()))
}

/// A touch body with the usual fields.
pub fn message(tenant: &str, conversation: &str, seq: u64, ts: u64, sender: &str, members: &[&str]) -> Value {
    json!({
        "tenant": tenant, "conversation": conversation, "seq": seq, "ts": ts, "sender": sender,
        "members": members, "preview": {"text": format!("message {seq}"), "type": "text"}, "category": "chat",
    })
}

/// The conversation ids of list rows, in order.
pub fn ids(rows: &[Value]) -> Vec<&str> {
    rows.iter().map(|r| r["id"].as_str().unwrap()).collect()
}

/// The user's unread per conversation id, from the whole list.
pub async fn unread_by_conversation(app: &App, tenant: &str, user: &str) -> HashMap<String, u64> {
    app.whole_list(tenant, user, 100)
        .await
        .iter()
        .map(|row| (row["id"].as_str().unwrap().to_string(), row["unread"].as_u64().unwrap()))
        .collect()
}

/// Checks `badge.total == Σ unread over the list == Σ categories`.
pub async fn assert_badge_consistent(app: &App, tenant: &str, user: &str) -> u64 {
    let rows = app.whole_list(tenant, user, 100).await;
    let list_sum: u64 = rows.iter().map(|r| r["unread"].as_u64().unwrap()).sum();
    let badge = app.badge(tenant, user).await.body;
    let total = badge["total"].as_u64().unwrap();
    let by_category: u64 = badge["categories"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!((total, by_category), (list_sum, list_sum), "badge {badge} vs list {rows:?}");
    total
}

// Helpers of hostile.rs and isolation.rs: what Redis holds, key by key, and
// the shape of a refusal.

/// One stored key: its type, its value read by type, its `DUMP`, and when
/// it expires.
#[derive(Clone, Debug)]
pub struct StoredKey {
    pub kind: String,
    pub value: Value,
    pub dump: Vec<u8>,
    /// When the key expires (Unix ms, from its `PTTL`), if it does: a
    /// moment, not a count-down, so two looks at an untouched key agree.
    pub expires_at: Option<u128>,
}

/// Two looks at one key agree: same type, value and `DUMP`, and the same
/// expiry (to the second: the looks were not taken at the same instant).
impl PartialEq for StoredKey {
    fn eq(&self, other: &Self) -> bool {
        let expiry = match (self.expires_at, other.expires_at) {
            (None, None) => true,
            (Some(a), Some(b)) => a.abs_diff(b) < 1_000,
            _ => false,
        };
        self.kind == other.kind && self.value == other.value && self.dump == other.dump && expiry
    }
}

/// The beginning of every key of one user's state.
fn user_prefix(tenant: &str, user: &str) -> String {
    format!("un:v2:{{{}:{}}}:", escaped(tenant), escaped(user))
}

/// Every key with what it holds, by name.
pub type KeySpace = std::collections::BTreeMap<String, StoredKey>;

impl RedisServer {
    /// Every key of users' state (as [`RedisServer::keys`]) with its type,
    /// full value and `DUMP`.
    pub fn key_space(&self) -> KeySpace {
        self.key_space_matching("*")
    }

    /// The keys of one user (`un:v2:{T:U}:*`) with what they hold.
    pub fn user_key_space(&self, tenant: &str, user: &str) -> KeySpace {
        // Escaped, identifiers hold no glob character.
        self.key_space_matching(&format!("{}*", user_prefix(tenant, user)))
    }

    /// What Redis does to a user idle past the keys' time to live: every
    /// key of the user goes (tombstones of conversations left with them).
    pub fn expire_user(&self, tenant: &str, user: &str) {
        self.delete_keys(&user_prefix(tenant, user));
    }

    fn key_space_matching(&self, pattern: &str) -> KeySpace {
        let mut space = KeySpace::new();
        for mut connection in self.primaries() {
            self.key_space_on(&mut connection, pattern, &mut space);
        }
        space
    }

    fn key_space_on(&self, connection: &mut redis::Connection, pattern: &str, space: &mut KeySpace) {
        let keys: Vec<String> = redis::cmd("KEYS").arg(pattern).query(connection).unwrap();
        for key in keys.into_iter().filter(|key| key != DATASET_KEY) {
            let kind: String = redis::cmd("TYPE").arg(&key).query(connection).unwrap();
            let text = |bytes: Vec<u8>| Value::String(String::from_utf8_lossy(&bytes).into_owned());
            let value = match kind.as_str() {
                "string" => text(redis::cmd("GET").arg(&key).query(connection).unwrap()),
                "hash" => {
                    let pairs: Vec<(Vec<u8>, Vec<u8>)> = redis::cmd("HGETALL").arg(&key).query(connection).unwrap();
                    let mut pairs: Vec<Value> = pairs.into_iter().map(|(f, v)| json!([text(f), text(v)])).collect();
                    pairs.sort_by_key(|p| p.to_string());
                    Value::Array(pairs)
                }
                "zset" => {
                    let members: Vec<(Vec<u8>, String)> =
                        redis::cmd("ZRANGE").arg(&key).arg(0).arg(-1).arg("WITHSCORES").query(connection).unwrap();
                    Value::Array(members.into_iter().map(|(m, s)| json!([text(m), s])).collect())
                }
                "list" => {
                    let items: Vec<Vec<u8>> = redis::cmd("LRANGE").arg(&key).arg(0).arg(-1).query(connection).unwrap();
                    Value::Array(items.into_iter().map(text).collect())
                }
                "set" => {
                    let mut items: Vec<String> = redis::cmd("SMEMBERS")
                        .arg(&key)
                        .query::<Vec<Vec<u8>>>(connection)
                        .unwrap()
                        .into_iter()
                        .map(|m| String::from_utf8_lossy(&m).into_owned())
                        .collect();
                    items.sort();
                    json!(items)
                }
                _ => Value::Null, // other types: compared by DUMP alone
            };
            let dump: Vec<u8> = redis::cmd("DUMP").arg(&key).query(connection).unwrap();
            let pttl: i64 = redis::cmd("PTTL").arg(&key).query(connection).unwrap();
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
            let expires_at = u128::try_from(pttl).ok().map(|left| now + left);
            space.insert(key, StoredKey { kind, value, dump, expires_at });
        }
    }
}

/// Panics with the keys added, removed and changed between two snapshots.
pub fn assert_key_space_unchanged(before: &KeySpace, after: &KeySpace, what: &str) {
    if before == after {
        return;
    }
    let added: Vec<_> = after.keys().filter(|k| !before.contains_key(*k)).collect();
    let removed: Vec<_> = before.keys().filter(|k| !after.contains_key(*k)).collect();
    let changed: Vec<String> = before
        .iter()
        .filter_map(|(k, b)| {
            let a = after.get(k)?;
            (a != b).then(|| format!("{k}: {} {} -> {} {}", b.kind, b.value, a.kind, a.value))
        })
        .collect();
    panic!("{what} changed Redis: added {added:?}, removed {removed:?}, changed {changed:#?}");
}

/// Asserts a refusal: `status`, `{"error": {"code": code, "message": non-empty,
/// "request_id": the x-request-id header}}`, and a `Content-Length` equal to
/// the body's length.
pub fn assert_refused(answer: &Answer, status: u16, code: &str, what: &str) {
    assert_eq!(
        (answer.status, answer.body["error"]["code"].as_str()),
        (status, Some(code)),
        "{what}: {:?}",
        answer.body
    );
    assert!(
        answer.body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{what}: no error message in {:?}",
        answer.body
    );
    assert_eq!(answer.body.as_object().map(|o| o.len()), Some(1), "{what}: only `error` at the top: {:?}", answer.body);
    assert_eq!(answer.content_length, Some(answer.length), "{what}: Content-Length must match the body");
    let id = answer.header("x-request-id");
    assert!(id.is_some_and(|id| !id.is_empty()), "{what}: no x-request-id header");
    assert_eq!(answer.body["error"]["request_id"].as_str(), id, "{what}: the body names another request id");
}

impl App {
    /// `host:port` the app listens on, for raw HTTP.
    pub fn address(&self) -> String {
        self.base.trim_start_matches("http://").to_string()
    }
}

/// An identifier as key and channel names carry it: bytes outside
/// `A-Z a-z 0-9 . _ - @ | + # = /` as `%XX`.
pub fn escaped(id: &str) -> String {
    id.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"._-@|+#=/".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A tenant's change events, as a push gateway sees them.
pub struct Events {
    subscription: redis::Connection,
    /// One per node: on a cluster every node passes what it publishes on to
    /// the others, in order, so a marker published on each, once all have
    /// arrived, follows every event published before it.
    publishers: Vec<redis::Connection>,
    channel: String,
}

impl Events {
    /// Subscribes to `unread:events:<tenant>` on the app's Redis, the tenant
    /// escaped as the core escapes it (isolation.rs checks that events of an
    /// escaped tenant arrive here, which holds the two copies together).
    pub fn subscribe(app: &App, tenant: &str) -> Events {
        Events::try_subscribe(app, tenant).expect("subscribed to the tenant's events")
    }

    /// [`Events::subscribe`], or None if Redis cannot be reached.
    pub fn try_subscribe(app: &App, tenant: &str) -> Option<Events> {
        let channel = format!("unread:events:{}", escaped(tenant));
        let mut subscription = app.redis.connection().ok()?;
        redis::cmd("SUBSCRIBE").arg(&channel).exec(&mut subscription).ok()?;
        subscription.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        let publishers = match &app.cluster {
            Some(cluster) => cluster.nodes.iter().map(|node| node.connection().ok()).collect::<Option<Vec<_>>>()?,
            None => vec![app.redis.connection().ok()?],
        };
        let mut events = Events { subscription, publishers, channel };
        // On a cluster, what was published before the subscription may still
        // be on its way from another node: it is not what comes after.
        events.try_take()?;
        Some(events)
    }

    /// Every event published so far: a marker is published after them, and
    /// everything up to it is read (the scripts publish before answering).
    pub fn take(&mut self) -> Vec<Value> {
        self.try_take().expect("the subscription holds and carries only events")
    }

    /// [`Events::take`], or None if the subscription broke (a Redis restart)
    /// or carried something else than events.
    pub fn try_take(&mut self) -> Option<Vec<Value>> {
        for publisher in &mut self.publishers {
            redis::cmd("PUBLISH").arg(&self.channel).arg("end").exec(publisher).ok()?;
        }
        let (mut events, mut ends) = (Vec::new(), 0);
        loop {
            let parts = match self.subscription.recv_response().ok()? {
                redis::Value::Array(parts) | redis::Value::Push { data: parts, .. } => parts,
                _ => return None,
            };
            match parts.last() {
                Some(redis::Value::BulkString(bytes)) if bytes == b"end" => {
                    ends += 1;
                    if ends == self.publishers.len() {
                        return Some(events);
                    }
                }
                Some(redis::Value::BulkString(bytes)) => events.push(serde_json::from_slice(bytes).ok()?),
                _ => return None,
            }
        }
    }
}

/// A TCP server that accepts connections and never sends a byte: a backing
/// service that hangs.
pub struct Silent {
    pub port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl Silent {
    pub async fn start() -> Silent {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        Silent { port, task }
    }
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Asserts that every one of `users` (of acme) has nothing unread: a walk
/// over the tenant's users passed over none of them.
pub async fn assert_walked_every_user(app: &App, users: &[String]) {
    for batch in users.chunks(100) {
        let named: Vec<&str> = batch.iter().map(String::as_str).collect();
        let answer = app.badges("acme", &named).await;
        assert_eq!(answer.status, 200, "{:?}", answer.body);
        for (user, badge) in named.iter().zip(answer.body["badges"].as_array().unwrap()) {
            assert_eq!(badge["total"], 0, "{user} was passed over: {badge}");
        }
    }
}
