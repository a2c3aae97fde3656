//! Script replies (flat lists, as Spin flattens nested replies) into answers.

use spin_sdk::redis::RedisResult;

use crate::bindings::unread::core::types::{AppBadge, CategoryUnread, Conversation, Error, Page, ReadState};

/// Reads a flat reply front to back.
struct Reply(std::vec::IntoIter<RedisResult>);

impl Reply {
    fn new(values: Vec<RedisResult>) -> Self {
        Reply(values.into_iter())
    }

    fn text(&mut self) -> Result<String, Error> {
        match self.0.next() {
            Some(RedisResult::Binary(bytes)) => String::from_utf8(bytes).map_err(|_| malformed()),
            Some(RedisResult::Status(text)) => Ok(text),
            Some(RedisResult::Int64(n)) => Ok(n.to_string()),
            _ => Err(malformed()),
        }
    }

    fn number(&mut self) -> Result<u64, Error> {
        match self.0.next() {
            Some(RedisResult::Int64(n)) => u64::try_from(n).map_err(|_| malformed()),
            Some(RedisResult::Binary(bytes)) => std::str::from_utf8(&bytes)
                .ok()
                .and_then(|t| t.parse().ok())
                .ok_or_else(malformed),
            _ => Err(malformed()),
        }
    }

    /// The status word every script starts with.
    fn status(&mut self) -> Result<String, Error> {
        self.text()
    }

    fn badge(&mut self) -> Result<AppBadge, Error> {
        let count = self.number()?;
        let mut categories = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let category = self.text()?;
            // A category field may hold 0 while it still has conversations.
            let unread = self.signed()?.max(0) as u64;
            if unread > 0 {
                categories.push(CategoryUnread { category, unread });
            }
        }
        categories.sort_by(|a, b| a.category.cmp(&b.category));
        let total = categories.iter().map(|c| c.unread).sum();
        Ok(AppBadge { total, categories })
    }

    fn signed(&mut self) -> Result<i64, Error> {
        match self.0.next() {
            Some(RedisResult::Int64(n)) => Ok(n),
            Some(RedisResult::Binary(bytes)) => std::str::from_utf8(&bytes)
                .ok()
                .and_then(|t| t.parse().ok())
                .ok_or_else(malformed),
            _ => Err(malformed()),
        }
    }

    fn conversation(&mut self) -> Result<Conversation, Error> {
        let id = self.text()?;
        let category = self.text()?;
        let last_seq = self.number()?;
        let read_seq = self.number()?;
        let ts = self.number()?;
        let preview = self.text()?;
        Ok(Conversation { id, category, unread: last_seq.saturating_sub(read_seq), last_seq, read_seq, ts, preview })
    }
}

fn malformed() -> Error {
    Error::Unavailable("redis: unexpected script reply".into())
}

/// `{'ok', applied}` or `{'conflict', member, category}`.
pub fn touch(values: Vec<RedisResult>) -> Result<bool, Error> {
    let mut reply = Reply::new(values);
    match reply.status()?.as_str() {
        "ok" => Ok(reply.number()? == 1),
        "conflict" => {
            let member = reply.text()?;
            let category = reply.text()?;
            Err(Error::Conflict(format!(
                "conversation is in category {category:?} for member {member:?}; a conversation keeps its category"
            )))
        }
        _ => Err(malformed()),
    }
}

/// `{'ok'|'early', read_seq, unread, badge...}`.
pub fn read_state(conversation: String, values: Vec<RedisResult>) -> Result<ReadState, Error> {
    let mut reply = Reply::new(values);
    reply.status()?;
    let read_seq = reply.number()?;
    let unread = reply.number()?;
    Ok(ReadState { conversation, read_seq, unread, badge: reply.badge()? })
}

/// `{'ok', next_cursor, badge..., count, rows...}`.
pub fn page(values: Vec<RedisResult>) -> Result<Page, Error> {
    let mut reply = Reply::new(values);
    reply.status()?;
    let next_cursor = Some(reply.text()?).filter(|c| !c.is_empty());
    let badge = reply.badge()?;
    let count = reply.number()?;
    let conversations = (0..count).map(|_| reply.conversation()).collect::<Result<_, _>>()?;
    Ok(Page { conversations, next_cursor, badge })
}

/// `{'ok', badge...}`.
pub fn badge_only(values: Vec<RedisResult>) -> Result<AppBadge, Error> {
    let mut reply = Reply::new(values);
    reply.status()?;
    reply.badge()
}
