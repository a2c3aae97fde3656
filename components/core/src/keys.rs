//! Redis key names: built here and nowhere else. Scripts receive every key
//! they touch in `KEYS`, so Redis (and a cluster client) can see them.
//!
//! Every key is versioned (`un:v2`) and carries tenant and user in one
//! Cluster hash tag (`{T:U}`), so one user's keys always share a slot.

use crate::script::Call;

/// The layout version in every key name: a new layout gets a new prefix, so
/// it never reads state written under another.
const PREFIX: &str = "un:v2";

/// The names of a user's keys as the scripts declare them (`USER_KEYS` in
/// `prelude.lua`), in that order.
pub const USER_KEYS: [&str; 8] = ["list", "conv", "kept", "age", "badge", "pinned", "marks", "meta"];

/// The keys of one user's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserKeys {
    prefix: String,
}

impl UserKeys {
    /// The keys of `user` of `tenant`.
    pub fn new(tenant: &str, user: &str) -> Self {
        UserKeys { prefix: format!("{PREFIX}:{{{tenant}:{user}}}:") }
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

/// The pattern of every `meta` key of a tenant's users: a walk without a SQL
/// store finds the users that have state by it.
pub fn meta_pattern(tenant: &str) -> String {
    format!("{PREFIX}:{{{tenant}:*}}:meta")
}

/// The user whose `meta` key `key` is, if it is one of `tenant`'s.
pub fn user_of_meta_key(tenant: &str, key: &str) -> Option<String> {
    let inner = key.strip_prefix(PREFIX)?.strip_prefix(":{")?.strip_suffix("}:meta")?;
    let user = inner.strip_prefix(tenant)?.strip_prefix(':')?;
    (!user.is_empty()).then(|| user.to_string())
}

/// The pub/sub channel of a tenant's change events.
pub fn events_channel(tenant: &str) -> String {
    format!("unread:events:{tenant}")
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
    fn walks_read_users_back_from_meta_keys() {
        let key = UserKeys::new("acme", "u.2").key("meta");
        assert_eq!(user_of_meta_key("acme", &key).as_deref(), Some("u.2"));
        assert_eq!(user_of_meta_key("other", &key), None);
        assert_eq!(user_of_meta_key("acme", "un:v2:{acme:u2}:list"), None);
        assert_eq!(meta_pattern("acme"), "un:v2:{acme:*}:meta");
    }
}
