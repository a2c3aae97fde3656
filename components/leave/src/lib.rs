//! `POST /v1/leave` (service token): members left a conversation.
//! `{"tenant", "conversation", "members": [...]}` (at most 500 a call): each
//! member's state of it goes and their badges drop in the same step; their
//! read cursors leave the SQL store; late touches of it change nothing for
//! them until a join brings them back.

use serde::Deserialize;
use spin_sdk::http::{Method, Request};
use spin_sdk::http_service;
use unread_api::core::counts;
use unread_api::{Answer, Identifier, id_list, json, json_body, require_method, service_call};

const MAX_MEMBERS: usize = 500;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Leave {
    tenant: Identifier,
    conversation: Identifier,
    members: Vec<Identifier>,
}

#[http_service]
async fn leave(request: Request) -> impl spin_sdk::http::IntoResponse {
    unread_api::serve("leave", request, handle).await
}

async fn handle(request: Request) -> Answer {
    require_method(&request, Method::POST)?;
    service_call(&request).await?;
    let leave: Leave = json_body(request).await?;
    let members = id_list("members", leave.members, 1, MAX_MEMBERS)?;
    let conversation = leave.conversation.into_string();
    let removed = counts::leave(leave.tenant.into_string(), conversation.clone(), members).await?;
    Ok(json(&serde_json::json!({ "conversation": conversation, "removed": removed })))
}
