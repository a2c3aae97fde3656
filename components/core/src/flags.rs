//! A user's own settings of a conversation: mute, pin, mark unread. With a
//! SQL store the setting is written there first (it is truth: it survives a
//! Redis restart); a setting Redis then refuses (no such conversation, too
//! many pins) is taken back, so the truth never keeps it.

use crate::bindings::unread::core::types::{ConversationFlag, ConversationState, Error, Principal};
use crate::reply::{self, Loaded};
use crate::scripts::Script;
use crate::{config, reconcile, redis, sql};

/// Sets `flag` on the user's `conversation`; answers its row and the badge.
pub async fn set(store: Option<String>, who: Principal, conversation: String, flag: ConversationFlag) -> Result<ConversationState, Error> {
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
    let run = || async { reply::conversation_state(&conversation, max_pins, redis::eval(Script::SetFlag, args.clone()).await?) };
    let mut answer = run().await;
    if let (Ok(Loaded::Miss(_)), Some(url)) = (&answer, &store) {
        // Not loaded: load the user from the truth (which has the flag), then answer.
        reconcile::check(url, &who.tenant, std::slice::from_ref(&who.user), config::max_conversations().await?).await?;
        answer = run().await;
    }
    match (answer, &store) {
        (Ok(Loaded::Ready(state)), _) => Ok(state),
        (Err(refused @ (Error::UnknownConversation(_) | Error::TooManyPins(_))), Some(url)) => {
            sql::set_setting(url, &who.tenant, &who.user, &conversation, setting, false).await?;
            Err(refused)
        }
        (Ok(Loaded::Miss(_)), _) => Err(reply::malformed()),
        (Err(error), _) => Err(error),
    }
}
