//! `POST /v1/mark-read` (JWT): the user has seen everything up to `seq`
//! (and a mark-unread flag goes).

use serde::Deserialize;
use spin_sdk::http::{Method, Request};
use spin_sdk::http_service;
use unread_api::core::counts;
use unread_api::{Answer, Identifier, Seq, WithBadge, app_principal, json, json_body, require_method};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MarkRead {
    conversation: Identifier,
    seq: Seq,
}

#[http_service]
async fn mark_read(request: Request) -> impl spin_sdk::http::IntoResponse {
    unread_api::serve("mark-read", request, handle).await
}

async fn handle(request: Request) -> Answer {
    require_method(&request, Method::POST)?;
    let who = app_principal(&request).await?;
    let read: MarkRead = json_body(request).await?;
    let state = counts::mark_read(who, read.conversation.into_string(), read.seq.get()).await?;
    let body = serde_json::json!({
        "conversation": state.conversation,
        "read_seq": state.read_seq,
        "unread": state.unread,
        "mentions": state.mentions,
    });
    Ok(json(&WithBadge::new(body, state.badge)))
}
