//! `POST /v1/admin/conversations/{id}/delete` (admin token): a conversation
//! was deleted or a group dissolved. `{"tenant", "members": [...]}`
//! (at most 500 a call): each member's state for it goes and their badges
//! drop in the same step; its read cursors leave the SQL store.

use serde::Deserialize;
use spin_sdk::http::{Method, Request, StatusCode};
use spin_sdk::http_service;
use unread_api::core::counts;
use unread_api::{Answer, Identifier, Problem, admin_call, id_list, json, json_body, require_method};

const MAX_MEMBERS: usize = 500;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Delete {
    tenant: Identifier,
    members: Vec<Identifier>,
}

#[http_service]
async fn delete_conversation(request: Request) -> impl spin_sdk::http::IntoResponse {
    unread_api::serve("delete-conversation", request, handle).await
}

async fn handle(request: Request) -> Answer {
    let conversation = conversation_in(request.uri().path())?;
    require_method(&request, Method::POST)?;
    admin_call(&request).await?;
    let delete: Delete = json_body(request).await?;
    let members = id_list("members", delete.members, 1, MAX_MEMBERS)?;
    let removed = counts::delete_conversation(delete.tenant.into_string(), conversation.clone(), members).await?;
    Ok(json(&serde_json::json!({ "conversation": conversation, "removed": removed })))
}

/// The `{id}` of `/v1/admin/conversations/{id}/delete`; any other path is 404.
fn conversation_in(path: &str) -> Result<String, Problem> {
    let not_found = || Problem::new(StatusCode::NOT_FOUND, "not_found", format!("no route for {path}"));
    let id = path
        .strip_prefix("/v1/admin/conversations/")
        .and_then(|rest| rest.strip_suffix("/delete"))
        .ok_or_else(not_found)?;
    let id =
        Identifier::from_path_segment("conversation", id).map_err(|e| Problem::bad_request("invalid_request", e))?;
    Ok(id.into_string())
}
