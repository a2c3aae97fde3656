//! What the unread HTTP functions share. Each function is one small file:
//! its `#[http_service]` hands the request to [`serve`] with a handler that
//! checks the method, authenticates, parses its input with these pieces,
//! calls the core and renders JSON; [`serve`] does the rest (request id,
//! error bodies, the log line).

mod auth;
mod body;
mod config;
mod cors;
mod ident;
mod jwks;
mod jwt;
mod preview;
mod problem;
mod render;
mod serve;

pub use auth::{admin_call, app_principal, service_call};
pub use body::{json_body, json_body_or_empty, query};
pub use config::{optional_variable, variable, variable_or};
pub use ident::{Category, Identifier, Seq, id_list};
pub use preview::{Lockscreen, stored_preview};
pub use problem::{Problem, require_method};
pub use render::{BadgeJson, ConversationJson, WithBadge, json};
pub use serve::serve;

/// The core contract, imported from the `unread:core` WIT package.
pub mod core {
    spin_sdk::wit_bindgen::generate!({
        runtime_path: "::spin_sdk::wit_bindgen::rt",
        path: "../../wit",
        world: "function",
        generate_all,
    });
    pub use unread::core::counts;
    pub use unread::core::types::*;
}

/// What a function answers: its JSON, or a problem rendered as an error.
pub type Answer = Result<spin_sdk::http::Response<render::Body>, Problem>;
