//! The unread core: implements the `unread:core/counts` contract.
//!
//! Each call is one atomic Lua script, sent as one `EVALSHA` on the
//! instance's Redis connection (see [`redis`]). The scripts in `src/lua`
//! alone know the key layout. With a SQL store configured (`sql_url`), read
//! cursors are written there first, and answers fall back to it when Redis
//! cannot give them ([`degraded`]); [`reconcile`] corrects Redis from it.

mod cached;
mod config;
mod degraded;
mod reconcile;
mod redis;
mod reply;
mod scripts;
mod sql;

use bindings::exports::unread::core::counts::Guest;
use bindings::unread::core::types::{AppBadge, Error, Message, Page, Principal, ReadState, ReconcileReport, ReconcileScope};
use reply::Loaded;
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
        // The sender's cursor is truth too: without it a reconcile would count
        // the sender's own message.
        if let (Some(url), Some(sender)) = (sql::configured().await, &message.sender) {
            sql::advance_cursor(&url, &message.tenant, sender, &message.conversation, message.seq).await?;
        }
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
        let store = sql::configured().await;
        if let Some(url) = &store {
            sql::advance_cursor(url, &who.tenant, &who.user, &conversation, seq).await?;
        }
        let args = vec![
            who.tenant.clone(),
            who.user.clone(),
            conversation.clone(),
            seq.to_string(),
            max_conversations.to_string(),
            require_loaded(&store),
        ];
        let answer = redis::eval(Script::MarkRead, args).await.and_then(|r| reply::read_state(conversation.clone(), r));
        or_from_truth(answer, store, |url, version| async move { degraded::read_state(&url, &who, &conversation, seq, version).await }).await
    }

    async fn list(who: Principal, limit: u32, cursor: Option<String>) -> Result<Page, Error> {
        let after = cursor.as_deref().map(parse_cursor).transpose()?;
        let store = sql::configured().await;
        let (score, conversation) = after.clone().map(|(s, c)| (s.to_string(), c)).unwrap_or_default();
        let args = vec![who.tenant.clone(), who.user.clone(), limit.to_string(), score, conversation, require_loaded(&store)];
        let answer = redis::eval(Script::List, args).await.and_then(reply::page);
        or_from_truth(answer, store, |url, version| async move { degraded::page(&url, &who, limit, after, version).await }).await
    }

    async fn badge(who: Principal) -> Result<AppBadge, Error> {
        let store = sql::configured().await;
        let args = vec![who.tenant.clone(), who.user.clone(), require_loaded(&store)];
        let answer = redis::eval(Script::Badge, args).await.and_then(reply::badge_only);
        or_from_truth(answer, store, |url, version| async move { degraded::badge(&url, &who, version).await }).await
    }

    async fn reconcile(tenant: String, scope: ReconcileScope) -> Result<ReconcileReport, Error> {
        let url = sql::configured().await.ok_or_else(no_sql_store)?;
        reconcile::run(&url, &tenant, scope).await
    }

    async fn delete_conversation(tenant: String, conversation: String, members: Vec<String>) -> Result<u32, Error> {
        if let Some(url) = sql::configured().await {
            sql::forget_conversation(&url, &tenant, &conversation).await?;
        }
        let mut args = vec![tenant, conversation];
        args.extend(members_with_sender(members, None));
        reply::count(redis::eval(Script::Delete, args).await?)
    }
}

bindings::export!(Core with_types_in bindings);

/// Redis's answer; with a SQL store, the truth's when Redis did not have the
/// user (`version`: rebuild it) or could not be reached.
async fn or_from_truth<T, F, Fut>(answer: Result<Loaded<T>, Error>, store: Option<String>, from_truth: F) -> Result<T, Error>
where
    F: FnOnce(String, Option<String>) -> Fut,
    Fut: std::future::Future<Output = Result<T, Error>>,
{
    match (answer, store) {
        (Ok(Loaded::Ready(value)), _) => Ok(value),
        (Ok(Loaded::Miss(version)), Some(url)) => from_truth(url, Some(version)).await,
        (Err(Error::Unavailable(_)), Some(url)) => from_truth(url, None).await,
        (Ok(Loaded::Miss(_)), None) => Err(reply::malformed()),
        (Err(error), _) => Err(error),
    }
}

fn check_exact(value: u64, field: &str) -> Result<(), Error> {
    if value > MAX_EXACT {
        return Err(Error::Invalid(format!("{field} is too large")));
    }
    Ok(())
}

/// With a SQL store, a user whose Redis state was never loaded is a miss.
fn require_loaded(store: &Option<String>) -> String {
    if store.is_some() { "1" } else { "0" }.to_string()
}

fn no_sql_store() -> Error {
    Error::NoSqlStore("this call needs the SQL store: set the sql_url variable".into())
}

/// Everyone who sees the message, once each; the sender always does.
fn members_with_sender(members: Vec<String>, sender: Option<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    members.into_iter().chain(sender).filter(|m| seen.insert(m.clone())).collect()
}

/// A list cursor is `<score>.<conversation>` of the last row served (URL-safe
/// as it is; the score has no dot).
fn parse_cursor(cursor: &str) -> Result<(u64, String), Error> {
    let invalid = || Error::Invalid("cursor is not one this service issued".into());
    let (score, conversation) = cursor.split_once('.').ok_or_else(invalid)?;
    if score.is_empty() || !score.bytes().all(|b| b.is_ascii_digit()) || conversation.is_empty() {
        return Err(invalid());
    }
    let score: u64 = score.parse().map_err(|_| invalid())?;
    if score > MAX_EXACT {
        return Err(invalid());
    }
    Ok((score, conversation.to_string()))
}
