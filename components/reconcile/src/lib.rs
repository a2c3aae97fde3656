//! `POST /v1/admin/reconcile` (admin token): compares users' Redis state
//! with the truth in the SQL store and rewrites what differs. Either
//! `{"tenant", "users": [...]}` (at most 1000) or `{"tenant", "cursor": ...}`
//! to walk every user in batches (no cursor: from the start). Any scheduler
//! can call it every 10 minutes.

use serde::Deserialize;
use spin_sdk::http::{Method, Request};
use spin_sdk::http_service;
use unread_api::core::{UserScope, counts};
use unread_api::{Answer, Identifier, Problem, admin_call, id_list, json, json_body, require_method};

const MAX_USERS: usize = 1000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Reconcile {
    tenant: Identifier,
    users: Option<Vec<Identifier>>,
    cursor: Option<Identifier>,
}

#[http_service]
async fn reconcile(request: Request) -> impl spin_sdk::http::IntoResponse {
    unread_api::serve("reconcile", request, handle).await
}

async fn handle(request: Request) -> Answer {
    require_method(&request, Method::POST)?;
    admin_call(&request).await?;
    let call: Reconcile = json_body(request).await?;
    let scope = match (call.users, call.cursor) {
        (Some(_), Some(_)) => {
            return Err(Problem::bad_request("invalid_request", "give either users or cursor, not both"));
        }
        (Some(users), None) => UserScope::Users(id_list("users", users, 1, MAX_USERS)?),
        (None, cursor) => UserScope::Walk(cursor.map(Identifier::into_string)),
    };
    let report = counts::reconcile(call.tenant.into_string(), scope).await?;
    Ok(json(&serde_json::json!({
        "checked": report.checked,
        "drifted": report.drifted,
        "fixed": report.fixed,
        "max_drift": report.max_drift,
        "next_cursor": report.next_cursor,
    })))
}
