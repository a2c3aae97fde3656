//! What users of chat apps expect, feature by feature, through the
//! components on real Redis; the helpers the features share.

mod categories;
mod events;
mod joins;
mod mentions;
mod previews;
mod recall;
mod settings;

use serde_json::{Value, json};

use crate::support::{ADMIN_TOKEN, Answer, App, SERVICE_TOKEN, jwt, message};

pub(super) async fn flag(app: &App, user: &str, conversation: &str, action: &str, body: Value) -> Answer {
    let path = format!("/v1/conversations/{conversation}/{action}");
    app.send("POST", &path, Some(jwt("acme", user)), Some(body.to_string())).await
}

pub(super) async fn recall(app: &App, conversation: &str, seq: u64, members: &[&str]) -> Answer {
    let body = json!({"tenant": "acme", "conversation": conversation, "seq": seq, "members": members});
    app.send("POST", "/v1/recall", Some(SERVICE_TOKEN.to_string()), Some(body.to_string())).await
}

pub(super) async fn clear_category(app: &App, body: Value) -> Answer {
    app.send("POST", "/v1/admin/clear-category", Some(ADMIN_TOKEN.to_string()), Some(body.to_string())).await
}

pub(super) async fn badge_of(app: &App, user: &str, query: &str) -> Value {
    let answer = app.send("GET", &format!("/v1/badge?{query}"), Some(jwt("acme", user)), None).await;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    answer.body
}

/// `count` messages from u1 to u1 and u2 in `conversation`, seqs from `first`.
pub(super) async fn messages(app: &App, conversation: &str, first: u64, count: u64, ts: u64) {
    for seq in first..first + count {
        let touch = message("acme", conversation, seq, ts + seq, "u1", &["u1", "u2", "u3"]);
        assert_eq!(app.touch(touch).await.status, 200);
    }
}

pub(super) fn row<'a>(rows: &'a [Value], id: &str) -> &'a Value {
    rows.iter().find(|r| r["id"] == id).unwrap_or_else(|| panic!("no {id} in {rows:?}"))
}

pub(super) fn ids(rows: &[Value]) -> Vec<&str> {
    rows.iter().map(|r| r["id"].as_str().unwrap()).collect()
}
