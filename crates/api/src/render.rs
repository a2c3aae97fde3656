//! JSON answers, always with `Content-Length` (a chunked answer stalls
//! keep-alive clients under Spin).

use bytes::Bytes;
use serde::Serialize;
use spin_sdk::http::{HeaderValue, Response, StatusCode};

use crate::Problem;
use crate::core::{AppBadge, Conversation, Source};

/// The body type of every answer.
pub type Body = spin_sdk::http::FullBody<Bytes>;

/// A 200 JSON answer.
pub fn json(value: &impl Serialize) -> Response<Body> {
    json_with_status(StatusCode::OK, value)
}

/// A JSON answer with `status`.
pub fn json_with_status(status: StatusCode, value: &impl Serialize) -> Response<Body> {
    let bytes = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
    let length = bytes.len();
    let mut response = Response::new(Body::new(Bytes::from(bytes)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    headers.insert("content-length", HeaderValue::from(length));
    response
}

/// Where an answer came from, as the API says it: `"source"` is `"redis"` or
/// `"sql"` (a user Redis had not loaded is answered from SQL, and loaded, on
/// a normal first call), and `"degraded"` is true only when SQL answered
/// because Redis could not be reached. `"state": "lost"` is there only when
/// a cache-only Redis lost its data: its numbers start from nothing since.
#[derive(Serialize)]
struct Provenance {
    source: &'static str,
    degraded: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<&'static str>,
}

impl Provenance {
    /// Where the answer carrying `badge` came from.
    fn of(badge: &AppBadge) -> Self {
        let (source, degraded, state) = match badge.source {
            Source::Redis => ("redis", false, None),
            Source::RedisDataLost => ("redis", false, Some("lost")),
            Source::Sql => ("sql", false, None),
            Source::SqlRedisUnreachable => ("sql", true, None),
        };
        Provenance { source, degraded, state }
    }
}

/// An answer that carries a badge: `body`'s fields, then where it came from
/// ([`Provenance`]), then the badge.
#[derive(Serialize)]
pub struct WithBadge<T: Serialize> {
    #[serde(flatten)]
    body: T,
    #[serde(flatten)]
    provenance: Provenance,
    badge: BadgeJson,
}

impl<T: Serialize> WithBadge<T> {
    /// `body` with `badge` and where it came from.
    pub fn new(body: T, badge: AppBadge) -> Self {
        WithBadge { body, provenance: Provenance::of(&badge), badge: BadgeJson::nested(badge) }
    }
}

/// The badge as the API shows it: `{"total": n, "muted": n, "mentions": n,
/// "categories": {"chat": n}}` (categories counting 0 left out), plus
/// `"source"` and `"degraded"` where the badge is the whole answer.
#[derive(Serialize)]
pub struct BadgeJson {
    total: u64,
    muted: u64,
    mentions: u64,
    categories: serde_json::Map<String, serde_json::Value>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    provenance: Option<Provenance>,
}

impl BadgeJson {
    /// The badge inside a larger answer (which says where it came from itself).
    pub fn nested(badge: AppBadge) -> Self {
        let categories =
            badge.categories.into_iter().filter(|c| c.unread > 0).map(|c| (c.category, c.unread.into())).collect();
        BadgeJson { total: badge.total, muted: badge.muted, mentions: badge.mentions, categories, provenance: None }
    }

    /// The badge as a whole answer.
    pub fn answer(badge: AppBadge) -> Self {
        let provenance = Some(Provenance::of(&badge));
        BadgeJson { provenance, ..BadgeJson::nested(badge) }
    }
}

/// One conversation as the list shows it.
#[derive(Serialize)]
pub struct ConversationJson {
    id: String,
    category: String,
    unread: u64,
    mentions: u64,
    muted: bool,
    pinned: bool,
    marked_unread: bool,
    last_seq: u64,
    read_seq: u64,
    ts: u64,
    preview: Box<serde_json::value::RawValue>,
}

impl ConversationJson {
    /// The row with its preview passed through `shape` (the stored JSON
    /// object text in, the JSON to show out).
    pub fn new(c: Conversation, shape: impl FnOnce(String) -> String) -> Result<Self, Problem> {
        let preview = serde_json::value::RawValue::from_string(shape(c.preview))
            .map_err(|_| Problem::unavailable("a stored preview is not JSON"))?;
        Ok(ConversationJson {
            id: c.id,
            category: c.category,
            unread: c.unread,
            mentions: c.mentions,
            muted: c.muted,
            pinned: c.pinned,
            marked_unread: c.marked_unread,
            last_seq: c.last_seq,
            read_seq: c.read_seq,
            ts: c.ts,
            preview,
        })
    }
}
