"""The contract check: openapi.yaml against the served API.

1. routes.py: every spin.toml route has a path in openapi.yaml and back.
2. A private redis-server and `unread-host up` on free loopback ports, with
   test secrets; a little state seeded for the JWT's user (see hooks.py).
3. Schemathesis (examples, coverage and fuzzing phases, positive and negative
   data) on every operation, with a JWT for the app routes, the service
   token for the message store's routes and the admin token for the admin
   routes (schemathesis.toml); it fails on any server
   error, undocumented status, wrong content type, header or answer schema,
   and on a request the contract forbids being accepted. Meanwhile every
   change event published is collected and checked against the ChangeEvent
   schema (events.py).
4. The same again, with fewer examples, with a SQL message store (a database
   of its own on the machine's PostgreSQL, then MariaDB): reconcile answers,
   state loaded from the truth, SQL cursors and settings.

Run through tests/contract/run, which installs schemathesis first.
Environment: UNREAD_CONTRACT_EXAMPLES (per operation, default 300),
UNREAD_CONTRACT_SQL_EXAMPLES (each SQL pass, default 100; 0 skips them),
UNREAD_CONTRACT_PG (default postgres://postgres@127.0.0.1:5432/test),
UNREAD_CONTRACT_SEED (the generation seed: default a fixed one, `random` for
a new one each run), UNREAD_CONTRACT_ARGS (more `st run` arguments, split on
spaces), UNREAD_CONTRACT_MANIFEST (default spin.toml).
"""

import base64
import contextlib
import hashlib
import hmac
import json
import os
import random
import shlex
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import events
import routes

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "target" / "contract"
HOST = ROOT / "target" / "tools" / "unread-host"
JWT_SECRET = "contract-jwt-secret-of-at-least-32-bytes"
SERVICE_TOKEN = "contract-service-token"
ADMIN_TOKEN = "contract-admin-token"
REDIS_PASSWORD = "contract-redis-password"
TENANT, USER = "acme", "u1"
DEFAULT_SEED = "20261130"
CHECKS = [
    "not_a_server_error",  # no 5xx (Redis and SQL are up: not even 503)
    "status_code_conformance",  # every status is documented for its operation
    "content_type_conformance",  # application/json, as documented
    "response_headers_conformance",  # Content-Length on every answer
    "allow_header_conformance",  # a 405 says which method the route takes
    "response_schema_conformance",  # every answer matches its schema
    "negative_data_rejection",  # what the contract forbids is refused (4xx)
    "ignored_auth",  # no app or service call goes through without its token
]


def log(message):
    print(f"contract: {message}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, ready, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.05)
    raise SystemExit(f"contract: {what} did not come up within {seconds} s")


def answers(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt(tenant, user, secret, lifetime=6 * 3600):
    head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = b64(json.dumps({"sub": user, "tid": tenant, "exp": int(time.time()) + lifetime}).encode())
    signature = hmac.new(secret.encode(), f"{head}.{claims}".encode(), hashlib.sha256).digest()
    return f"{head}.{claims}.{b64(signature)}"


def call(base, method, path, token, body=None):
    request = urllib.request.Request(
        base + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


class SeedFailed(Exception):
    """A call that seeds the state was refused: the pass fails before schemathesis."""


def seed(base, token):
    """State for the JWT's user: conversations c1-c6 in two categories, with
    mentions, reads, pins, a mute and a mark-unread, so that the answers
    schemathesis checks have rows, flags and badge counts in them."""
    now = int(time.time() * 1000)
    steps = []
    for i in range(1, 7):
        category = "system" if i >= 5 else "chat"
        for seq in (1, 2, 3):
            steps.append(("POST", "/v1/touch", SERVICE_TOKEN, {
                "tenant": TENANT, "conversation": f"c{i}", "seq": seq, "ts": now + 10 * i + seq, "sender": "u2",
                "members": [USER, "u2", "u3"], "category": category, "mentions": [USER] if i % 2 else [],
                "mention_all": i == 4 and seq == 3,
                "preview": {"type": "text", "sender_name": "Bob", "text": f"message {seq} of c{i} " + "ü" * 30, "extra": [1, {"a": None}]},
            }))
    steps += [
        ("POST", "/v1/mark-read", token, {"conversation": "c1", "seq": 3}),
        ("POST", "/v1/mark-read", token, {"conversation": "c2", "seq": 1}),
        # Four of max_pins' five: pins are taken and refused (409) in turn.
        *[("POST", f"/v1/conversations/c{i}/pin", token, {"pinned": True}) for i in (2, 3, 4, 5)],
        ("POST", "/v1/conversations/c4/mute", token, {"muted": True}),
        ("POST", "/v1/conversations/c1/mark-unread", token, {}),
    ]
    for method, path, credential, body in steps:
        status, answer = call(base, method, path, credential, body)
        if status != 200:
            raise SeedFailed(f"{method} {path} {json.dumps(body)} -> {status} {json.dumps(answer)}")
    status, answer = call(base, "GET", "/v1/badge", token)
    log(f"seeded {TENANT}/{USER}: badge {json.dumps(answer)}")


# The app's side of a SQL message store (as tests/api/store.rs sets it up):
# its tables and the two views unread reads.
APP_SCHEMA = """
CREATE TABLE app_conversations (tenant VARCHAR(64) NOT NULL, conversation VARCHAR(64) NOT NULL,
  category VARCHAR(32) NOT NULL, last_seq BIGINT NOT NULL, last_ts BIGINT NOT NULL, preview TEXT NOT NULL,
  PRIMARY KEY (tenant, conversation));
CREATE TABLE app_members (tenant VARCHAR(64) NOT NULL, conversation VARCHAR(64) NOT NULL,
  user_id VARCHAR(64) NOT NULL, PRIMARY KEY (tenant, conversation, user_id));
CREATE VIEW unread_conversation_heads AS
  SELECT tenant, conversation, last_seq, last_ts, category, preview FROM app_conversations;
CREATE VIEW unread_memberships AS SELECT tenant, conversation, user_id FROM app_members;
"""


def run_sql(kind, database, sql):
    """Runs statements with the server's own client as the tests' admin user."""
    if kind == "postgres":
        admin = os.environ.get("UNREAD_CONTRACT_PG", "postgres://postgres@127.0.0.1:5432/test")
        command = ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", f"{admin.rsplit('/', 1)[0]}/{database}"]
    else:
        command = ["mariadb", "-h", "127.0.0.1", "-P", "3306", "-u", "root", database]
    subprocess.run(command, input=sql, text=True, check=True, stdout=subprocess.DEVNULL)


@contextlib.contextmanager
def sql_store(kind):
    """A database of its own on the machine's PostgreSQL or MariaDB (as
    tests/api/store.rs makes them), with the app's schema and the seeded
    conversations' heads (as the app stores them before it calls touch).
    Yields unread's sql_url and sql_host."""
    name = f"unread_contract_{os.getpid()}_{random.randrange(1 << 30)}"
    run_sql(kind, "test", f"CREATE DATABASE {name};")
    try:
        rows = []
        for i in range(1, 7):
            category = "system" if i >= 5 else "chat"
            preview = '{"text":"hi"}'
            rows.append(f"INSERT INTO app_conversations VALUES ('{TENANT}', 'c{i}', '{category}', 3, {int(time.time() * 1000)}, '{preview}');")
            rows += [f"INSERT INTO app_members VALUES ('{TENANT}', 'c{i}', '{user}');" for user in (USER, "u2", "u3")]
        run_sql(kind, name, APP_SCHEMA + "\n".join(rows))
        if kind == "postgres":
            yield f"postgres://postgres@127.0.0.1:5432/{name}?sslmode=disable", "postgres://127.0.0.1:5432"
        else:
            yield f"mysql://root@127.0.0.1:3306/{name}", "mysql://127.0.0.1:3306"
    finally:
        run_sql(kind, "test", f"DROP DATABASE IF EXISTS {name}" + (" WITH (FORCE);" if kind == "postgres" else ";"))


@contextlib.contextmanager
def served(label, **variables):
    """A private redis-server and unread-host serving spin.toml on free ports."""
    manifest = os.environ.get("UNREAD_CONTRACT_MANIFEST", str(ROOT / "spin.toml"))
    children = []
    try:
        redis_port = free_port()
        redis = subprocess.Popen(
            ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--requirepass", REDIS_PASSWORD],
            stdout=subprocess.DEVNULL,
        )
        children.append(redis)
        wait_for(f"redis-server on port {redis_port}", lambda: answers(redis_port))

        port = free_port()
        log_path = OUT / f"host-{label}.log"
        variables = {
            "redis_url": f"redis://:{REDIS_PASSWORD}@127.0.0.1:{redis_port}",
            "redis_host": f"redis://127.0.0.1:{redis_port}",
            "jwt_secret": JWT_SECRET,
            "service_token": SERVICE_TOKEN,
            "admin_token": ADMIN_TOKEN,
            **variables,
        }
        command = [str(HOST), "up", "--listen", f"127.0.0.1:{port}", "--manifest", manifest]
        for name, value in variables.items():
            command += ["--variable", f"{name}={value}"]
        with open(log_path, "w") as host_log:
            host = subprocess.Popen(command, cwd=ROOT, stdout=host_log, stderr=subprocess.STDOUT)
        children.append(host)
        # The host compiles every component before it listens: on a busy
        # 2-core machine that alone can take more than half a minute.
        wait_for(f"unread-host on port {port}", lambda: host.poll() is not None or answers(port), seconds=180)
        if host.poll() is not None:
            print(log_path.read_text(), file=sys.stderr)
            raise SystemExit("contract: unread-host exited")
        log(f"{label}: serving http://127.0.0.1:{port} (Redis on port {redis_port}); host log: {log_path}")
        yield f"http://127.0.0.1:{port}", host, redis_port
    finally:
        for child in reversed(children):
            child.terminate()
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def schemathesis(label, base, host, token, examples):
    st = [
        str(Path(sys.executable).parent / "st"),
        "--config-file", str(ROOT / "tests" / "contract" / "schemathesis.toml"),
        "run", str(ROOT / "openapi.yaml"),
        "--url", base,
        "--checks", ",".join(CHECKS),
        "--phases", "examples,coverage,fuzzing",
        "--mode", "all",
        "--max-examples", str(examples),
        # One worker: with two, schemathesis 4.32 cut some operations' fuzzing short.
        "--workers", "1",
        "--request-timeout", "10",
        "--generation-database", "none",
        "--report", "junit",
        "--report-junit-path", str(OUT / f"junit-{label}.xml"),
    ]
    # A fixed seed by default, so that CI sends the same requests every run;
    # UNREAD_CONTRACT_SEED=random explores (schemathesis prints the seed to replay).
    seed_value = os.environ.get("UNREAD_CONTRACT_SEED", DEFAULT_SEED)
    if seed_value != "random":
        st += ["--seed", seed_value]
    st += shlex.split(os.environ.get("UNREAD_CONTRACT_ARGS", ""))
    env = dict(
        os.environ,
        UNREAD_CONTRACT_JWT=token,
        UNREAD_CONTRACT_SERVICE_TOKEN=SERVICE_TOKEN,
        UNREAD_CONTRACT_ADMIN_TOKEN=ADMIN_TOKEN,
        # Hypothesis' own files (unicode tables) under target/, not in the work tree.
        HYPOTHESIS_STORAGE_DIRECTORY=str(OUT / "hypothesis"),
        PYTHONDONTWRITEBYTECODE="1",
    )
    log(f"{label}: schemathesis, {examples} examples per operation")
    started = time.monotonic()
    code = subprocess.run(st, check=False, cwd=ROOT, env=env).returncode
    log(f"{label}: schemathesis finished in {time.monotonic() - started:.0f} s with exit code {code}")
    if host.poll() is not None:
        log(f"{label}: unread-host died during the run")
        code = code or 1
    return code


def main():
    routes_found, paths, problems = routes.check()
    problems += routes.check_readme(routes_found, paths)
    for problem in problems:
        print(f"contract: routes: {problem}", file=sys.stderr)
    if problems:
        return 1
    log(f"routes: the {len(routes_found)} spin.toml routes, {len(paths)} openapi.yaml paths and README match")

    OUT.mkdir(parents=True, exist_ok=True)
    token = jwt(TENANT, USER, JWT_SECRET)
    failed = []

    def one_pass(label, examples, **variables):
        with served(label, **variables) as (base, host, redis_port):
            listener = events.Events(redis_port, TENANT, REDIS_PASSWORD)
            listener.start()
            try:
                seed(base, token)
            except SeedFailed as error:
                log(f"{label}: seeding failed: {error}")
                failed.append(label)
                return
            if schemathesis(label, base, host, token, examples):
                failed.append(label)
            wrong = events.problems(listener.stop(), ROOT / "openapi.yaml", large="large_group_threshold" in variables)
            for problem in wrong:
                log(f"{label}: change event: {problem}")
            if wrong:
                failed.append(f"{label} (events)")
            else:
                log(f"{label}: {len(listener.messages)} change events, each a ChangeEvent")

    # Groups of three or more become large, so that their events (which
    # name no user) are checked too.
    one_pass("cache-only", int(os.environ.get("UNREAD_CONTRACT_EXAMPLES", "300")), large_group_threshold="2")
    sql_examples = int(os.environ.get("UNREAD_CONTRACT_SQL_EXAMPLES", "100"))
    for kind in ("postgres", "mariadb") if sql_examples else ():
        with sql_store(kind) as (sql_url, sql_host):
            one_pass(kind, sql_examples, sql_url=sql_url, sql_host=sql_host)

    log(f"failed: {', '.join(failed)}" if failed else "every pass conformed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
