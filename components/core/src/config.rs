//! The core's Spin variables. A variable the component does not declare
//! takes its default; one that cannot be read or parsed is an error (the
//! call answers 503 and says which), never a silent default.

use crate::Error;

/// How much each user keeps.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Conversations listed per user (`max_conversations`, default 100).
    pub max_conversations: u32,
    /// Conversations kept beyond the list with their cursors, flags and
    /// marks, oldest activity evicted first (`max_kept`, default ten times
    /// `max_conversations`).
    pub max_kept: u32,
}

impl Limits {
    /// The limits from the component's variables.
    pub async fn read() -> Result<Limits, Error> {
        let max_conversations = positive("max_conversations", 100).await?;
        let max_kept = positive("max_kept", max_conversations.saturating_mul(10)).await?;
        Ok(Limits { max_conversations, max_kept })
    }

    /// Conversations Redis holds per user, listed and kept: the rows the
    /// truth gives a user; a user with more is partial.
    pub fn held(self) -> u64 {
        u64::from(self.max_conversations) + u64::from(self.max_kept)
    }
}

/// A conversation becomes large (read diffusion: its messages are written
/// once, and each member catches up on use) when one touch names more
/// members than this (`large_group_threshold`, default 100; 0: never).
pub async fn large_group_threshold() -> Result<u32, Error> {
    number("large_group_threshold", 100).await
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

/// How many replicas must hold a write before the call that made it answers
/// (`redis_wait_replicas`, default 0: none waited for). With one or more, a
/// primary that fails and whose replica takes over cannot take an answered
/// write with it: the call waits (`WAIT`) and answers unavailable when the
/// replicas did not acknowledge in time.
pub async fn wait_replicas() -> Result<u32, Error> {
    number("redis_wait_replicas", 0).await
}

/// A variable's text; `None` when the component does not declare it.
pub async fn text(name: &str) -> Result<Option<String>, Error> {
    use spin_sdk::variables::Error as VariableError;
    match spin_sdk::variables::get(name).await {
        Ok(text) => Ok(Some(text)),
        Err(VariableError::Undefined(_)) => Ok(None),
        Err(error) => Err(misconfigured(format!("variable {name} cannot be read: {error:?}"))),
    }
}

async fn positive(name: &str, default: u32) -> Result<u32, Error> {
    match number(name, default).await? {
        0 => Err(misconfigured(format!("variable {name} must be at least 1"))),
        n => Ok(n),
    }
}

/// An undeclared or empty variable takes `default`.
async fn number(name: &str, default: u32) -> Result<u32, Error> {
    let Some(text) = text(name).await?.filter(|t| !t.trim().is_empty()) else {
        return Ok(default);
    };
    text.trim().parse().map_err(|_| misconfigured(format!("variable {name} is not a whole number: {text:?}")))
}

/// A configuration problem: logged, and answered as unavailable.
fn misconfigured(message: String) -> Error {
    eprintln!("unread: error: {message}");
    Error::Unavailable(message)
}
