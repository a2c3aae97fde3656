//! Spin's variables conformance component, on spin-sdk 7 (`spin:variables@3.0.0`).
//!
//! It expects exactly one component variable, `variable = "value"`. The answer
//! is `200` with an empty body when every check holds, `500` with the text of
//! the first failed check otherwise.
//!
//! Paths:
//! - `/` (and any other): the suite's checks: the defined variable's value,
//!   `undefined` for a valid name without a value, `invalid-name` for names
//!   that break Spin's rules; plus the rest of those rules (lowercase ASCII
//!   letters, digits and single underscores, starting with a letter and not
//!   ending with an underscore) and the texts of the undefined errors.
//! - `/error-text`: the exact texts Spin puts in `invalid-name` errors.
//! - `/environment`: the manifest's `environment` table reaches the
//!   component as its environment (`CONFORMANCE_GREETING=hello`).

use spin_sdk::http::{HeaderMap, HeaderName, HeaderValue, IntoResponse, Request, StatusCode};
use spin_sdk::http_service;
use spin_sdk::variables::{Error, get};

type Checked = Result<(), String>;

#[http_service]
async fn handler(request: Request) -> impl IntoResponse {
    let outcome = match request.uri().path() {
        "/error-text" => error_texts().await,
        "/environment" => environment(),
        _ => conformance().await,
    };
    match outcome {
        Ok(()) => answer(StatusCode::OK, String::new()),
        Err(failure) => answer(StatusCode::INTERNAL_SERVER_ERROR, failure),
    }
}

/// The response, with its length declared in `content-length`.
///
/// The suite's components are WASIp2 ones, for which the host knows an empty
/// body's length and sends `Content-Length: 0`, as the suite expects. A WASIp3
/// body is a stream: Spin (like the host, with the same wasmtime-wasi-http)
/// learns its length only from this header; without it the host sent the
/// empty body chunked.
fn answer(status: StatusCode, body: String) -> impl IntoResponse {
    let mut headers = HeaderMap::new();
    headers.insert(HeaderName::from_static("content-length"), HeaderValue::from(body.len()));
    (status, headers, body)
}

async fn conformance() -> Checked {
    let value = get("variable").await;
    if !matches!(&value, Ok(v) if v == "value") {
        return Err(format!("get(\"variable\") returned {value:?}, not Ok(\"value\")"));
    }
    for name in ["non_existent", "a", "variable2", "var_iable"] {
        let result = get(name).await;
        if !matches!(&result, Err(Error::Undefined(_))) {
            return Err(format!("get({name:?}) returned {result:?}, not undefined"));
        }
    }
    let result = get("non_existent").await;
    let expected = "no variable for \"test\".\"non_existent\"";
    if !matches!(&result, Err(Error::Undefined(text)) if text == expected) {
        return Err(format!("get(\"non_existent\") returned {result:?}, not undefined({expected:?})"));
    }
    let invalid = [
        // The suite's three.
        "invalid-name",
        "invalid!name",
        "4invalidname",
        // The rest of Spin's rules.
        "",
        "Variable",
        "VARIABLE",
        "_variable",
        "variable_",
        "vari__able",
        "variablé",
        "vari able",
    ];
    for name in invalid {
        let result = get(name).await;
        if !matches!(&result, Err(Error::InvalidName(_))) {
            return Err(format!("get({name:?}) returned {result:?}, not invalid-name"));
        }
    }
    Ok(())
}

/// Spin's `invalid-name` texts: the name quoted, a colon, and the rule broken.
async fn error_texts() -> Checked {
    let cases = [
        (
            "invalid-name",
            "\"invalid-name\": invalid character '-'. Variable names may contain only lower-case letters, numbers, and underscores.",
        ),
        (
            "invalid!name",
            "\"invalid!name\": invalid character '!'. Variable names may contain only lower-case letters, numbers, and underscores.",
        ),
        ("4invalidname", "\"4invalidname\": must start with a lowercase ASCII letter"),
        ("", "\"\": must not be empty"),
        ("variable_", "\"variable_\": must end with a lowercase ASCII letter or digit"),
        ("vari__able", "\"vari__able\": must not contain multiple consecutive underscores"),
    ];
    let mut wrong = Vec::new();
    for (name, expected) in cases {
        let result = get(name).await;
        if !matches!(&result, Err(Error::InvalidName(text)) if text == expected) {
            wrong.push(format!("get({name:?}) returned {result:?}, not invalid-name({expected:?})"));
        }
    }
    if wrong.is_empty() { Ok(()) } else { Err(wrong.join("\n")) }
}

/// The component's environment holds what the manifest's `environment` sets.
fn environment() -> Checked {
    let greeting = std::env::var("CONFORMANCE_GREETING");
    if greeting.as_deref() != Ok("hello") {
        return Err(format!("CONFORMANCE_GREETING is {greeting:?}, not \"hello\""));
    }
    Ok(())
}
