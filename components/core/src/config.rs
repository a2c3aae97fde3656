//! The core's Spin variables.

use crate::Error;

/// The per-user cap on kept conversations (`max_conversations`, default 100).
pub async fn max_conversations() -> Result<u32, Error> {
    positive("max_conversations", 100).await
}

/// The per-user cap on pinned conversations (`max_pins`, default 5).
pub async fn max_pins() -> Result<u32, Error> {
    positive("max_pins", 5).await
}

/// Drift above this (per conversation) is logged as a warning
/// (`drift_alert_threshold`, default 0: every drift is logged).
pub async fn drift_alert_threshold() -> Result<u32, Error> {
    number("drift_alert_threshold", 0).await
}

async fn positive(name: &str, default: u32) -> Result<u32, Error> {
    match number(name, default).await? {
        0 => Err(Error::Unavailable(format!("variable {name} must be at least 1"))),
        n => Ok(n),
    }
}

async fn number(name: &str, default: u32) -> Result<u32, Error> {
    let Ok(text) = spin_sdk::variables::get(name).await else {
        return Ok(default);
    };
    text.trim().parse().map_err(|_| Error::Unavailable(format!("variable {name} is not a whole number: {text:?}")))
}
