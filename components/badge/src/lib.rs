//! `GET /v1/badge` (JWT): the app-icon number, per category.

use spin_sdk::http::{Method, Request};
use spin_sdk::http_service;
use unread_api::core::counts;
use unread_api::{Answer, BadgeJson, app_principal, json, query, require_method};

#[http_service]
async fn badge(request: Request) -> impl spin_sdk::http::IntoResponse {
    unread_api::respond(handle(request).await)
}

async fn handle(request: Request) -> Answer {
    require_method(&request, Method::GET)?;
    let who = app_principal(&request).await?;
    query(&request, &[])?;
    Ok(json(&BadgeJson::answer(counts::badge(who).await?)))
}
