//! Spin's conformance cases, ported to spin-sdk 7 and run through the development host.
//!
//! Spin's public conformance suite says what a Spin runtime must do. The cases
//! here are those of its cases that cover what unread uses (outbound Redis
//! with and without permission and with a permission templated over a
//! variable, variables, the shape of an incoming request), with their
//! components rewritten for spin-sdk 7 and WASIp3 under
//! `tests/conformance/components/`. A few cases go beyond the suite: the
//! kinds of route unread's manifest uses, and behaviour that Spin 4.1's
//! source fixes and that a component could notice (error texts, Redis
//! replies Spin refuses). Each of those says where its expectation comes from.
//!
//! One adaptation to WASIp3: the suite expects `Content-Length: 0` on an
//! empty answer, which the host sends for a WASIp2 component on its own. A
//! WASIp3 body is a stream whose length the host learns only from a
//! `content-length` header (the same wasmtime-wasi-http code in Spin 4.1 and
//! in the host); without it the host sent the empty body chunked. So the
//! ported components declare the length, and the expected responses stay the
//! suite's.
//!
//! Where the host and Spin differ, the case's test is marked
//! `#[ignore = "host differs from Spin: ..."]` with the difference; it fails
//! until the host is fixed. `cargo test ... -- --include-ignored` runs them.
//!
//! The components must be built first: see [`harness::BUILD_COMMAND`].

mod harness;

use harness::{modes, require_components, run_case, run_case_with_variables, run_refused_case};

/// The suite's `outbound-redis`: with `redis://localhost:<port>` allowed, the
/// calls of `spin:redis` behave as on Redis itself.
#[tokio::test(flavor = "multi_thread")]
async fn outbound_redis() {
    require_components();
    run_case("outbound-redis", &modes()).await;
}

/// The suite's `outbound-redis-no-permission`: with no `allowed_outbound_hosts`,
/// `connection.open` fails with `error::invalid-address`.
#[tokio::test(flavor = "multi_thread")]
async fn outbound_redis_no_permission() {
    require_components();
    run_case("outbound-redis-no-permission", &modes()).await;
}

/// The suite's `outbound-redis-variable-permission`: an `allowed_outbound_hosts`
/// entry templated over an application variable permits the rendered host.
#[tokio::test(flavor = "multi_thread")]
async fn outbound_redis_variable_permission() {
    require_components();
    run_case("outbound-redis-variable-permission", &modes()).await;
}

/// The suite's variable-permission case with the variable given at run time:
/// the permission follows the value, not the manifest default.
#[tokio::test(flavor = "multi_thread")]
async fn outbound_redis_variable_permission_given_at_run_time() {
    require_components();
    run_case_with_variables("outbound-redis-variable-permission-override", &modes(), &[("redis_host", "localhost")])
        .await;
}

/// The other way round: a run-time value naming another host takes away the
/// permission the default gave, and `open` fails with `invalid-address`.
#[tokio::test(flavor = "multi_thread")]
async fn outbound_redis_variable_permission_taken_at_run_time() {
    require_components();
    run_case_with_variables("outbound-redis-variable-permission-refused", &modes(), &[("redis_host", "127.0.0.2")])
        .await;
}

/// Beyond the suite: a connection URL with a database (`/1`) is permitted by
/// an entry for its server (Spin checks scheme, host and port only).
#[tokio::test(flavor = "multi_thread")]
async fn outbound_redis_database_in_address() {
    require_components();
    run_case("outbound-redis-database", &modes()).await;
}

/// Beyond the suite: `allowed_outbound_hosts = ["{{ redis_url }}"]` (unread's
/// pattern) when the run-time value carries a database path: Spin cannot
/// make a permission of it, so `open` fails with `other` (the application
/// still loads, as the default is valid).
#[tokio::test(flavor = "multi_thread")]
async fn outbound_redis_templated_permission_with_path_at_run_time() {
    require_components();
    run_case_with_variables(
        "outbound-redis-templated-permission-with-path",
        &modes(),
        &[("redis_url", "redis://localhost:%{port=6379}/1")],
    )
    .await;
}

/// Beyond the suite: Spin refuses to load an application whose
/// `allowed_outbound_hosts` entry carries user info.
#[tokio::test(flavor = "multi_thread")]
async fn allowed_hosts_with_user_info_are_refused() {
    require_components();
    run_refused_case("allowed-hosts-userinfo", "Invalid allowed host").await;
}

/// Beyond the suite: Spin refuses to load an application whose
/// `allowed_outbound_hosts` entry carries a path.
#[tokio::test(flavor = "multi_thread")]
async fn allowed_hosts_with_a_path_are_refused() {
    require_components();
    run_refused_case("allowed-hosts-path", "has a path but is not allowed to").await;
}

/// Beyond the suite: a templated entry whose variable's default renders to an
/// invalid entry (here, with a path) stops the application from loading.
#[tokio::test(flavor = "multi_thread")]
async fn templated_allowed_hosts_invalid_with_defaults_are_refused() {
    require_components();
    run_refused_case("allowed-hosts-templated-path-default", "using default variable value(s) with template").await;
}

/// The suite's `variables`: `get` of the defined, an undefined and invalid names.
#[tokio::test(flavor = "multi_thread")]
async fn variables() {
    require_components();
    run_case("variables", &modes()).await;
}

/// Beyond the suite: the text of `invalid-name` errors, as Spin 4.1's
/// `spin-expressions` words it (`"<name>": <rule broken>`).
#[tokio::test(flavor = "multi_thread")]
async fn variables_error_text() {
    require_components();
    run_case("variables-error-text", &modes()).await;
}

/// Beyond the suite (whose manifests set `environment` while its components
/// read headers; Spin's own runtime test reads it): the manifest's
/// `environment` table is the component's environment.
#[tokio::test(flavor = "multi_thread")]
async fn environment() {
    require_components();
    run_case("environment", &modes()).await;
}

/// The suite's `request-shape`: a route with named segments and a trailing wildcard.
#[tokio::test(flavor = "multi_thread")]
async fn request_shape() {
    require_components();
    run_case("request-shape", &modes()).await;
}

/// The suite's `request-shape` request on a trailing wildcard route.
#[tokio::test(flavor = "multi_thread")]
async fn request_shape_wildcard_route() {
    require_components();
    run_case("request-shape-wildcard", &modes()).await;
}

/// The suite's `request-shape` request on an exact route.
#[tokio::test(flavor = "multi_thread")]
async fn request_shape_exact_route() {
    require_components();
    run_case("request-shape-exact", &modes()).await;
}

/// Beyond the suite: how Spin 4.1's `execute` converts the reply types only
/// RESP3 has (read from its outbound Redis host): a double and a big number
/// to binary text, booleans to int64 1 and 0, a map and a verbatim string
/// refused with `other`; and an error inside a reply fails the call with its
/// text.
#[tokio::test(flavor = "multi_thread")]
async fn outbound_redis_resp3() {
    require_components();
    run_case("outbound-redis-resp3", &modes()).await;
}

/// Beyond the suite (Spin's own runtime test checks it): a reply over 128 MiB
/// fails with `other("query result exceeds limit of 134217728 bytes")`. One
/// instance mode is enough (the limit is per reply), and spares a second
/// 128 MiB value.
#[tokio::test(flavor = "multi_thread")]
async fn outbound_redis_result_limit() {
    require_components();
    run_case("outbound-redis-result-limit", &[unread_host::InstanceMode::spin_default()]).await;
}

/// Beyond the suite: Spin 4.1 keeps a component instance's Redis connections
/// in a table of 1024 entries, so the 1025th connection held at once fails
/// with `too-many-connections` (and succeeds again once one is dropped).
#[tokio::test(flavor = "multi_thread")]
async fn outbound_redis_connection_cap() {
    require_components();
    run_case("outbound-redis-connection-cap", &modes()).await;
}
