//! Every path no other function serves: a JSON 404.

use spin_sdk::http::{Request, StatusCode};
use spin_sdk::http_service;
use unread_api::Problem;

#[http_service]
async fn not_found(request: Request) -> impl spin_sdk::http::IntoResponse {
    let message = format!("no route for {} {}", request.method(), request.uri().path());
    Problem::new(StatusCode::NOT_FOUND, "not_found", message).into_response()
}
