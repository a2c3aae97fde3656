//! Answers from the SQL store when Redis cannot give them: the user's state
//! was not loaded (then it is rebuilt from the truth in the same request:
//! source `sql`), or was behind the truth and the caller settled it (source
//! `sql`), or Redis is unreachable (source `sql-redis-unreachable`, a
//! degraded answer). They count as Redis would (mute, pins, marks, mentions,
//! recalls are in the truth too).

use crate::bindings::unread::core::types::{
    AppBadge, CategoryUnread, Conversation, ConversationState, Error, Page, Principal, ReadState, Source,
};
use crate::config::Limits;
use crate::reconcile::{self, Reader};
use crate::scripts::{ListCursor, badge_of};
use crate::sql;
use crate::sql::{Truth, TruthRow};

/// The user's truth in list order, and where the answer comes from; with
/// `version` (Redis answered a miss), the user's Redis state is rebuilt from
/// it too.
async fn user_truth(url: &str, who: &Principal, version: Option<String>) -> Result<(Truth, Source), Error> {
    let limits = Limits::read().await?;
    let truth = truth_of(url, who, limits).await?;
    let source = match version {
        Some(version) => {
            // Best effort: if Redis moved meanwhile, the next request rebuilds.
            let _ =
                reconcile::rebuild(&who.tenant, &[(who.user.clone(), version)], &truth, Reader::TheUser, limits).await;
            Source::Sql
        }
        None => Source::SqlRedisUnreachable,
    };
    Ok((truth, source))
}

/// The user's truth.
async fn truth_of(url: &str, who: &Principal, limits: Limits) -> Result<Truth, Error> {
    sql::truth(url, &who.tenant, std::slice::from_ref(&who.user), limits).await
}

fn listed(rows: &[TruthRow]) -> impl Iterator<Item = &TruthRow> {
    rows.iter().filter(|r| r.listed)
}

fn badge<'a>(rows: impl IntoIterator<Item = &'a TruthRow>, source: Source) -> AppBadge {
    let mut categories: Vec<CategoryUnread> = Vec::new();
    for row in rows.into_iter().filter(|r| r.listed) {
        let counted = row.counts().counted();
        let index = match categories.iter().position(|c| c.category == row.category) {
            Some(index) => index,
            None => {
                categories.push(CategoryUnread { category: row.category.clone(), unread: 0, muted: 0, mentions: 0 });
                categories.len() - 1
            }
        };
        let c = &mut categories[index];
        c.unread += counted.badge;
        c.muted += counted.muted;
        c.mentions += counted.mentions;
    }
    badge_of(categories, source)
}

fn conversation(row: &TruthRow) -> Conversation {
    let counted = row.counts().counted();
    Conversation {
        unread: counted.unread,
        mentions: counted.mentions,
        muted: row.muted,
        pinned: row.pinned,
        marked_unread: row.marked_unread,
        id: row.conversation.clone(),
        category: row.category.clone(),
        last_seq: row.last_seq,
        read_seq: row.read_seq,
        ts: row.ts,
        preview: row.preview.clone(),
    }
}

/// A user Redis could not answer for, with the state's version if Redis
/// answered a miss (none: Redis was unreachable).
pub type Missed = (String, Option<String>);

/// The badges of users of `tenant`, from one read of their truth: a user
/// with a version (Redis answered a miss) is rebuilt in Redis from it too,
/// all in one rebuild (best effort: if Redis moved meanwhile, the next
/// request rebuilds; `reader`: who asked); one without (Redis unreachable)
/// gets a degraded badge.
pub async fn badges_of_users(
    url: &str,
    tenant: &str,
    users: &[Missed],
    reader: Reader,
) -> Result<Vec<AppBadge>, Error> {
    let limits = Limits::read().await?;
    let names: Vec<String> = users.iter().map(|(user, _)| user.clone()).collect();
    let truth = sql::truth(url, tenant, &names, limits).await?;
    let missed: Vec<(String, String)> =
        users.iter().filter_map(|(user, version)| Some((user.clone(), version.clone()?))).collect();
    if !missed.is_empty() {
        let _ = reconcile::rebuild(tenant, &missed, &truth, reader, limits).await;
    }
    let by_user = truth.rows_by_user();
    Ok(users
        .iter()
        .map(|(user, version)| {
            let rows = by_user.get(user.as_str()).into_iter().flatten().copied();
            badge(rows, if version.is_some() { Source::Sql } else { Source::SqlRedisUnreachable })
        })
        .collect())
}

/// A list page, from SQL, with the same order and cursors as Redis gives.
pub async fn page(
    url: &str,
    who: &Principal,
    limit: u32,
    after: Option<&ListCursor>,
    category: Option<&str>,
    version: Option<String>,
) -> Result<Page, Error> {
    let (truth, source) = user_truth(url, who, version).await?;
    let rows = truth.rows;
    let badge = badge(&rows, source);
    let mut rest = listed(&rows)
        .map(conversation)
        .filter(|r| category.is_none_or(|c| r.category == c))
        .filter(|r| after.is_none_or(|a| ListCursor::position(r) < (a.section, a.score, a.conversation.as_str())));
    let conversations: Vec<Conversation> = rest.by_ref().take(limit as usize).collect();
    let next_cursor = match (rest.next(), conversations.last()) {
        (Some(_), Some(last)) => Some(ListCursor::after(last).text()),
        _ => None,
    };
    Ok(Page { conversations, next_cursor, badge })
}

/// One conversation of the user's truth: among its rows, or beyond them
/// (a user with more conversations than the rows hold; not listed then).
async fn row_of(url: &str, who: &Principal, truth: &Truth, conversation: &str) -> Result<Option<TruthRow>, Error> {
    match truth.rows.iter().find(|r| r.conversation == conversation) {
        Some(row) => Ok(Some(row.clone())),
        None if truth.partial.contains(&who.user) => {
            sql::beyond_the_rows(url, &who.tenant, &who.user, conversation).await
        }
        None => Ok(None),
    }
}

/// A mark-read's answer, from SQL (the cursor is already written there, as
/// far as it may go: the truth's cursor is the answer; `seq`, the store's
/// cursor, only if the membership was gone by the time the truth was read).
pub async fn read_state(
    url: &str,
    who: &Principal,
    conversation: &str,
    seq: u64,
    version: Option<String>,
) -> Result<ReadState, Error> {
    let (truth, source) = user_truth(url, who, version).await?;
    read_state_of(url, who, &truth, conversation, seq, source).await
}

/// A mark-read's answer, from SQL, once the caller settled the user's Redis
/// state with the truth (so Redis would answer the same: source `sql`).
pub async fn read_state_settled(url: &str, who: &Principal, conversation: &str, seq: u64) -> Result<ReadState, Error> {
    let truth = truth_of(url, who, Limits::read().await?).await?;
    read_state_of(url, who, &truth, conversation, seq, Source::Sql).await
}

/// [`read_state`] from the user's truth.
async fn read_state_of(
    url: &str,
    who: &Principal,
    truth: &Truth,
    conversation: &str,
    seq: u64,
    source: Source,
) -> Result<ReadState, Error> {
    let row = row_of(url, who, truth, conversation).await?;
    let counted = row.as_ref().map(|r| r.counts().counted()).unwrap_or_default();
    Ok(ReadState {
        conversation: conversation.to_string(),
        read_seq: row.map_or(seq, |r| r.read_seq),
        unread: counted.unread,
        mentions: counted.mentions,
        badge: badge(&truth.rows, source),
    })
}

/// A setting's answer, from SQL (the setting is already written there).
pub async fn conversation_state(
    url: &str,
    who: &Principal,
    id: &str,
    version: Option<String>,
) -> Result<ConversationState, Error> {
    let (truth, source) = user_truth(url, who, version).await?;
    state_of(url, who, &truth, id, source).await
}

/// A setting's answer, from SQL, once the caller settled the user's Redis
/// state with the truth (so Redis would answer the same: source `sql`).
pub async fn conversation_state_settled(url: &str, who: &Principal, id: &str) -> Result<ConversationState, Error> {
    let truth = truth_of(url, who, Limits::read().await?).await?;
    state_of(url, who, &truth, id, Source::Sql).await
}

/// The row of conversation `id` and the badge, from the user's truth.
async fn state_of(
    url: &str,
    who: &Principal,
    truth: &Truth,
    id: &str,
    source: Source,
) -> Result<ConversationState, Error> {
    let row =
        row_of(url, who, truth, id).await?.filter(|r| r.last_seq > 0).ok_or_else(|| crate::unknown_conversation(id))?;
    Ok(ConversationState { conversation: conversation(&row), badge: badge(&truth.rows, source) })
}
