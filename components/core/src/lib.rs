//! The unread core: implements the `unread:core/counts` contract.
//!
//! Each call is one atomic Lua script, sent as one `EVALSHA` on the
//! instance's Redis connection (see [`redis`]). The scripts in `src/lua`
//! alone know the key layout. With a SQL store configured (`sql_url`), read
//! cursors are written there first, and answers fall back to it when Redis
//! cannot give them ([`degraded`]); [`reconcile`] corrects Redis from it.

mod cached;
mod clear;
mod config;
mod degraded;
mod flags;
mod reconcile;
mod redis;
mod reply;
mod scripts;
mod sql;

use bindings::exports::unread::core::counts::Guest;
use bindings::unread::core::types::{
    AppBadge, ClearReport, ConversationFlag, ConversationState, Error, Message, Page, Principal, ReadState,
    ReconcileReport, UserScope,
};
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
        check_exact(message.ts.saturating_mul(1000).saturating_add(999), "ts")?;
        let max_conversations = config::max_conversations().await?;
        if let Some(url) = sql::configured().await {
            record_in_truth(&url, &message).await?;
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
            flag(message.mention_all),
            message.mentions.len().to_string(),
        ];
        args.extend(message.mentions);
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
        or_from_truth(answer, store, |url, version| async move {
            degraded::read_state(&url, &who, &conversation, seq, version).await
        })
        .await
    }

    async fn list(who: Principal, limit: u32, cursor: Option<String>, category: Option<String>) -> Result<Page, Error> {
        let after = cursor.as_deref().map(parse_cursor).transpose()?;
        let store = sql::configured().await;
        let (section, score, conversation) = match &after {
            Some(a) => (a.section.to_string(), a.score.to_string(), a.conversation.clone()),
            None => Default::default(),
        };
        let args = vec![
            who.tenant.clone(),
            who.user.clone(),
            limit.to_string(),
            section,
            score,
            conversation,
            category.clone().unwrap_or_default(),
            require_loaded(&store),
        ];
        let answer = redis::eval(Script::List, args).await.and_then(reply::page);
        or_from_truth(answer, store, |url, version| async move {
            degraded::page(&url, &who, limit, after, category, version).await
        })
        .await
    }

    async fn set_flag(
        who: Principal,
        conversation: String,
        flag: ConversationFlag,
    ) -> Result<ConversationState, Error> {
        flags::set(sql::configured().await, who, conversation, flag).await
    }

    async fn recall(
        tenant: String,
        conversation: String,
        seq: u64,
        members: Vec<String>,
        preview: Option<String>,
    ) -> Result<u32, Error> {
        check_exact(seq, "seq")?;
        if let Some(url) = sql::configured().await {
            sql::record_recall(&url, &tenant, &conversation, seq).await?;
        }
        let mut args = vec![tenant, conversation, seq.to_string(), preview.unwrap_or_default()];
        args.extend(members_with_sender(members, None));
        reply::count(redis::eval(Script::Recall, args).await?)
    }

    async fn join(tenant: String, conversation: String, seq: u64, members: Vec<String>) -> Result<u32, Error> {
        check_exact(seq, "seq")?;
        let max_conversations = config::max_conversations().await?;
        let members = members_with_sender(members, None);
        if let Some(url) = sql::configured().await {
            let cursors: Vec<(String, String, u64)> =
                members.iter().map(|m| (m.clone(), conversation.clone(), seq)).collect();
            sql::advance_cursors(&url, &tenant, &cursors).await?;
        }
        let mut args = vec![tenant, conversation, seq.to_string(), max_conversations.to_string()];
        args.extend(members);
        reply::count(redis::eval(Script::Join, args).await?)
    }

    async fn clear_category(
        tenant: String,
        scope: UserScope,
        category: String,
        dry_run: bool,
    ) -> Result<ClearReport, Error> {
        clear::run(sql::configured().await, &tenant, scope, &category, dry_run).await
    }

    async fn badge(who: Principal, category: Option<String>) -> Result<AppBadge, Error> {
        let store = sql::configured().await;
        let args = vec![who.tenant.clone(), who.user.clone(), require_loaded(&store)];
        let answer = redis::eval(Script::Badge, args).await.and_then(reply::badge_only);
        let badge =
            or_from_truth(answer, store, |url, version| async move { degraded::badge(&url, &who, version).await })
                .await?;
        Ok(match category {
            Some(only) => {
                reply::badge_of(badge.categories.into_iter().filter(|c| c.category == only).collect(), badge.degraded)
            }
            None => badge,
        })
    }

    async fn reconcile(tenant: String, scope: UserScope) -> Result<ReconcileReport, Error> {
        let url = sql::configured().await.ok_or_else(no_sql_store)?;
        reconcile::run(&url, &tenant, scope).await
    }

    async fn delete_conversation(tenant: String, conversation: String, members: Vec<String>) -> Result<u32, Error> {
        if let Some(url) = sql::configured().await {
            sql::forget_conversation(&url, &tenant, &conversation).await?;
        }
        let max_conversations = config::max_conversations().await?;
        let mut args = vec![tenant, conversation, max_conversations.to_string()];
        args.extend(members_with_sender(members, None));
        reply::count(redis::eval(Script::Delete, args).await?)
    }
}

bindings::export!(Core with_types_in bindings);

/// What a touch adds to the truth besides the message the app stored: the
/// sender's read cursor (else a reconcile would count the sender's own
/// message) and who the message mentions.
async fn record_in_truth(url: &str, message: &Message) -> Result<(), Error> {
    if let Some(sender) = &message.sender {
        sql::advance_cursor(url, &message.tenant, sender, &message.conversation, message.seq).await?;
    }
    let mut mentioned = message.mentions.clone();
    if message.mention_all {
        mentioned.push("*".into());
    }
    let sender = message.sender.as_deref().unwrap_or_default();
    sql::record_mentions(url, &message.tenant, &message.conversation, message.seq, sender, &mentioned).await
}

/// Redis's answer; with a SQL store, the truth's when Redis did not have the
/// user (`version`: rebuild it) or could not be reached.
async fn or_from_truth<T, F, Fut>(
    answer: Result<Loaded<T>, Error>,
    store: Option<String>,
    from_truth: F,
) -> Result<T, Error>
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

fn flag(on: bool) -> String {
    if on { "1" } else { "0" }.to_string()
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

/// Where a list page ends: `<section>.<score>.<conversation>` of the last
/// row served (section 1: pinned; URL-safe as it is).
#[derive(Clone, Debug, PartialEq)]
pub struct ListCursor {
    pub section: u8,
    pub score: u64,
    pub conversation: String,
}

fn parse_cursor(cursor: &str) -> Result<ListCursor, Error> {
    let invalid = || Error::Invalid("cursor is not one this service issued".into());
    let mut parts = cursor.splitn(3, '.');
    let (Some(section), Some(score), Some(conversation)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(invalid());
    };
    let section = match section {
        "0" => 0,
        "1" => 1,
        _ => return Err(invalid()),
    };
    if score.is_empty() || !score.bytes().all(|b| b.is_ascii_digit()) || conversation.is_empty() {
        return Err(invalid());
    }
    let score: u64 = score.parse().map_err(|_| invalid())?;
    if score > MAX_EXACT {
        return Err(invalid());
    }
    Ok(ListCursor { section, score, conversation: conversation.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_name_section_score_and_conversation() {
        let cursor = parse_cursor("1.1764460800123017.c.42").unwrap();
        assert_eq!(cursor, ListCursor { section: 1, score: 1764460800123017, conversation: "c.42".into() });
        for bad in ["", "1", "2.5.c", "0..c", "0.5.", "0.x.c", "0.9007199254740992.c"] {
            assert!(parse_cursor(bad).is_err(), "{bad}");
        }
    }
}
