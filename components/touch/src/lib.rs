//! `POST /v1/touch` (service token): a message was stored in a conversation.

use serde::Deserialize;
use serde_json::value::RawValue;
use spin_sdk::http::{Method, Request};
use spin_sdk::http_service;
use unread_api::core::{Message, counts};
use unread_api::{
    Answer, Category, Identifier, Problem, Seq, id_list, json, json_body, require_method, service_call, stored_preview,
};

const MAX_MEMBERS: usize = 500;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Touch {
    tenant: Identifier,
    conversation: Identifier,
    seq: Seq,
    ts: u64,
    sender: Option<Identifier>,
    members: Vec<Identifier>,
    preview: Box<RawValue>,
    #[serde(default)]
    category: Category,
    #[serde(default)]
    mentions: Vec<Identifier>,
    #[serde(default)]
    mention_all: bool,
}

#[http_service]
async fn touch(request: Request) -> impl spin_sdk::http::IntoResponse {
    unread_api::serve("touch", request, handle).await
}

async fn handle(request: Request) -> Answer {
    require_method(&request, Method::POST)?;
    service_call(&request).await?;
    let touch: Touch = json_body(request).await?;
    let applied = counts::touch(touch.into_message()?).await?;
    Ok(json(&serde_json::json!({ "applied": applied })))
}

impl Touch {
    fn into_message(self) -> Result<Message, Problem> {
        Ok(Message {
            tenant: self.tenant.into_string(),
            conversation: self.conversation.into_string(),
            seq: self.seq.get(),
            ts: self.ts,
            sender: self.sender.map(Identifier::into_string),
            members: id_list("members", self.members, 1, MAX_MEMBERS)?,
            preview: stored_preview(&self.preview)?,
            category: self.category.into_string(),
            mentions: id_list("mentions", self.mentions, 0, MAX_MEMBERS)?,
            mention_all: self.mention_all,
        })
    }
}
