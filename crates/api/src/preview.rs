//! Previews: the JSON object a touch (or a recall) gives, stored compact and
//! returned as given; and its lock-screen form (a notification on a locked
//! phone shows a trimmed preview): only allow-listed fields, and the
//! text cut to a number of characters.

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::Problem;

/// Stored previews are at most this many bytes of compact JSON.
const MAX_PREVIEW: usize = 1024;

/// The preview as it is stored: compact JSON text of an object of at most 1 KiB.
pub fn stored_preview(preview: &RawValue) -> Result<String, Problem> {
    let value: Map<String, Value> = serde_json::from_str(preview.get())
        .map_err(|_| Problem::bad_request("invalid_request", "preview must be a JSON object"))?;
    let text = serde_json::to_string(&value).map_err(|e| Problem::bad_request("invalid_request", e.to_string()))?;
    if text.len() > MAX_PREVIEW {
        return Err(Problem::bad_request(
            "preview_too_large",
            format!("preview must be at most {MAX_PREVIEW} bytes of JSON"),
        ));
    }
    Ok(text)
}

/// What the lock-screen form keeps.
pub struct Lockscreen {
    /// Fields kept as they are.
    pub fields: Vec<String>,
    /// `text` is kept, cut to this many characters (an ellipsis marks a cut).
    pub text_chars: usize,
}

impl Lockscreen {
    /// The lock-screen form of a stored preview (a JSON object's text).
    pub fn shape(&self, preview: &str) -> String {
        let stored: Map<String, Value> = serde_json::from_str(preview).unwrap_or_default();
        let mut kept = Map::new();
        for (name, value) in stored {
            if name == "text" {
                if let Value::String(text) = value {
                    kept.insert(name, Value::String(self.cut(&text)));
                }
            } else if self.fields.contains(&name) {
                kept.insert(name, value);
            }
        }
        Value::Object(kept).to_string()
    }

    fn cut(&self, text: &str) -> String {
        match text.char_indices().nth(self.text_chars) {
            Some((end, _)) => format!("{}…", &text[..end]),
            None => text.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lockscreen(chars: usize) -> Lockscreen {
        Lockscreen { fields: vec!["type".into(), "sender_name".into()], text_chars: chars }
    }

    #[test]
    fn keeps_allow_listed_fields_and_text_only() {
        let preview = r#"{"type":"text","sender_name":"Ann","text":"hi","phone":"+1 555","secret":{"a":1}}"#;
        assert_eq!(lockscreen(40).shape(preview), r#"{"type":"text","sender_name":"Ann","text":"hi"}"#);
    }

    #[test]
    fn cuts_text_on_a_character_boundary() {
        let preview = r#"{"text":"héllo wörld 你好世界"}"#;
        assert_eq!(lockscreen(14).shape(preview), r#"{"text":"héllo wörld 你好…"}"#);
        assert_eq!(lockscreen(16).shape(preview), r#"{"text":"héllo wörld 你好世界"}"#);
        assert_eq!(lockscreen(0).shape(preview), r#"{"text":"…"}"#);
    }

    #[test]
    fn a_text_that_is_not_a_string_goes() {
        assert_eq!(lockscreen(40).shape(r#"{"text":{"rich":true},"type":"card"}"#), r#"{"type":"card"}"#);
    }
}
