//! A user's own settings of a conversation: mute, pin, mark unread. With a
//! SQL store the setting is written there first (it is truth: it survives a
//! Redis restart), and a user Redis does not hold (or Redis down) is answered
//! from the truth, as reads are; a setting then refused (no such
//! conversation, too many pins) is taken back, so the truth never keeps it.

use crate::bindings::unread::core::types::{ConversationFlag, ConversationState, Error, Principal};
use crate::config::{self, Limits};
use crate::scripts::{FlagSet, Loaded, SetFlag};
use crate::{degraded, redis, sql};

/// Sets `flag` on the user's `conversation`; answers its row and the badge.
pub async fn set(
    store: Option<String>,
    who: Principal,
    conversation: String,
    flag: ConversationFlag,
) -> Result<ConversationState, Error> {
    let max_pins = config::max_pins().await?;
    let limits = Limits::read().await?;
    let (setting, on) = match flag {
        ConversationFlag::Muted(on) => (sql::Setting::Muted, on),
        ConversationFlag::Pinned(on) => (sql::Setting::Pinned, on),
        ConversationFlag::MarkedUnread => (sql::Setting::MarkedUnread, true),
    };
    if let Some(url) = &store {
        sql::set_setting(url, &who.tenant, &who.user, &conversation, setting, on).await?;
    }
    let set = SetFlag {
        tenant: &who.tenant,
        user: &who.user,
        conversation: &conversation,
        flag: &flag,
        max_pins,
        max_conversations: limits.max_conversations,
        max_kept: limits.max_kept,
        require_loaded: store.is_some(),
    };
    let answer = redis::run(&set).await.and_then(|loaded| match loaded {
        Loaded::Ready(FlagSet::Done(state)) => Ok(Loaded::Ready(state)),
        Loaded::Ready(FlagSet::Unknown) => Err(crate::unknown_conversation(&conversation)),
        Loaded::Ready(FlagSet::TooManyPins) => Err(Error::TooManyPins(max_pins)),
        Loaded::Miss(version) => Ok(Loaded::Miss(version)),
    });
    let (whom, id) = (&who, conversation.as_str());
    let state = crate::or_from_truth(answer, &store, &who, true, |url, version| async move {
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
