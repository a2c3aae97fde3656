//! Validated input values. Identifiers may hold any printable text (emails,
//! `auth0|…`, `#general`); the core escapes what Redis key names cannot
//! carry, so no identifier reaches another's keys.

use serde::{Deserialize, Deserializer, de::Error as _};

/// A tenant, user or conversation id: 1-128 bytes of UTF-8 without control characters.
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

/// The longest identifier, in bytes of UTF-8.
pub const MAX_IDENTIFIER_BYTES: usize = 128;

/// What an identifier may be, for error messages.
pub const IDENTIFIER_RULE: &str = "1-128 bytes of UTF-8 without control characters, and not `*` alone";

/// The one id no identifier may be: the SQL store's mentions name every
/// member (`@all`) with it.
const ALL: &str = "*";

impl Identifier {
    /// Validates `text` as an identifier; the error says what is wrong.
    pub fn parse(what: &str, text: &str) -> Result<Self, String> {
        if (1..=MAX_IDENTIFIER_BYTES).contains(&text.len()) && !text.chars().any(char::is_control) && text != ALL {
            Ok(Identifier(text.to_string()))
        } else {
            Err(format!("{what} must be {IDENTIFIER_RULE}"))
        }
    }

    /// Validates one percent-encoded segment of a URL path (`alice%40example.com`)
    /// as an identifier; the error says what is wrong.
    pub fn from_path_segment(what: &str, segment: &str) -> Result<Self, String> {
        let bad = || format!("{what} in the path must be percent-encoded UTF-8");
        let mut bytes = Vec::with_capacity(segment.len());
        let mut rest = segment.as_bytes();
        while let Some((&byte, tail)) = rest.split_first() {
            if byte == b'%' {
                let hex = tail.get(..2).and_then(|h| std::str::from_utf8(h).ok()).ok_or_else(bad)?;
                bytes.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
                rest = &tail[2..];
            } else {
                bytes.push(byte);
                rest = tail;
            }
        }
        Identifier::parse(what, &String::from_utf8(bytes).map_err(|_| bad())?)
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
    fn identifiers_are_printable_text_of_up_to_128_bytes() {
        for good in
            ["Ab0._-", "alice@example.com", "auth0|64f1c2", "#general", "a{b}:c*", "a b", "é名", &"a".repeat(128)]
        {
            assert!(Identifier::parse("id", good).is_ok(), "{good:?} refused");
        }
        // 43 three-byte characters are 129 bytes.
        for bad in ["", "*", "a\nb", "a\0b", "tab\t", "del\u{7f}", "c1\u{85}", &"a".repeat(129), &"名".repeat(43)] {
            assert!(Identifier::parse("id", bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn path_segments_are_percent_decoded() {
        let id = |segment: &str| Identifier::from_path_segment("conversation", segment).map(Identifier::into_string);
        assert_eq!(id("c42").unwrap(), "c42");
        assert_eq!(id("alice%40example.com").unwrap(), "alice@example.com");
        assert_eq!(id("%23general%2Fold").unwrap(), "#general/old");
        assert_eq!(id("%C3%BC").unwrap(), "ü");
        assert_eq!(id("a+b").unwrap(), "a+b", "a path's + is not a space");
        for bad in ["", "%", "%4", "%zz", "%FF", "a%0Ab"] {
            assert!(id(bad).is_err(), "{bad:?} accepted");
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
