//! `POST /v1/conversations/{id}/mute` `{"muted": bool}`, `.../pin`
//! `{"pinned": bool}` and `.../mark-unread` (JWT): the user's own settings of
//! one conversation. Answers the conversation's row and the badge.

use serde::Deserialize;
use spin_sdk::http::{Method, Request, StatusCode};
use spin_sdk::http_service;
use unread_api::core::{ConversationFlag, counts};
use unread_api::{
    Answer, ConversationJson, Identifier, Problem, WithBadge, app_principal, json, json_body, json_body_or_empty,
    require_method,
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Mute {
    muted: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Pin {
    pinned: bool,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct MarkUnread {}

#[http_service]
async fn conversation_flags(request: Request) -> impl spin_sdk::http::IntoResponse {
    unread_api::serve("conversation-flags", request, handle).await
}

async fn handle(request: Request) -> Answer {
    let (conversation, action) = route(request.uri().path())?;
    require_method(&request, Method::POST)?;
    let who = app_principal(&request).await?;
    let flag = match action {
        "mute" => ConversationFlag::Muted(json_body::<Mute>(request).await?.muted),
        "pin" => ConversationFlag::Pinned(json_body::<Pin>(request).await?.pinned),
        _ => {
            json_body_or_empty::<MarkUnread>(request).await?;
            ConversationFlag::MarkedUnread
        }
    };
    let state = counts::set_flag(who, conversation, flag).await?;
    let body = serde_json::json!({ "conversation": ConversationJson::new(state.conversation, |preview| preview)? });
    Ok(json(&WithBadge::new(body, state.badge)))
}

/// `{id}` and the action of `/v1/conversations/{id}/{mute|pin|mark-unread}`;
/// any other path is 404.
fn route(path: &str) -> Result<(String, &str), Problem> {
    let not_found = || Problem::new(StatusCode::NOT_FOUND, "not_found", format!("no route for {path}"));
    let rest = path.strip_prefix("/v1/conversations/").ok_or_else(not_found)?;
    let (id, action) = rest.split_once('/').ok_or_else(not_found)?;
    if !matches!(action, "mute" | "pin" | "mark-unread") {
        return Err(not_found());
    }
    let id =
        Identifier::from_path_segment("conversation", id).map_err(|e| Problem::bad_request("invalid_request", e))?;
    Ok((id.into_string(), action))
}
