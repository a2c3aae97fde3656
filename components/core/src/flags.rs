//! A user's own settings of a conversation: mute, pin, mark unread.
//!
//! With a SQL store the truth decides first — the user must be a member, and
//! a pin must stay within `max_pins` — then the setting is written there
//! (it survives a Redis restart) and then to Redis. Where Redis cannot
//! answer for it (the user not loaded, the conversation not there yet or
//! beyond what Redis keeps, or Redis out of step), the user's Redis state
//! is settled with the truth as a reconcile does (a rewrite guarded by its
//! version, retried while other calls move it) and the truth answers; with
//! Redis down, the truth answers alone. Two calls for one setting at once
//! (two devices) may reach Redis in the other order than the truth: one
//! that Redis answered reads the setting back from the truth after its
//! Redis step, and one that finds it overtaken settles the user the same
//! way.

use crate::bindings::unread::core::types::{ConversationFlag, ConversationState, Error, Principal};
use crate::config::{self, Limits};
use crate::scripts::{FlagSet, Loaded, Previews, SetFlag};
use crate::sql::Permit;
use crate::{degraded, reconcile, redis, sql};

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
        let pins_allowed = (matches!(flag, ConversationFlag::Pinned(true))).then_some(max_pins);
        match sql::setting_permit(url, &who.tenant, &who.user, &conversation, pins_allowed).await? {
            Permit::Member => {}
            Permit::NotMember => return Err(crate::unknown_conversation(&conversation)),
            Permit::TooManyPins => return Err(Error::TooManyPins(max_pins)),
        }
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
    let answer = match redis::run(&set).await {
        Ok(Loaded::Ready(FlagSet::Done(mut state))) => {
            Previews::fill(&who.tenant, std::slice::from_mut(&mut state.conversation))
                .await
                .map(|()| Loaded::Ready(FlagSet::Done(state)))
        }
        other => other,
    };
    let (whom, id) = (&who, conversation.as_str());
    // The truth allowed it, and Redis could not take it: it answered
    // without the conversation or with a pin too many (the user's state,
    // loaded, is behind the truth), or missed (the user not loaded, or the
    // conversation beyond what Redis kept, which a pin lists again). The
    // user's Redis state is made the truth's: a one-off rebuild that a
    // concurrent call refused would leave a loaded state without the pin.
    let took_nothing = matches!(answer, Ok(Loaded::Ready(FlagSet::Unknown | FlagSet::TooManyPins) | Loaded::Miss(_)));
    if let (Some(url), true) = (&store, took_nothing) {
        return match reconcile::settle_user(url, &who, limits).await {
            true => degraded::conversation_state_settled(url, whom, id).await,
            false => degraded::conversation_state(url, whom, id, None).await,
        };
    }
    let answer = answer.and_then(|loaded| match loaded {
        Loaded::Ready(FlagSet::Done(state)) => Ok(Loaded::Ready(state)),
        // Settled above with a SQL store; none without one.
        Loaded::Miss(_) => Err(crate::script::malformed()),
        Loaded::Ready(FlagSet::Unknown) => Err(crate::unknown_conversation(&conversation)),
        Loaded::Ready(FlagSet::TooManyPins) => Err(Error::TooManyPins(max_pins)),
    });
    // Redis's own answer: Redis holds what this call wrote there.
    let wrote_redis = matches!(answer, Ok(Loaded::Ready(_)));
    let state = crate::or_from_truth(answer, &store, &who, true, |url, version| async move {
        degraded::conversation_state(&url, whom, id, version).await
    })
    .await?;
    match (&store, wrote_redis) {
        (Some(url), true) => {
            let held = sql::setting(url, &who.tenant, &who.user, &conversation, setting);
            crate::unless_overtaken(url, &who, limits, state, async { Ok(held.await? != Some(on)) }, || {
                degraded::conversation_state_settled(url, whom, id)
            })
            .await
        }
        _ => Ok(state),
    }
}
