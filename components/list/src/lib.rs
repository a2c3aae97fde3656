//! `GET /v1/conversations?limit=&cursor=&category=&preview=` (JWT): the
//! conversation list, pinned first then newest first, with unread numbers,
//! mentions, flags, previews and the badge. `preview=lockscreen` gives the
//! trimmed lock-screen form of each preview.

use spin_sdk::http::{Method, Request};
use spin_sdk::http_service;
use unread_api::core::counts;
use unread_api::{
    Answer, Category, ConversationJson, Lockscreen, Problem, WithBadge, app_principal, json, query, require_method,
};

const DEFAULT_LIMIT: u32 = 20;
const MAX_LIMIT: u32 = 100;

/// What the query asks for.
#[derive(Default)]
struct Listing {
    limit: Option<u32>,
    cursor: Option<String>,
    category: Option<String>,
    lockscreen: bool,
}

#[http_service]
async fn list(request: Request) -> impl spin_sdk::http::IntoResponse {
    unread_api::serve("list", request, handle).await
}

async fn handle(request: Request) -> Answer {
    require_method(&request, Method::GET)?;
    let who = app_principal(&request).await?;
    let listing = listing(&request)?;
    let lockscreen = if listing.lockscreen { Some(lockscreen().await?) } else { None };
    let page = counts::list(who, listing.limit.unwrap_or(DEFAULT_LIMIT), listing.cursor, listing.category).await?;
    let rows = page
        .conversations
        .into_iter()
        .map(|c| {
            ConversationJson::new(c, |preview| match &lockscreen {
                Some(l) => l.shape(&preview),
                None => preview,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let body = serde_json::json!({ "conversations": rows, "next_cursor": page.next_cursor });
    Ok(json(&WithBadge::new(body, page.badge)))
}

fn listing(request: &Request) -> Result<Listing, Problem> {
    let mut listing = Listing::default();
    for (name, value) in query(request, &["limit", "cursor", "category", "preview"])? {
        match name.as_str() {
            "limit" => {
                listing.limit = Some(
                    value
                        .parse()
                        .ok()
                        .filter(|n| (1..=MAX_LIMIT).contains(n))
                        .ok_or_else(|| invalid(format!("limit must be 1-{MAX_LIMIT}")))?,
                )
            }
            "cursor" => listing.cursor = Some(value),
            "category" => listing.category = Some(Category::parse(&value).map_err(invalid)?.into_string()),
            _ => {
                listing.lockscreen = match value.as_str() {
                    "full" => false,
                    "lockscreen" => true,
                    _ => return Err(invalid("preview must be full or lockscreen".into())),
                }
            }
        }
    }
    Ok(listing)
}

fn invalid(message: String) -> Problem {
    Problem::bad_request("invalid_query", message)
}

/// The lock-screen form from the `lockscreen_fields` and `preview_text_chars` variables.
async fn lockscreen() -> Result<Lockscreen, Problem> {
    let fields = unread_api::variable("lockscreen_fields")
        .await?
        .split(',')
        .map(|f| f.trim().to_string())
        .filter(|f| !f.is_empty())
        .collect();
    let chars = unread_api::variable("preview_text_chars").await?;
    let text_chars = chars
        .trim()
        .parse()
        .map_err(|_| Problem::misconfigured("variable preview_text_chars is not a whole number"))?;
    Ok(Lockscreen { fields, text_chars })
}
