//! JSON answers, always with `Content-Length` (a chunked answer stalls
//! keep-alive clients under Spin).

use bytes::Bytes;
use serde::Serialize;
use spin_sdk::http::{HeaderValue, Response, StatusCode};

use crate::core::AppBadge;

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

/// The badge as the API shows it: `{"total": n, "categories": {"chat": n}}`,
/// plus `"degraded"` where the badge is the whole answer.
#[derive(Serialize)]
pub struct BadgeJson {
    total: u64,
    categories: serde_json::Map<String, serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    degraded: Option<bool>,
}

impl BadgeJson {
    /// The badge inside a larger answer (which says `degraded` itself).
    pub fn nested(badge: AppBadge) -> Self {
        let categories = badge.categories.into_iter().map(|c| (c.category, c.unread.into())).collect();
        BadgeJson { total: badge.total, categories, degraded: None }
    }

    /// The badge as a whole answer.
    pub fn answer(badge: AppBadge) -> Self {
        let degraded = Some(badge.degraded);
        BadgeJson { degraded, ..BadgeJson::nested(badge) }
    }
}
