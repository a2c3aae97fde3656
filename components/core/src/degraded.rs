//! Answers from the SQL store when Redis cannot give them: the user's state
//! was not loaded (then it is rebuilt from the truth in the same request), or
//! Redis is unreachable. Every such answer says `degraded`.

use crate::bindings::unread::core::types::{AppBadge, CategoryUnread, Conversation, Error, Page, Principal, ReadState};
use crate::sql::TruthRow;
use crate::{config, reconcile, reply, sql};

/// The user's truth, newest first; with `version` (Redis answered a miss),
/// the user's Redis state is rebuilt from it too.
async fn user_truth(url: &str, who: &Principal, version: Option<String>) -> Result<Vec<TruthRow>, Error> {
    let max_conversations = config::max_conversations().await?;
    let mut rows = sql::truth(url, &who.tenant, std::slice::from_ref(&who.user), max_conversations).await?;
    rows.sort_by(|a, b| (b.score(), &b.conversation).cmp(&(a.score(), &a.conversation)));
    if let Some(version) = version {
        // Best effort: if Redis moved meanwhile, the next request rebuilds.
        let _ = reconcile::rebuild(&who.tenant, &[(who.user.clone(), version)], &rows).await;
    }
    Ok(rows)
}

fn badge_of(rows: &[TruthRow]) -> AppBadge {
    let mut categories: Vec<CategoryUnread> = Vec::new();
    for row in rows {
        match categories.iter_mut().find(|c| c.category == row.category) {
            Some(c) => c.unread += row.unread(),
            None => categories.push(CategoryUnread { category: row.category.clone(), unread: row.unread() }),
        }
    }
    reply::badge_of(categories, true)
}

/// The badge, from SQL.
pub async fn badge(url: &str, who: &Principal, version: Option<String>) -> Result<AppBadge, Error> {
    Ok(badge_of(&user_truth(url, who, version).await?))
}

/// A list page, from SQL, with the same order and cursors as Redis gives.
pub async fn page(url: &str, who: &Principal, limit: u32, after: Option<(u64, String)>, version: Option<String>) -> Result<Page, Error> {
    let rows = user_truth(url, who, version).await?;
    let badge = badge_of(&rows);
    let mut rest = rows.into_iter().filter(|r| after.as_ref().is_none_or(|(s, c)| (r.score(), &r.conversation) < (*s, c)));
    let conversations: Vec<TruthRow> = rest.by_ref().take(limit as usize).collect();
    let next_cursor = match (rest.next(), conversations.last()) {
        (Some(_), Some(last)) => Some(format!("{}.{}", last.score(), last.conversation)),
        _ => None,
    };
    let conversations = conversations
        .into_iter()
        .map(|r| Conversation {
            unread: r.unread(),
            id: r.conversation,
            category: r.category,
            last_seq: r.last_seq,
            read_seq: r.read_seq,
            ts: r.ts,
            preview: r.preview,
        })
        .collect();
    Ok(Page { conversations, next_cursor, badge })
}

/// A mark-read's answer, from SQL (the cursor is already written there; the
/// conversation may have no stored message yet, so `seq` bounds it below).
pub async fn read_state(url: &str, who: &Principal, conversation: &str, seq: u64, version: Option<String>) -> Result<ReadState, Error> {
    let rows = user_truth(url, who, version).await?;
    let row = rows.iter().find(|r| r.conversation == conversation);
    Ok(ReadState {
        conversation: conversation.to_string(),
        read_seq: row.map_or(seq, |r| r.read_seq.max(seq)),
        unread: row.map_or(0, TruthRow::unread),
        badge: badge_of(&rows),
    })
}
