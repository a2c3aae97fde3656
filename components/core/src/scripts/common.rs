//! Reply pieces several scripts share: the badge, a conversation row, a
//! miss, and the members the SQL store must answer for.

use crate::Error;
use crate::bindings::unread::core::types::{AppBadge, CategoryUnread, Conversation, Source};
use crate::keys::UserKeys;
use crate::script::{Call, PartReply, Reply, Script, decode_parts, malformed};
use crate::state;

/// What a read gives when a SQL store backs Redis.
pub enum Loaded<T> {
    /// The user's state was in Redis.
    Ready(T),
    /// It was not (never loaded, or Redis lost it); the state's version, for
    /// a rebuild that must not overwrite a newer change.
    Miss(String),
}

impl Reply {
    /// The status word; a `miss` carries the state's version.
    pub fn loaded<T>(&mut self, ready: impl FnOnce(&mut Self, String) -> Result<T, Error>) -> Result<Loaded<T>, Error> {
        match self.text()?.as_str() {
            "miss" => Ok(Loaded::Miss(self.text()?)),
            status => ready(self, status.to_string()).map(Loaded::Ready),
        }
    }

    /// A badge: the number of fields of the badge hash, then field, value
    /// pairs (`<category>`, `<category>:m`, `<category>:@`).
    pub fn badge(&mut self) -> Result<AppBadge, Error> {
        let fields = self.number()?;
        let mut categories: Vec<CategoryUnread> = Vec::new();
        for _ in 0..fields {
            let field = self.text()?;
            // A sum can only be negative if the state was edited by hand.
            let value = self.signed()?.max(0) as u64;
            let (category, kind) = match field.rsplit_once(':') {
                Some((category, kind)) => (category.to_string(), kind.to_string()),
                None => (field, String::new()),
            };
            let index = match categories.iter().position(|c| c.category == category) {
                Some(index) => index,
                None => {
                    categories.push(CategoryUnread { category, unread: 0, muted: 0, mentions: 0 });
                    categories.len() - 1
                }
            };
            let entry = &mut categories[index];
            match kind.as_str() {
                "" => entry.unread = value,
                "m" => entry.muted = value,
                "@" => entry.mentions = value,
                _ => return Err(malformed()),
            }
        }
        Ok(badge_of(categories, crate::dataset::redis_source()))
    }

    /// A conversation row: id, category, last, read, score, unread,
    /// mentions, flags, and the preview an earlier layout kept in the state.
    /// The head's preview is read after ([`crate::scripts::Previews`]).
    pub fn conversation(&mut self) -> Result<Conversation, Error> {
        let id = self.text()?;
        let category = self.text()?;
        let last_seq = self.number()?;
        let read_seq = self.number()?;
        let score = self.number()?;
        let unread = self.number()?;
        let mentions = self.number()?;
        let flags = self.text()?;
        let legacy = self.text()?;
        Ok(Conversation {
            id,
            category,
            unread,
            last_seq,
            read_seq,
            ts: state::ts_of(score),
            preview: if legacy.is_empty() { crate::scripts::NO_PREVIEW.into() } else { legacy },
            mentions,
            muted: flags.contains('m'),
            pinned: flags.contains('p'),
            marked_unread: flags.contains('u'),
        })
    }
}

/// The badge of per-category sums: `total`, `muted` and `mentions` are their
/// sums; categories that count nothing are left out.
pub fn badge_of(mut categories: Vec<CategoryUnread>, source: Source) -> AppBadge {
    categories.retain(|c| c.unread > 0 || c.muted > 0 || c.mentions > 0);
    categories.sort_by(|a, b| a.category.cmp(&b.category));
    let total = categories.iter().map(|c| c.unread).sum();
    let muted = categories.iter().map(|c| c.muted).sum();
    let mentions = categories.iter().map(|c| c.mentions).sum();
    AppBadge { total, muted, mentions, categories, source }
}

/// The members of a call that acts on many users: each one's keys and name.
pub struct Members<'a> {
    /// The tenant.
    pub tenant: &'a str,
    /// The users, once each.
    pub users: &'a [String],
}

impl Members<'_> {
    /// One item per member: its keys, then `user` and what `extra` adds.
    pub fn encode(&self, call: &mut Call, mut extra: impl FnMut(&mut Call, &str)) {
        call.each(self.users, |item, user| {
            UserKeys::new(self.tenant, user).encode(item);
            item.arg("user", user.as_str());
            extra(item, user);
        });
    }
}

/// The members a many-user script did not write because the SQL store must
/// answer for them: a count, then the users.
pub fn unanswered(reply: &mut Reply) -> Result<Vec<String>, Error> {
    reply.texts()
}

/// The parts of a script that answers a count and the members the SQL
/// store must answer for (recall, leave), combined: the counts summed, the
/// members together.
pub fn merge_unanswered<S>(script: &S, parts: Vec<PartReply>) -> Result<(u32, Vec<String>), Error>
where
    S: Script<Reply = (u32, Vec<String>)>,
{
    let (mut count, mut users) = (0u32, Vec::new());
    for (n, unanswered) in decode_parts(script, parts)? {
        count = count.saturating_add(n);
        users.extend(unanswered);
    }
    Ok((count, users))
}
