//! The API's behaviour, end to end: HTTP → host → composed wasm → Redis.

mod auth;
mod chat;
mod concurrency;
mod cors;
mod counting;
mod deploy;
mod errors;
mod health;
mod history;
mod hostile;
mod isolation;
mod latency;
mod logs;
mod membership;
mod operators;
mod outage;
mod reconcile;
mod round_trips;
mod schema;
mod secured;
mod selection;
mod storage;
mod store;
mod support;
mod trim;
mod truth;
