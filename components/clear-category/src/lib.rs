//! `POST /v1/admin/clear-category` (admin token): marks read everything
//! of one category, and nothing of another. `{"tenant", "category", "user"}`
//! or `"users": [...]` (at most 1000), or `"all_users": true` (with
//! `"cursor"`, null at first) to walk every user of the tenant in batches:
//! a whole tenant is never cleared by leaving the user out. `"dry_run":
//! true` reports what would be cleared and writes nothing.

use serde::Deserialize;
use spin_sdk::http::{Method, Request};
use spin_sdk::http_service;
use unread_api::core::{UserScope, counts};
use unread_api::{Answer, Category, Identifier, Problem, admin_call, id_list, json, json_body, require_method};

const MAX_USERS: usize = 1000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Clear {
    tenant: Identifier,
    category: Category,
    user: Option<Identifier>,
    users: Option<Vec<Identifier>>,
    #[serde(default)]
    all_users: bool,
    cursor: Option<Identifier>,
    #[serde(default)]
    dry_run: bool,
}

#[http_service]
async fn clear_category(request: Request) -> impl spin_sdk::http::IntoResponse {
    unread_api::serve("clear-category", request, handle).await
}

async fn handle(request: Request) -> Answer {
    require_method(&request, Method::POST)?;
    admin_call(&request).await?;
    let clear: Clear = json_body(request).await?;
    let scope = match (clear.user, clear.users, clear.all_users, clear.cursor) {
        (Some(user), None, false, None) => UserScope::Users(vec![user.into_string()]),
        (None, Some(users), false, None) => UserScope::Users(id_list("users", users, 1, MAX_USERS)?),
        (None, None, true, cursor) => UserScope::Walk(cursor.map(Identifier::into_string)),
        _ => {
            let message = "give one of user, users, or all_users: true (with cursor to go on with a walk)";
            return Err(Problem::bad_request("invalid_request", message));
        }
    };
    let report =
        counts::clear_category(clear.tenant.into_string(), scope, clear.category.into_string(), clear.dry_run).await?;
    Ok(json(&serde_json::json!({
        "dry_run": clear.dry_run,
        "users": report.users,
        "conversations": report.conversations,
        "unread": report.unread,
        "next_cursor": report.next_cursor,
    })))
}
