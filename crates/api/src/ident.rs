//! Validated input values. Rejecting anything else here keeps hostile keys
//! (with `{`, `}`, `:`, `*`, spaces) out of Redis key names.

use serde::{Deserialize, Deserializer, de::Error as _};

/// A tenant, user or conversation id: 1-64 of `[A-Za-z0-9._-]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identifier(String);

/// A category: 1-32 of `[a-z0-9_-]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Category(String);

/// A sequence number: 1 ..= 2^53 - 1 (exact in JSON and in Redis' Lua).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seq(u64);

/// The largest integer every JSON client and Lua represent exactly.
pub const MAX_SEQ: u64 = (1 << 53) - 1;

impl Identifier {
    /// Validates `text` as an identifier; the error says what is wrong.
    pub fn parse(what: &str, text: &str) -> Result<Self, String> {
        let ok = (1..=64).contains(&text.len())
            && text.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if ok {
            Ok(Identifier(text.to_string()))
        } else {
            Err(format!("{what} must be 1-64 characters of A-Z a-z 0-9 . _ -, got {text:?}"))
        }
    }

    /// The identifier's text.
    pub fn into_string(self) -> String {
        self.0
    }
}

/// `ids` as strings, if there are `min..=max` of them; else 400 naming `what`.
pub fn id_list(what: &str, ids: Vec<Identifier>, min: usize, max: usize) -> Result<Vec<String>, crate::Problem> {
    if !(min..=max).contains(&ids.len()) {
        return Err(crate::Problem::bad_request("invalid_request", format!("{what} must list {min}-{max} users")));
    }
    Ok(ids.into_iter().map(Identifier::into_string).collect())
}

impl Category {
    /// Validates `text` as a category.
    pub fn parse(text: &str) -> Result<Self, String> {
        let ok = (1..=32).contains(&text.len())
            && text.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'-'));
        if ok {
            Ok(Category(text.to_string()))
        } else {
            Err(format!("category must be 1-32 characters of a-z 0-9 _ -, got {text:?}"))
        }
    }

    /// The category's text.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl Default for Category {
    fn default() -> Self {
        Category("chat".into())
    }
}

impl Seq {
    /// Validates a sequence number.
    pub fn new(value: u64) -> Result<Self, String> {
        if (1..=MAX_SEQ).contains(&value) {
            Ok(Seq(value))
        } else {
            Err(format!("seq must be between 1 and {MAX_SEQ}, got {value}"))
        }
    }

    /// The number.
    pub fn get(self) -> u64 {
        self.0
    }
}

impl<'de> Deserialize<'de> for Identifier {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Identifier::parse("identifier", &text).map_err(D::Error::custom)
    }
}

impl<'de> Deserialize<'de> for Category {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Category::parse(&text).map_err(D::Error::custom)
    }
}

impl<'de> Deserialize<'de> for Seq {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Seq::new(u64::deserialize(deserializer)?).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_accept_the_documented_alphabet_only() {
        assert!(Identifier::parse("id", "Ab0._-").is_ok());
        assert!(Identifier::parse("id", &"a".repeat(64)).is_ok());
        for bad in ["", "a{b", "a}b", "a:b", "a*b", "a b", "é", &"a".repeat(65)] {
            assert!(Identifier::parse("id", bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn categories_are_lowercase() {
        assert!(Category::parse("system_2-x").is_ok());
        assert!(Category::parse("Chat").is_err());
        assert!(Category::parse(&"a".repeat(33)).is_err());
    }

    #[test]
    fn seq_is_positive_and_exact() {
        assert!(Seq::new(0).is_err());
        assert!(Seq::new(MAX_SEQ).is_ok());
        assert!(Seq::new(MAX_SEQ + 1).is_err());
    }
}
