//! The unread core: implements the `unread:core/counts` contract over Redis.
//!
//! Each call is one atomic Lua script, sent as one `EVALSHA` on one Redis
//! connection per instance (see [`redis`]). The scripts in `src/lua` alone
//! know the key layout; this crate turns typed calls into script arguments
//! and script replies back into typed answers.

mod redis;
mod reply;
mod scripts;

use bindings::exports::unread::core::counts::Guest;
use bindings::unread::core::types::{AppBadge, Error, Message, Page, Principal, ReadState};
use scripts::Script;

mod bindings {
    spin_sdk::wit_bindgen::generate!({
        runtime_path: "::spin_sdk::wit_bindgen::rt",
        path: "../../wit",
        world: "core",
        generate_all,
    });
}

/// Highest seq or score that survives Lua's double arithmetic exactly.
const MAX_EXACT: u64 = (1 << 53) - 1;

struct Core;

impl Guest for Core {
    async fn touch(message: Message) -> Result<bool, Error> {
        check_exact(message.seq, "seq")?;
        check_exact(message.ts.saturating_mul(1000) + 999, "ts")?;
        let max_conversations = config::max_conversations().await?;
        let mut args = vec![
            message.tenant,
            message.conversation,
            message.seq.to_string(),
            message.ts.to_string(),
            message.category,
            message.preview,
            max_conversations.to_string(),
            message.sender.clone().unwrap_or_default(),
        ];
        args.extend(members_with_sender(message.members, message.sender));
        reply::touch(redis::eval(Script::Touch, args).await?)
    }

    async fn mark_read(who: Principal, conversation: String, seq: u64) -> Result<ReadState, Error> {
        check_exact(seq, "seq")?;
        let max_conversations = config::max_conversations().await?;
        let args = vec![who.tenant, who.user, conversation.clone(), seq.to_string(), max_conversations.to_string()];
        reply::read_state(conversation, redis::eval(Script::MarkRead, args).await?)
    }

    async fn list(who: Principal, limit: u32, cursor: Option<String>) -> Result<Page, Error> {
        let (after_score, after_conversation) = match cursor {
            Some(cursor) => parse_cursor(&cursor)?,
            None => (String::new(), String::new()),
        };
        let args = vec![who.tenant, who.user, limit.to_string(), after_score, after_conversation];
        reply::page(redis::eval(Script::List, args).await?)
    }

    async fn badge(who: Principal) -> Result<AppBadge, Error> {
        reply::badge_only(redis::eval(Script::Badge, vec![who.tenant, who.user]).await?)
    }
}

bindings::export!(Core with_types_in bindings);

fn check_exact(value: u64, field: &str) -> Result<(), Error> {
    if value > MAX_EXACT {
        return Err(Error::Invalid(format!("{field} is too large")));
    }
    Ok(())
}

/// Everyone who sees the message, once each; the sender always does.
fn members_with_sender(members: Vec<String>, sender: Option<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    members.into_iter().chain(sender).filter(|m| seen.insert(m.clone())).collect()
}

/// A list cursor is `<score>.<conversation>` of the last row served (URL-safe
/// as it is; the score has no dot).
fn parse_cursor(cursor: &str) -> Result<(String, String), Error> {
    let invalid = || Error::Invalid("cursor is not one this service issued".into());
    let (score, conversation) = cursor.split_once('.').ok_or_else(invalid)?;
    let score_value: u64 = score.parse().map_err(|_| invalid())?;
    if score_value > MAX_EXACT || conversation.is_empty() || score.starts_with('+') {
        return Err(invalid());
    }
    Ok((score_value.to_string(), conversation.to_string()))
}

mod config {
    use super::Error;

    /// The per-user cap on kept conversations (`max_conversations`, default 100).
    pub async fn max_conversations() -> Result<u32, Error> {
        let text = spin_sdk::variables::get("max_conversations")
            .await
            .unwrap_or_else(|_| "100".to_string());
        match text.trim().parse::<u32>() {
            Ok(n) if n >= 1 => Ok(n),
            _ => Err(Error::Unavailable(format!("variable max_conversations is not a positive integer: {text:?}"))),
        }
    }
}
