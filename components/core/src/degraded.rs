//! Answers from the SQL store when Redis cannot give them: the user's state
//! was not loaded (then it is rebuilt from the truth in the same request), or
//! Redis is unreachable. Every such answer says `degraded`; it counts as
//! Redis would (mute, pins, marks, mentions, recalls are in the truth too).

use crate::bindings::unread::core::types::{
    AppBadge, CategoryUnread, Conversation, ConversationState, Error, Page, Principal, ReadState,
};
use crate::sql::TruthRow;
use crate::{ListCursor, config, reconcile, reply, sql};

/// The user's truth in list order (pinned first, then newest first); with
/// `version` (Redis answered a miss), the user's Redis state is rebuilt from it too.
async fn user_truth(url: &str, who: &Principal, version: Option<String>) -> Result<Vec<TruthRow>, Error> {
    let max_conversations = config::max_conversations().await?;
    let mut rows = sql::truth(url, &who.tenant, std::slice::from_ref(&who.user), max_conversations).await?;
    rows.sort_by(|a, b| sort_key(b).cmp(&sort_key(a)));
    if let Some(version) = version {
        // Best effort: if Redis moved meanwhile, the next request rebuilds.
        let _ = reconcile::rebuild(&who.tenant, &[(who.user.clone(), version)], &rows).await;
    }
    Ok(rows)
}

fn sort_key(row: &TruthRow) -> (u8, u64, &str) {
    (row.pinned.into(), row.score(), &row.conversation)
}

fn badge_of(rows: &[TruthRow]) -> AppBadge {
    let mut categories: Vec<CategoryUnread> = Vec::new();
    for row in rows {
        let counted = row.counted();
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
    reply::badge_of(categories, true)
}

fn conversation(row: TruthRow) -> Conversation {
    let counted = row.counted();
    Conversation {
        unread: counted.unread,
        mentions: counted.mentions,
        muted: row.muted,
        pinned: row.pinned,
        marked_unread: row.marked_unread,
        id: row.conversation,
        category: row.category,
        last_seq: row.last_seq,
        read_seq: row.read_seq,
        ts: row.ts,
        preview: row.preview,
    }
}

/// The badge, from SQL.
pub async fn badge(url: &str, who: &Principal, version: Option<String>) -> Result<AppBadge, Error> {
    Ok(badge_of(&user_truth(url, who, version).await?))
}

/// A list page, from SQL, with the same order and cursors as Redis gives.
pub async fn page(
    url: &str,
    who: &Principal,
    limit: u32,
    after: Option<ListCursor>,
    category: Option<String>,
    version: Option<String>,
) -> Result<Page, Error> {
    let rows = user_truth(url, who, version).await?;
    let badge = badge_of(&rows);
    let mut rest = rows
        .into_iter()
        .filter(|r| category.as_ref().is_none_or(|c| &r.category == c))
        .filter(|r| after.as_ref().is_none_or(|a| sort_key(r) < (a.section, a.score, a.conversation.as_str())));
    let conversations: Vec<TruthRow> = rest.by_ref().take(limit as usize).collect();
    let next_cursor = match (rest.next(), conversations.last()) {
        (Some(_), Some(last)) => Some(format!("{}.{}.{}", u8::from(last.pinned), last.score(), last.conversation)),
        _ => None,
    };
    Ok(Page { conversations: conversations.into_iter().map(conversation).collect(), next_cursor, badge })
}

/// A mark-read's answer, from SQL (the cursor is already written there; the
/// conversation may have no stored message yet, so `seq` bounds it below).
pub async fn read_state(
    url: &str,
    who: &Principal,
    conversation: &str,
    seq: u64,
    version: Option<String>,
) -> Result<ReadState, Error> {
    let rows = user_truth(url, who, version).await?;
    let row = rows.iter().find(|r| r.conversation == conversation);
    let counted = row.map(TruthRow::counted).unwrap_or_default();
    Ok(ReadState {
        conversation: conversation.to_string(),
        read_seq: row.map_or(seq, |r| r.read_seq.max(seq)),
        unread: counted.unread,
        mentions: counted.mentions,
        badge: badge_of(&rows),
    })
}

/// A setting's answer, from SQL (the setting is already written there).
pub async fn conversation_state(
    url: &str,
    who: &Principal,
    id: &str,
    version: Option<String>,
) -> Result<ConversationState, Error> {
    let rows = user_truth(url, who, version).await?;
    let badge = badge_of(&rows);
    let row = rows.into_iter().find(|r| r.conversation == id).ok_or_else(|| reply::unknown_conversation(id))?;
    Ok(ConversationState { conversation: conversation(row), badge })
}
