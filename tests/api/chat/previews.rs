//! The lock-screen preview: only allow-listed fields, text cut short.

use serde_json::json;

use crate::support::{App, message};

#[tokio::test]
async fn the_lockscreen_preview_keeps_allowed_fields_and_cuts_text() {
    let app = App::start().await;
    let mut touch = message("acme", "c1", 1, 1_000, "u1", &["u1", "u2"]);
    let text = "Meet me at the station at 10, bring the documents 📄 please";
    touch["preview"] = json!({"type": "text", "sender_name": "Ann", "text": text, "phone": "+1 555 0100"});
    app.touch(touch.clone()).await;
    let full = app.list("acme", "u2", "").await.body;
    assert_eq!(full["conversations"][0]["preview"], touch["preview"], "the stored preview comes back as given");
    let locked = app.list("acme", "u2", "preview=lockscreen").await.body;
    let cut: String = text.chars().take(40).collect();
    assert_eq!(
        locked["conversations"][0]["preview"],
        json!({"type": "text", "sender_name": "Ann", "text": format!("{cut}…")})
    );
    assert_eq!(app.list("acme", "u2", "preview=tiny").await.status, 400);
}
