//! One function per process, as a deployment that scales each function on
//! its own runs them (`spin up --component-id <id>`, a SpinApp's
//! `components`): the selected function answers the paths its routes match
//! (by Spin's rules: a `/prefix/...` route matches `/prefix` too, and the
//! catch-all `not-found` every path), and any other path, another
//! function's route included, is Spin's plain 404.

use crate::support::{Answer, App, Setup};

/// `(route, component)` of every `[[trigger.http]]` of spin.toml, in order.
fn triggers() -> Vec<(String, String)> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../spin.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let value = |line: &str, key: &str| {
        let rest = line.trim().strip_prefix(key)?.trim_start().strip_prefix('=')?.trim();
        Some(rest.strip_prefix('"')?.strip_suffix('"')?.to_string())
    };
    let mut triggers = Vec::new();
    let mut route = None;
    for line in text.lines() {
        if let Some(found) = value(line, "route") {
            route = Some(found);
        } else if let Some(component) = value(line, "component")
            && let Some(route) = route.take()
        {
            triggers.push((route, component));
        }
    }
    assert!(triggers.len() > 10, "spin.toml's triggers: {triggers:?}");
    triggers
}

/// A path `route` serves (a wildcard's with something under it).
fn sample_path(route: &str) -> String {
    match route.strip_suffix("/...") {
        Some(prefix) => format!("{prefix}/c1/mute"),
        None => route.to_string(),
    }
}

/// Whether `route` matches `path` (spin.toml has exact and trailing-wildcard routes).
fn matches(route: &str, path: &str) -> bool {
    match route.strip_suffix("/...") {
        Some(prefix) => path == prefix || path.starts_with(&format!("{prefix}/")),
        None => path == route,
    }
}

/// Answered by an unread function (each answer is JSON with a request id),
/// not by the host's own 404.
fn from_a_function(answer: &Answer) -> bool {
    answer.header("x-request-id").is_some() && answer.body.is_object()
}

#[tokio::test]
async fn each_function_alone_serves_its_routes_and_no_other() {
    let triggers = triggers();
    let mut functions: Vec<&str> = triggers.iter().map(|(_, component)| component.as_str()).collect();
    functions.dedup();
    for function in functions {
        let mut answered = 0;
        let app = App::with(Setup { components: vec![function.to_string()], ..Setup::default() }).await;
        let own: Vec<&str> = triggers.iter().filter(|(_, c)| c == function).map(|(route, _)| route.as_str()).collect();
        for (route, component) in &triggers {
            let path = sample_path(route);
            let answer = app.send("GET", &path, None, None).await;
            let what = format!("{function} alone, GET {path} (route of {component})");
            if own.iter().any(|route| matches(route, &path)) {
                assert!(from_a_function(&answer), "{what}: {} {}", answer.status, answer.text);
                answered += 1;
            } else {
                assert_eq!(answer.status, 404, "{what}: {}", answer.text);
                assert!(!from_a_function(&answer) && answer.length == 0, "{what}: {:?}", answer.headers);
            }
        }
        assert!(answered > 0, "{function} alone answered none of its routes");
    }
}

#[tokio::test]
async fn several_functions_can_share_a_process() {
    let app = App::with(Setup { components: vec!["badge".into(), "health".into()], ..Setup::default() }).await;
    let health = app.send("GET", "/v1/health", None, None).await;
    assert_eq!((health.status, health.body["status"].as_str()), (200, Some("ok")));
    assert_eq!(app.badge("acme", "u1").await.status, 200);
    let elsewhere = app.send("GET", "/v1/conversations", None, None).await;
    assert_eq!((elsewhere.status, elsewhere.length), (404, 0));
}
