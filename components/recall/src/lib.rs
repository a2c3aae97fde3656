//! `POST /v1/recall` (service token): a message was recalled or deleted.
//! `{"tenant", "conversation", "seq", "members": [...], "preview"?}` (at most
//! 500 members a call): members who had not read it stop counting it; where
//! it was the last message, `preview` replaces its preview. Replays change nothing.

use serde::Deserialize;
use serde_json::value::RawValue;
use spin_sdk::http::{Method, Request};
use spin_sdk::http_service;
use unread_api::core::counts;
use unread_api::{Answer, Identifier, Seq, id_list, json, json_body, require_method, service_call, stored_preview};

const MAX_MEMBERS: usize = 500;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Recall {
    tenant: Identifier,
    conversation: Identifier,
    seq: Seq,
    members: Vec<Identifier>,
    preview: Option<Box<RawValue>>,
}

#[http_service]
async fn recall(request: Request) -> impl spin_sdk::http::IntoResponse {
    unread_api::serve("recall", request, handle).await
}

async fn handle(request: Request) -> Answer {
    require_method(&request, Method::POST)?;
    service_call(&request).await?;
    let recall: Recall = json_body(request).await?;
    let members = id_list("members", recall.members, 1, MAX_MEMBERS)?;
    let conversation = recall.conversation.into_string();
    let preview = recall.preview.as_deref().map(stored_preview).transpose()?;
    let changed =
        counts::recall(recall.tenant.into_string(), conversation.clone(), recall.seq.get(), members, preview).await?;
    Ok(json(&serde_json::json!({ "conversation": conversation, "seq": recall.seq.get(), "changed": changed })))
}
