//! The API's behaviour, end to end: HTTP → host → composed wasm → Redis.

mod auth;
mod chat;
mod concurrency;
mod errors;
mod history;
mod hostile;
mod isolation;
mod logs;
mod round_trips;
mod semantics;
mod store;
mod support;
mod truth;
