//! Request bodies and query strings, strictly parsed.

use http_body_util::{BodyExt, Limited};
use serde::de::DeserializeOwned;
use spin_sdk::http::{Request, StatusCode};

use crate::{Identifier, Problem};

/// Bodies above this are refused with 413 before parsing.
pub const MAX_BODY: usize = 64 * 1024;

/// Reads the whole body (at most [`MAX_BODY`]) and parses it as `T`.
/// Unknown fields, wrong types and duplicate keys are refused by `T`'s
/// `#[serde(deny_unknown_fields)]` derive.
pub async fn json_body<T: DeserializeOwned>(request: Request) -> Result<T, Problem> {
    parse(&read(request).await?)
}

/// Like [`json_body`], but an empty body stands for `T::default()`.
pub async fn json_body_or_empty<T: DeserializeOwned + Default>(request: Request) -> Result<T, Problem> {
    let bytes = read(request).await?;
    if bytes.is_empty() { Ok(T::default()) } else { parse(&bytes) }
}

/// The body; a POST takes no query parameters.
async fn read(request: Request) -> Result<bytes::Bytes, Problem> {
    query(&request, &[])?;
    let too_large = || {
        Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("the body must be at most {MAX_BODY} bytes"),
        )
    };
    let declared = request.headers().get("content-length").and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY) {
        return Err(too_large());
    }
    let bytes = Limited::new(request.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                too_large()
            } else {
                Problem::bad_request("invalid_body", "the body could not be read")
            }
        })?
        .to_bytes();
    Ok(bytes)
}

fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Problem> {
    // Syntax first, so that the codes tell "not JSON" from "not the expected object".
    let text = std::str::from_utf8(bytes).map_err(|_| Problem::bad_request("invalid_json", "the body is not UTF-8"))?;
    if nesting(bytes) > MAX_NESTING {
        return Err(Problem::bad_request("invalid_json", format!("the body is nested deeper than {MAX_NESTING}")));
    }
    serde_json::from_str::<serde::de::IgnoredAny>(text)
        .map_err(|e| Problem::bad_request("invalid_json", e.to_string()))?;
    serde_json::from_str::<NoRepeatedKeys>(text).map_err(|e| Problem::bad_request("invalid_request", e.to_string()))?;
    if !text.trim_start().starts_with('{') {
        return Err(Problem::bad_request("invalid_request", "the body must be a JSON object"));
    }
    let parsed = serde_json::from_str(text).map_err(|e| Problem::bad_request("invalid_request", e.to_string()))?;
    note_tenant_of(text);
    Ok(parsed)
}

/// A service call names its tenant in the body's `tenant` field; once the
/// whole body was accepted, that tenant goes into the request's log line.
fn note_tenant_of(text: &str) {
    #[derive(serde::Deserialize)]
    struct Tenant<'a> {
        #[serde(borrow)]
        tenant: Option<std::borrow::Cow<'a, str>>,
    }
    if let Ok(Tenant { tenant: Some(tenant) }) = serde_json::from_str::<Tenant>(text)
        && Identifier::parse("tenant", &tenant).is_ok()
    {
        crate::serve::note_tenant(&tenant);
    }
}

/// The query string as (name, value) pairs, percent-decoded; refuses names
/// not in `allowed` and repeated names.
pub fn query(request: &Request, allowed: &[&str]) -> Result<Vec<(String, String)>, Problem> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for (name, value) in form_urlencoded::parse(request.uri().query().unwrap_or("").as_bytes()) {
        if !allowed.contains(&name.as_ref()) {
            return Err(Problem::bad_request(
                "invalid_query",
                format!("unknown query parameter {name:?}; allowed: {allowed:?}"),
            ));
        }
        if pairs.iter().any(|(n, _)| *n == name) {
            return Err(Problem::bad_request("invalid_query", format!("query parameter {name:?} is given twice")));
        }
        pairs.push((name.into_owned(), value.into_owned()));
    }
    Ok(pairs)
}

/// Deeper bodies are refused before parsing (no request needs more than a few levels).
const MAX_NESTING: usize = 64;

/// The deepest nesting of arrays and objects (brackets inside strings aside).
fn nesting(bytes: &[u8]) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0, false, false);
    for &b in bytes {
        match (in_string, escaped, b) {
            (true, true, _) => escaped = false,
            (true, false, b'\\') => escaped = true,
            (true, false, b'"') => in_string = false,
            (true, false, _) => {}
            (false, _, b'"') => in_string = true,
            (false, _, b'[' | b'{') => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            (false, _, b']' | b'}') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Any JSON value whose objects, at every depth, name each key once (a
/// repeated key would otherwise silently keep its last value).
struct NoRepeatedKeys;

impl<'de> serde::Deserialize<'de> for NoRepeatedKeys {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NoRepeatedKeys)
    }
}

impl<'de> serde::de::Visitor<'de> for NoRepeatedKeys {
    type Value = NoRepeatedKeys;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_str<E>(self, _: &str) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_unit<E>(self) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut items: A) -> Result<Self, A::Error> {
        while items.next_element::<NoRepeatedKeys>()?.is_some() {}
        Ok(self)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut entries: A) -> Result<Self, A::Error> {
        let mut keys = std::collections::HashSet::new();
        while let Some(key) = entries.next_key::<String>()? {
            if !keys.insert(key.clone()) {
                return Err(serde::de::Error::custom(format!("the key {key:?} is repeated")));
            }
            entries.next_value::<NoRepeatedKeys>()?;
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> Option<String> {
        parse::<serde_json::Value>(text.as_bytes()).err().map(|p| p.code.to_string())
    }

    #[test]
    fn repeated_keys_are_refused_at_any_depth() {
        assert_eq!(refused(r#"{"a":1,"a":2}"#).as_deref(), Some("invalid_request"));
        assert_eq!(refused(r#"{"p":{"t":"a","t":"b"}}"#).as_deref(), Some("invalid_request"));
        assert_eq!(refused(r#"{"p":[{"t":1},{"t":2}]}"#), None);
    }

    #[test]
    fn deep_nesting_is_not_json() {
        assert_eq!(refused(&format!(r#"{{"a":"{}"}}"#, "[{".repeat(100))), None, "brackets in strings do not nest");
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(refused(&deep).as_deref(), Some("invalid_json"));
        let objects = format!("{}1{}", r#"{"a":"#.repeat(200), "}".repeat(200));
        assert_eq!(refused(&objects).as_deref(), Some("invalid_json"));
    }
}
