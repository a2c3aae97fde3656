//! `GET /v1/badge?category=` (JWT): the app-icon number, per category; with
//! `category`, the badge of that category alone.

use spin_sdk::http::{Method, Request};
use spin_sdk::http_service;
use unread_api::core::counts;
use unread_api::{Answer, BadgeJson, Category, Problem, app_principal, json, query, require_method};

#[http_service]
async fn badge(request: Request) -> impl spin_sdk::http::IntoResponse {
    unread_api::serve("badge", request, handle).await
}

async fn handle(request: Request) -> Answer {
    require_method(&request, Method::GET)?;
    let who = app_principal(&request).await?;
    let mut only = None;
    for (_, value) in query(&request, &["category"])? {
        only = Some(Category::parse(&value).map_err(|e| Problem::bad_request("invalid_query", e))?.into_string());
    }
    Ok(json(&BadgeJson::answer(counts::badge(who, only).await?)))
}
