//! Redis key names: built here and nowhere else. Scripts receive every key
//! they touch in `KEYS`, so Redis (and a cluster client) can see them.
//!
//! Every key is versioned (`un:v2`) and carries tenant and user in one
//! Cluster hash tag (`{T:U}`), so one user's keys always share a slot.
//!
//! Identifiers are any text without control characters, so each goes into a
//! name [`escape`]d: the bytes that would end the hash tag (`}`), split it
//! (`:`), act in a `SCAN` pattern (`*`, `?`, `[`, `]`, `\`) or escape
//! (`%`) become `%XX`. Distinct identifiers give distinct names, and the
//! identifiers of the old alphabet (`A-Z a-z 0-9 . _ -`) keep theirs.

use crate::script::Call;

/// The layout version in every key name: a new layout gets a new prefix, so
/// it never reads state written under another.
const PREFIX: &str = "un:v2";

/// The names of a user's keys as the scripts declare them (`USER_KEYS` in
/// `prelude.lua`), in that order.
pub const USER_KEYS: [&str; 9] = ["list", "conv", "kept", "age", "badge", "pinned", "marks", "meta", "groups"];

/// The keys of one user's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserKeys {
    prefix: String,
}

impl UserKeys {
    /// The keys of `user` of `tenant`.
    pub fn new(tenant: &str, user: &str) -> Self {
        UserKeys { prefix: format!("{PREFIX}:{{{}:{}}}:", escape(tenant), escape(user)) }
    }

    /// One of the user's keys, by its name in [`USER_KEYS`].
    pub fn key(&self, name: &str) -> String {
        match name {
            "age" => format!("{}kept:age", self.prefix),
            _ => format!("{}{name}", self.prefix),
        }
    }

    /// Appends all the user's keys, named as the scripts declare them.
    pub fn encode(&self, call: &mut Call) {
        for name in USER_KEYS {
            call.key(name, self.key(name));
        }
    }

    /// Appends only the user's `meta` key.
    pub fn encode_meta(&self, call: &mut Call) {
        call.key("meta", self.key("meta"));
    }
}

/// Redis Cluster's hash slot of `key`: CRC16 (XMODEM) of its hash tag (the
/// text between the first `{` and the next `}`, if not empty) or of the
/// whole key, modulo 16384.
pub fn slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let tagged = bytes.iter().position(|&b| b == b'{').and_then(|open| {
        let close = bytes[open + 1..].iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &bytes[open + 1..open + 1 + close])
    });
    let mut crc: u16 = 0;
    for &byte in tagged.unwrap_or(bytes) {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc & 0x3FFF
}

/// The names of a conversation's keys as the scripts declare them
/// (`CONVERSATION_KEYS` in `prelude.lua`), in that order.
pub const CONVERSATION_KEYS: [&str; 6] = ["head", "recalls", "earlier", "group", "joined", "unannounced"];

/// The keys of one conversation, hash-tagged by tenant and conversation (one
/// slot): `head`, its last message with its preview, stored once however
/// many members list it; `recalls`, the previews recalls gave for messages
/// not touched yet; `earlier`, on Redis Cluster, the messages the head held
/// before, for a few seconds (a list page there reads its previews in a
/// round of its own); `group`, a large conversation's log (read diffusion);
/// `joined`, who joined it lately while it was not large, for the message
/// that makes it large to take along; `unannounced`, a large conversation's
/// message a rebuild wrote into the head before its touch came, for the
/// touch to announce. The `head:` prefix keeps them apart from every user's
/// keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConversationKeys {
    head: String,
}

impl ConversationKeys {
    /// The keys of `conversation` of `tenant`.
    pub fn new(tenant: &str, conversation: &str) -> Self {
        Self::under(&conversations_prefix(tenant), conversation)
    }

    /// The keys of `conversation`, named from its tenant's
    /// [`conversations_prefix`].
    pub fn under(prefix: &str, conversation: &str) -> Self {
        ConversationKeys { head: format!("{prefix}{}}}", escape(conversation)) }
    }

    /// One of the conversation's keys, by its name in [`CONVERSATION_KEYS`].
    pub fn key(&self, name: &str) -> String {
        match name {
            "head" => self.head.clone(),
            _ => format!("{}:{name}", self.head),
        }
    }

    /// Appends all the conversation's keys, named as the scripts declare them.
    pub fn encode(&self, call: &mut Call) {
        for name in CONVERSATION_KEYS {
            call.key(name, self.key(name));
        }
    }

    /// Appends the conversation's keys named `names`, in that order.
    pub fn encode_only(&self, call: &mut Call, names: &[&'static str]) {
        for &name in names {
            call.key(name, self.key(name));
        }
    }
}

/// How the head key of every conversation of `tenant` begins: the head's
/// name is this, the [`escape`]d conversation and `}`. A script that
/// catches a member up with large conversations names their keys from it
/// (`conversation_keys` in `prelude.lua`, held to [`ConversationKeys`] by
/// a unit test), so that a membership record is a number.
pub fn conversations_prefix(tenant: &str) -> String {
    format!("{PREFIX}:head:{{{}:", escape(tenant))
}

/// How many clock keys a tenant's large conversations are spread over: a
/// member's catch-up reads at most this many, however many large
/// conversations it is in, and on Redis Cluster they spread over the nodes.
pub const CLOCK_BUCKETS: u32 = 16;

/// How the names of `tenant`'s clock keys begin: a clock's name is this,
/// its bucket ([`clock_bucket`]) and `}`. Each clock is a hash, large
/// conversation -> its log's counter, so a member's catch-up learns which
/// of its large conversations moved from a few reads and reads only their
/// logs (`clock_key` in `prelude.lua`, held to [`clock`] by a unit test).
pub fn clocks_prefix(tenant: &str) -> String {
    format!("{PREFIX}:clock:{{{}:", escape(tenant))
}

/// The clock key that holds `conversation`'s log counter.
pub fn clock(tenant: &str, conversation: &str) -> String {
    clock_in(&clocks_prefix(tenant), conversation)
}

/// The clock key that holds `conversation`'s log counter, among the clocks
/// whose names begin with `clocks` (a [`clocks_prefix`]).
pub fn clock_in(clocks: &str, conversation: &str) -> String {
    format!("{clocks}{}}}", clock_bucket(conversation))
}

/// Which of the tenant's clocks holds `conversation`: a hash of its bytes
/// (the same in Lua, whose numbers are doubles: every step stays below
/// 2^31).
pub fn clock_bucket(conversation: &str) -> u32 {
    let hash = conversation.bytes().fold(0u32, |hash, byte| (hash * 31 + u32::from(byte)) % 65_521);
    hash % CLOCK_BUCKETS
}

/// The pattern of every `meta` key of a tenant's users: a walk without a SQL
/// store finds the users that have state by it.
pub fn meta_pattern(tenant: &str) -> String {
    format!("{PREFIX}:{{{}:*}}:meta", escape(tenant))
}

/// The user whose `meta` key `key` is, if it is one of `tenant`'s.
pub fn user_of_meta_key(tenant: &str, key: &str) -> Option<String> {
    let inner = key.strip_prefix(PREFIX)?.strip_prefix(":{")?.strip_suffix("}:meta")?;
    let user = inner.strip_prefix(escape(tenant).as_str())?.strip_prefix(':')?;
    unescape(user).filter(|user| !user.is_empty())
}

/// The record of the data set a cache-only unread writes to (one per Redis
/// data set, whatever the tenant).
pub fn dataset_key() -> String {
    format!("{PREFIX}:dataset")
}

/// The pub/sub channel of a tenant's change events (the tenant [`escape`]d,
/// so that a `PSUBSCRIBE` on it matches that tenant only).
pub fn events_channel(tenant: &str) -> String {
    format!("unread:events:{}", escape(tenant))
}

/// Whether `byte` goes into key names as it is.
fn kept_as_is(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-' | b'@' | b'|' | b'+' | b'#' | b'=' | b'/')
}

/// `id` as it goes into key and channel names: bytes outside the kept set
/// as `%XX` (upper-case hex). One-to-one, so no identifier reaches
/// another's keys.
pub fn escape(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for &byte in id.as_bytes() {
        if kept_as_is(byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The identifier [`escape`] turned into `text`; `None` if `text` is not
/// one of its outputs.
pub fn unescape(text: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&byte, tail)) = rest.split_first() {
        if byte == b'%' {
            let hex = std::str::from_utf8(tail.get(..2)?).ok()?;
            let decoded = u8::from_str_radix(hex, 16).ok()?;
            if kept_as_is(decoded) || hex.bytes().any(|b| b.is_ascii_lowercase()) {
                return None;
            }
            bytes.push(decoded);
            rest = &tail[2..];
        } else if kept_as_is(byte) {
            bytes.push(byte);
            rest = tail;
        } else {
            return None;
        }
    }
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_users_keys_share_one_hash_tag() {
        let keys = UserKeys::new("acme", "u2");
        for name in USER_KEYS {
            assert!(keys.key(name).starts_with("un:v2:{acme:u2}:"), "{name}");
        }
        assert_eq!(keys.key("age"), "un:v2:{acme:u2}:kept:age");
    }

    #[test]
    fn a_conversations_keys_share_a_slot_apart_from_every_users_keys() {
        let keys = ConversationKeys::new("acme", "c:1");
        assert_eq!(keys.key("head"), "un:v2:head:{acme:c%3A1}");
        assert_eq!(keys.key("recalls"), "un:v2:head:{acme:c%3A1}:recalls");
        assert_eq!(keys.key("earlier"), "un:v2:head:{acme:c%3A1}:earlier");
        assert_ne!(ConversationKeys::new("a:b", "c"), ConversationKeys::new("a", "b:c"));
        // A user named like the conversation has no key of the conversation's names.
        let (user, conversation) = (UserKeys::new("acme", "c"), ConversationKeys::new("acme", "c"));
        for name in CONVERSATION_KEYS {
            assert!(USER_KEYS.iter().all(|mine| user.key(mine) != conversation.key(name)));
            assert_eq!(user_of_meta_key("acme", &conversation.key(name)), None);
        }
    }

    #[test]
    fn a_tenants_clocks_are_a_few_keys_apart_from_users_and_conversations() {
        assert_eq!(clock("acme", "c1"), format!("un:v2:clock:{{acme:{}}}", clock_bucket("c1")));
        let buckets: std::collections::BTreeSet<u32> = (0..200).map(|i| clock_bucket(&format!("g{i}"))).collect();
        assert_eq!(buckets.len(), CLOCK_BUCKETS as usize, "{buckets:?}");
        assert_eq!(user_of_meta_key("acme", &clock("acme", "c1")), None);
        assert_ne!(clock("a:b", "c"), clock("a", "b:c"));
    }

    #[test]
    fn walks_read_users_back_from_meta_keys() {
        let key = UserKeys::new("acme", "u.2").key("meta");
        assert_eq!(user_of_meta_key("acme", &key).as_deref(), Some("u.2"));
        assert_eq!(user_of_meta_key("other", &key), None);
        assert_eq!(user_of_meta_key("acme", "un:v2:{acme:u2}:list"), None);
        assert_eq!(meta_pattern("acme"), "un:v2:{acme:*}:meta");
    }

    #[test]
    fn identifiers_of_the_old_alphabet_keep_their_names() {
        assert_eq!(UserKeys::new("acme", "U-1.x_y").key("list"), "un:v2:{acme:U-1.x_y}:list");
        assert_eq!(events_channel("acme"), "unread:events:acme");
    }

    #[test]
    fn separators_tags_and_patterns_cannot_reach_another_users_keys() {
        // Without escaping, ("a:b", "c") and ("a", "b:c") would share keys.
        assert_ne!(UserKeys::new("a:b", "c").key("list"), UserKeys::new("a", "b:c").key("list"));
        for (tenant, user) in [("acme", "u}:x"), ("ac{me", "u"), ("acme", "*"), ("acme", "a[b]?\\c"), ("acme", "50%")] {
            let key = UserKeys::new(tenant, user).key("meta");
            let tag = key.strip_prefix("un:v2:{").and_then(|rest| rest.strip_suffix("}:meta")).unwrap();
            assert!(!tag.contains(['{', '}', '*', '?', '[', ']', '\\']), "{key}");
            assert_eq!(tag.matches(':').count(), 1, "{key}");
            assert_eq!(user_of_meta_key(tenant, &key).as_deref(), Some(user));
        }
        assert_eq!(meta_pattern("a*"), "un:v2:{a%2A:*}:meta");
        assert_eq!(events_channel("t*"), "unread:events:t%2A");
    }

    #[test]
    fn real_world_identifiers_round_trip() {
        for id in ["alice@example.com", "auth0|64f1c2", "#general", "ünïcødé 名前", "a b", "%41", "x%"] {
            let escaped = escape(id);
            assert!(escaped.bytes().all(|b| b.is_ascii_graphic()), "{escaped}");
            assert_eq!(unescape(&escaped).as_deref(), Some(id), "{escaped}");
        }
        assert_eq!(escape("alice@example.com"), "alice@example.com");
        assert_eq!(escape("a:b"), "a%3Ab");
        // Only escape's own outputs decode: one identifier, one name.
        for foreign in ["%41", "%3a", "a%3", "a%", "a:b", "%ZZ", "%FF"] {
            assert_eq!(unescape(foreign), None, "{foreign}");
        }
    }
}
