//! Every path no other function serves: a JSON 404.

use spin_sdk::http::{Request, StatusCode};
use spin_sdk::http_service;
use unread_api::{Answer, Problem};

#[http_service]
async fn not_found(request: Request) -> impl spin_sdk::http::IntoResponse {
    unread_api::serve("not-found", request, handle).await
}

async fn handle(request: Request) -> Answer {
    let message = format!("no route for {} {}", request.method(), request.uri().path());
    Err(Problem::new(StatusCode::NOT_FOUND, "not_found", message))
}
