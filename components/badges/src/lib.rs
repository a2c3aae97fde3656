//! `POST /v1/badges` (service token): the app-icon badges of up to 500 users
//! of a tenant, `{"tenant", "users": [...]}`, in their order. A push
//! gateway calls it when a large conversation's event (which names no user)
//! comes, for the members it serves, and sets each one's icon to theirs.

use serde::{Deserialize, Serialize};
use spin_sdk::http::{Method, Request};
use spin_sdk::http_service;
use unread_api::core::counts;
use unread_api::{Answer, BadgeJson, Identifier, id_list, json, json_body, require_method, service_call};

const MAX_USERS: usize = 500;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Badges {
    tenant: Identifier,
    users: Vec<Identifier>,
}

/// One user's badge in the answer.
#[derive(Serialize)]
struct UserBadge {
    user: String,
    #[serde(flatten)]
    badge: BadgeJson,
}

#[http_service]
async fn badges(request: Request) -> impl spin_sdk::http::IntoResponse {
    unread_api::serve("badges", request, handle).await
}

async fn handle(request: Request) -> Answer {
    require_method(&request, Method::POST)?;
    service_call(&request).await?;
    let asked: Badges = json_body(request).await?;
    let users = id_list("users", asked.users, 1, MAX_USERS)?;
    let badges = counts::badges(asked.tenant.into_string(), users.clone()).await?;
    let badges: Vec<UserBadge> = users
        .into_iter()
        .zip(badges)
        .map(|(user, badge)| UserBadge { user, badge: BadgeJson::answer(badge) })
        .collect();
    Ok(json(&serde_json::json!({ "badges": badges })))
}
