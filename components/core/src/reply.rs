//! Script replies (flat lists, as Spin flattens nested replies) into answers.

use spin_sdk::redis::RedisResult;

use crate::bindings::unread::core::types::{
    AppBadge, CategoryUnread, Conversation, ConversationState, Error, Page, ReadState,
};

/// What a read gives when a SQL store backs Redis.
pub enum Loaded<T> {
    /// The user's state was in Redis.
    Ready(T),
    /// It was not (never loaded, or Redis lost it); the state's version, for
    /// a rebuild that must not overwrite a newer change.
    Miss(String),
}

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
        u64::try_from(self.signed()?).map_err(|_| malformed())
    }

    /// The status word every script starts with.
    fn status(&mut self) -> Result<String, Error> {
        self.text()
    }

    /// Reads the status; a `miss` carries the state's version.
    fn loaded<T>(&mut self, ready: impl FnOnce(&mut Self) -> Result<T, Error>) -> Result<Loaded<T>, Error> {
        match self.status()?.as_str() {
            "miss" => Ok(Loaded::Miss(self.text()?)),
            _ => ready(self).map(Loaded::Ready),
        }
    }

    fn badge(&mut self) -> Result<AppBadge, Error> {
        let count = self.number()?;
        let mut categories = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let category = self.text()?;
            // A category field may hold 0 while it still has conversations.
            let unread = self.signed()?.max(0) as u64;
            let muted = self.signed()?.max(0) as u64;
            let mentions = self.signed()?.max(0) as u64;
            categories.push(CategoryUnread { category, unread, muted, mentions });
        }
        Ok(badge_of(categories, false))
    }

    fn signed(&mut self) -> Result<i64, Error> {
        match self.0.next() {
            Some(RedisResult::Int64(n)) => Ok(n),
            Some(RedisResult::Binary(bytes)) => {
                std::str::from_utf8(&bytes).ok().and_then(|t| t.parse().ok()).ok_or_else(malformed)
            }
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
        let unread = self.number()?;
        let mentions = self.number()?;
        let flags = self.text()?;
        Ok(Conversation {
            id,
            category,
            unread,
            last_seq,
            read_seq,
            ts,
            preview,
            mentions,
            muted: flags.contains('m'),
            pinned: flags.contains('p'),
            marked_unread: flags.contains('u'),
        })
    }
}

/// The badge of per-category sums: `total`, `muted` and `mentions` are their sums.
pub fn badge_of(mut categories: Vec<CategoryUnread>, degraded: bool) -> AppBadge {
    categories.retain(|c| c.unread > 0 || c.muted > 0 || c.mentions > 0);
    categories.sort_by(|a, b| a.category.cmp(&b.category));
    let total = categories.iter().map(|c| c.unread).sum();
    let muted = categories.iter().map(|c| c.muted).sum();
    let mentions = categories.iter().map(|c| c.mentions).sum();
    AppBadge { total, muted, mentions, categories, degraded }
}

/// The user has no such conversation.
pub fn unknown_conversation(conversation: &str) -> Error {
    Error::UnknownConversation(format!("no conversation {conversation:?} for this user"))
}

/// A script answered something it never sends.
pub fn malformed() -> Error {
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

/// `{'ok'|'early', read_seq, unread, mentions, badge...}` or a miss.
pub fn read_state(conversation: String, values: Vec<RedisResult>) -> Result<Loaded<ReadState>, Error> {
    Reply::new(values).loaded(|reply| {
        let read_seq = reply.number()?;
        let unread = reply.number()?;
        let mentions = reply.number()?;
        Ok(ReadState { conversation, read_seq, unread, mentions, badge: reply.badge()? })
    })
}

/// `{'ok', row..., badge...}`, `{'unknown'}`, `{'too_many_pins'}` or a miss.
pub fn conversation_state(
    conversation: &str,
    max_pins: u32,
    values: Vec<RedisResult>,
) -> Result<Loaded<ConversationState>, Error> {
    let mut reply = Reply::new(values);
    match reply.status()?.as_str() {
        "miss" => Ok(Loaded::Miss(reply.text()?)),
        "unknown" => Err(unknown_conversation(conversation)),
        "too_many_pins" => Err(Error::TooManyPins(max_pins)),
        "ok" => {
            let conversation = reply.conversation()?;
            Ok(Loaded::Ready(ConversationState { conversation, badge: reply.badge()? }))
        }
        _ => Err(malformed()),
    }
}

/// Per user of a category inventory: (user, [(conversation, last_seq, unread)]).
pub type Inventory = Vec<(String, Vec<(String, u64, u64)>)>;

/// Per user: user, n, n × (conversation, last_seq, unread).
pub fn inventory(values: Vec<RedisResult>) -> Result<Inventory, Error> {
    let mut reply = Reply::new(values);
    let mut users = Vec::new();
    while reply.0.len() > 0 {
        let user = reply.text()?;
        let n = reply.number()?;
        let rows =
            (0..n).map(|_| Ok((reply.text()?, reply.number()?, reply.number()?))).collect::<Result<_, Error>>()?;
        users.push((user, rows));
    }
    Ok(users)
}

/// `{'ok', next_cursor, badge..., count, rows...}` or a miss.
pub fn page(values: Vec<RedisResult>) -> Result<Loaded<Page>, Error> {
    Reply::new(values).loaded(|reply| {
        let next_cursor = Some(reply.text()?).filter(|c| !c.is_empty());
        let badge = reply.badge()?;
        let count = reply.number()?;
        let conversations = (0..count).map(|_| reply.conversation()).collect::<Result<_, _>>()?;
        Ok(Page { conversations, next_cursor, badge })
    })
}

/// `{'ok', badge...}` or a miss.
pub fn badge_only(values: Vec<RedisResult>) -> Result<Loaded<AppBadge>, Error> {
    Reply::new(values).loaded(|reply| reply.badge())
}

/// A single count.
pub fn count(values: Vec<RedisResult>) -> Result<u32, Error> {
    let n = Reply::new(values).number()?;
    u32::try_from(n).map_err(|_| malformed())
}

/// A flat list of texts (users' versions, a walk's cursor and users).
pub fn texts(values: Vec<RedisResult>) -> Result<Vec<String>, Error> {
    let mut reply = Reply::new(values);
    let mut texts = Vec::new();
    while reply.0.len() > 0 {
        texts.push(reply.text()?);
    }
    Ok(texts)
}

/// What the rebuild script did for one user.
pub struct Rebuilt {
    pub user: String,
    /// False when the user's state moved since the truth was read.
    pub done: bool,
    pub drifted: bool,
    pub max_drift: u64,
    /// (conversation or `badge:<category>`, unread in Redis, unread in truth)
    pub drifts: Vec<(String, u64, u64)>,
}

/// Per user: user, 'ok'|'moved', drifted, max drift, n, n × (what, redis, truth).
pub fn rebuilt(values: Vec<RedisResult>) -> Result<Vec<Rebuilt>, Error> {
    let mut reply = Reply::new(values);
    let mut users = Vec::new();
    while reply.0.len() > 0 {
        let user = reply.text()?;
        let done = reply.status()? == "ok";
        let drifted = reply.number()? == 1;
        let max_drift = reply.number()?;
        let n = reply.number()?;
        let drifts =
            (0..n).map(|_| Ok((reply.text()?, reply.number()?, reply.number()?))).collect::<Result<_, Error>>()?;
        users.push(Rebuilt { user, done, drifted, max_drift, drifts });
    }
    Ok(users)
}
