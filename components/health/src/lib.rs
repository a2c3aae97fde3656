//! `GET /v1/health` (no credentials): whether this function reaches Redis
//! and, when `sql_url` is set, the SQL store, each within a second — for
//! load balancers and Kubernetes probes.
//!
//! 200 `{"status":"ok","redis":"ok","sql":"ok"}` (`sql` is `"not configured"`
//! when unread runs cache-only); 503 with the same members, each service
//! `"ok"` or `"unavailable"`, beside the usual `error` (`unavailable`, a fixed
//! message). Why a service did not answer goes to the log, never the answer.

use serde_json::{Map, Value};
use spin_sdk::http::{Method, Request};
use spin_sdk::http_service;
use unread_api::core::{Reachability, counts};
use unread_api::{Answer, Problem, json, query, require_method};

#[http_service]
async fn health(request: Request) -> impl spin_sdk::http::IntoResponse {
    unread_api::serve("health", request, handle).await
}

async fn handle(request: Request) -> Answer {
    require_method(&request, Method::GET)?;
    query(&request, &[])?;
    let report = counts::health().await;
    let mut down = Vec::new();
    let mut states = Vec::new();
    for (name, reachability) in [("redis", report.redis), ("sql", report.sql)] {
        let state = match reachability {
            Reachability::Reachable => "ok",
            Reachability::NotConfigured => "not configured",
            Reachability::Unreachable(reason) => {
                // The core's reasons mostly name their service already.
                let prefix = format!("{name}: ");
                down.push(format!("{prefix}{}", reason.strip_prefix(&prefix).unwrap_or(&reason)));
                "unavailable"
            }
        };
        states.push((name, state));
    }
    let status = if down.is_empty() { "ok" } else { "unavailable" };
    let answer: Vec<(&str, &str)> = [("status", status)].into_iter().chain(states).collect();
    if down.is_empty() {
        let body: Map<String, Value> = answer.into_iter().map(|(name, state)| (name.into(), state.into())).collect();
        return Ok(json(&body));
    }
    Err(Problem::unavailable(down.join("; ")).with_members(answer))
}
