//! `GET /v1/conversations?limit=&cursor=` (JWT): the conversation list,
//! newest first, with unread numbers, previews and the badge.

use serde::Serialize;
use serde_json::value::RawValue;
use spin_sdk::http::{Method, Request};
use spin_sdk::http_service;
use unread_api::core::{Conversation, counts};
use unread_api::{Answer, BadgeJson, Problem, app_principal, json, query, require_method};

const DEFAULT_LIMIT: u32 = 20;
const MAX_LIMIT: u32 = 100;

#[derive(Serialize)]
struct Row {
    id: String,
    category: String,
    unread: u64,
    last_seq: u64,
    read_seq: u64,
    ts: u64,
    preview: Box<RawValue>,
}

#[http_service]
async fn list(request: Request) -> impl spin_sdk::http::IntoResponse {
    unread_api::respond(handle(request).await)
}

async fn handle(request: Request) -> Answer {
    require_method(&request, Method::GET)?;
    let who = app_principal(&request).await?;
    let (limit, cursor) = paging(&request)?;
    let page = counts::list(who, limit, cursor).await?;
    let rows = page.conversations.into_iter().map(Row::try_from).collect::<Result<Vec<_>, _>>()?;
    Ok(json(&serde_json::json!({
        "conversations": rows,
        "next_cursor": page.next_cursor,
        "degraded": page.badge.degraded,
        "badge": BadgeJson::nested(page.badge),
    })))
}

fn paging(request: &Request) -> Result<(u32, Option<String>), Problem> {
    let mut limit = DEFAULT_LIMIT;
    let mut cursor = None;
    for (name, value) in query(request, &["limit", "cursor"])? {
        match name.as_str() {
            "limit" => {
                limit = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_LIMIT).contains(n))
                    .ok_or_else(|| Problem::bad_request("invalid_query", format!("limit must be 1-{MAX_LIMIT}")))?
            }
            _ => cursor = Some(value),
        }
    }
    Ok((limit, cursor))
}

impl TryFrom<Conversation> for Row {
    type Error = Problem;

    fn try_from(c: Conversation) -> Result<Self, Problem> {
        let preview = RawValue::from_string(c.preview).map_err(|_| Problem::unavailable("a stored preview is not JSON"))?;
        Ok(Row { id: c.id, category: c.category, unread: c.unread, last_seq: c.last_seq, read_seq: c.read_seq, ts: c.ts, preview })
    }
}
