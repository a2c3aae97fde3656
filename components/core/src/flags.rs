//! A user's own settings of a conversation: mute, pin, mark unread. With a
//! SQL store the setting is written there first (it is truth: it survives a
//! Redis restart), and a user Redis does not hold (or Redis down) is answered
//! from the truth, as reads are; a setting then refused (no such
//! conversation, too many pins) is taken back, so the truth never keeps it.

use crate::bindings::unread::core::types::{ConversationFlag, ConversationState, Error, Principal};
use crate::reply;
use crate::scripts::Script;
use crate::{config, degraded, redis, sql};

/// Sets `flag` on the user's `conversation`; answers its row and the badge.
pub async fn set(
    store: Option<String>,
    who: Principal,
    conversation: String,
    flag: ConversationFlag,
) -> Result<ConversationState, Error> {
    let max_pins = config::max_pins().await?;
    let (setting, letter, on) = match flag {
        ConversationFlag::Muted(on) => (sql::Setting::Muted, "m", on),
        ConversationFlag::Pinned(on) => (sql::Setting::Pinned, "p", on),
        ConversationFlag::MarkedUnread => (sql::Setting::MarkedUnread, "u", true),
    };
    if let Some(url) = &store {
        sql::set_setting(url, &who.tenant, &who.user, &conversation, setting, on).await?;
    }
    let args = vec![
        who.tenant.clone(),
        who.user.clone(),
        conversation.clone(),
        letter.to_string(),
        crate::flag(on),
        max_pins.to_string(),
        crate::require_loaded(&store),
    ];
    let answer =
        redis::eval(Script::SetFlag, args).await.and_then(|r| reply::conversation_state(&conversation, max_pins, r));
    let (whom, id) = (&who, conversation.as_str());
    let state = crate::or_from_truth(answer, store.clone(), |url, version| async move {
        degraded::conversation_state(&url, whom, id, version).await
    })
    .await;
    match (state, &store) {
        (Err(refused @ (Error::UnknownConversation(_) | Error::TooManyPins(_))), Some(url)) => {
            sql::set_setting(url, &who.tenant, &who.user, &conversation, setting, false).await?;
            Err(refused)
        }
        (state, _) => state,
    }
}
