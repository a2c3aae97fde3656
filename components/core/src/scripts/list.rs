//! `list.lua`: one page of the user's conversations, and the badge.

use crate::Error;
use crate::bindings::unread::core::types::{Conversation, Page};
use crate::config::Limits;
use crate::keys::UserKeys;
use crate::script::{Call, Lua, Reply, Script, lua, malformed};
use crate::scripts::Loaded;
use crate::state;

/// Where a list page ends: `<section>.<score>.<conversation>` of the last
/// row served (section 1: pinned). URL-safe as it is: a conversation id
/// outside `A-Z a-z 0-9 . _ -` is written as `~` and its bytes in hex.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListCursor {
    pub section: u8,
    pub score: u64,
    pub conversation: String,
}

impl ListCursor {
    /// The cursor after `row`.
    pub fn after(row: &Conversation) -> Self {
        ListCursor {
            section: row.pinned.into(),
            score: state::score(row.ts, row.last_seq),
            conversation: row.id.clone(),
        }
    }

    /// Parses a cursor this service issued.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let invalid = || Error::Invalid("cursor is not one this service issued".into());
        let mut parts = text.splitn(3, '.');
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
        if score > crate::MAX_EXACT {
            return Err(invalid());
        }
        let conversation = match conversation.strip_prefix('~') {
            Some(hex) => from_hex(hex).ok_or_else(invalid)?,
            None if plain(conversation) => conversation.to_string(),
            None => return Err(invalid()),
        };
        Ok(ListCursor { section, score, conversation })
    }

    /// The cursor as the API gives it.
    pub fn text(&self) -> String {
        let conversation = if plain(&self.conversation) {
            self.conversation.clone()
        } else {
            let hex: String = self.conversation.bytes().map(|b| format!("{b:02x}")).collect();
            format!("~{hex}")
        };
        format!("{}.{}.{conversation}", self.section, self.score)
    }

    /// Where a row stands in list order (greater comes first).
    pub fn position(row: &Conversation) -> (u8, u64, &str) {
        (row.pinned.into(), state::score(row.ts, row.last_seq), &row.id)
    }
}

/// Whether a conversation id goes into a cursor as it is.
fn plain(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The id written as lower-case hex by [`ListCursor::text`].
fn from_hex(hex: &str) -> Option<String> {
    if hex.is_empty() || !hex.len().is_multiple_of(2) || hex.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    let bytes = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok());
    let id = String::from_utf8(bytes.collect::<Option<Vec<u8>>>()?).ok()?;
    (!plain(&id)).then_some(id)
}

/// A page of `limit` rows after `after`, of `category` only if given.
pub struct List<'a> {
    pub tenant: &'a str,
    pub user: &'a str,
    pub limit: u32,
    pub after: Option<&'a ListCursor>,
    pub category: Option<&'a str>,
    pub require_loaded: bool,
    /// What the user keeps, as their large conversations catch up.
    pub limits: Limits,
}

impl Script for List<'_> {
    type Reply = Loaded<Page>;
    const WAITS_FOR_REPLICAS: bool = false;

    fn lua() -> &'static Lua {
        lua!("list.lua")
    }

    fn encode(&self, call: &mut Call) {
        UserKeys::new(self.tenant, self.user).encode(call);
        call.arg("limit", self.limit);
        match self.after {
            Some(after) => {
                call.arg("section", u32::from(after.section));
                call.arg("score", after.score);
                call.arg("conversation", after.conversation.as_str());
            }
            None => {
                call.arg("section", "");
                call.arg("score", "");
                call.arg("conversation", "");
            }
        }
        call.arg("category", self.category.unwrap_or_default());
        call.arg("require_loaded", self.require_loaded);
        call.arg("max_conversations", self.limits.max_conversations);
        call.arg("max_kept", self.limits.max_kept);
        call.arg("head_ttl", crate::HEAD_TTL);
        call.logs(self.tenant);
    }

    fn decode(&self, reply: &mut Reply) -> Result<Self::Reply, Error> {
        reply.loaded(|reply, status| {
            if status != "ok" {
                return Err(malformed());
            }
            let more = reply.flag()?;
            let badge = reply.badge()?;
            let count = reply.number()?;
            let conversations: Vec<Conversation> =
                (0..count).map(|_| reply.conversation()).collect::<Result<_, _>>()?;
            let next_cursor = conversations.last().filter(|_| more).map(|row| ListCursor::after(row).text());
            Ok(Page { conversations, next_cursor, badge })
        })
    }
}
