//! `POST /v1/join` (service token): members joined a conversation after
//! message `seq` (or came back to it). `{"tenant", "conversation", "seq",
//! "members": [...]}` (at most 500 a call): what came up to `seq` never
//! counts for them. Call it when they join, before the next touch.

use serde::Deserialize;
use spin_sdk::http::{Method, Request};
use spin_sdk::http_service;
use unread_api::core::counts;
use unread_api::{Answer, Identifier, Seq, id_list, json, json_body, require_method, service_call};

const MAX_MEMBERS: usize = 500;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Join {
    tenant: Identifier,
    conversation: Identifier,
    seq: Seq,
    members: Vec<Identifier>,
}

#[http_service]
async fn join(request: Request) -> impl spin_sdk::http::IntoResponse {
    unread_api::serve("join", request, handle).await
}

async fn handle(request: Request) -> Answer {
    require_method(&request, Method::POST)?;
    service_call(&request).await?;
    let join: Join = json_body(request).await?;
    let members = id_list("members", join.members, 1, MAX_MEMBERS)?;
    let conversation = join.conversation.into_string();
    let changed = counts::join(join.tenant.into_string(), conversation.clone(), join.seq.get(), members).await?;
    Ok(json(&serde_json::json!({ "conversation": conversation, "seq": join.seq.get(), "changed": changed })))
}
