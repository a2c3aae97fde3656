//! The HTTP/1.1 front end: routing requests to components the way Spin's HTTP trigger does.

use crate::instances::ComponentHandler;
use crate::routes::{RouteMatch, Router, WELL_KNOWN_PREFIX};
use anyhow::{Context, Result};
use bytes::Bytes;
use http::header::{CONNECTION, CONTENT_TYPE, HOST};
use http::uri::{Authority, Scheme};
use http::{HeaderName, HeaderValue, Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use wasmtime_wasi_http::WasiBody;

/// Everything needed to answer requests.
pub struct App {
    /// Routes to components.
    pub router: Router,
    /// Dispatchers by component id.
    pub handlers: HashMap<String, ComponentHandler>,
    /// The body of `/.well-known/spin/info`.
    pub info_json: String,
}

/// Accepts connections until `shutdown` turns true; dropping the task aborts open connections.
/// `tcp_nodelay`: see [`accept`].
pub async fn serve(listener: TcpListener, app: Arc<App>, tcp_nodelay: bool, mut shutdown: watch::Receiver<bool>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = accept(&listener, tcp_nodelay) => match accepted {
                Ok((stream, client)) => {
                    connections.spawn(serve_connection(stream, client, app.clone()));
                }
                Err(e) => eprintln!("unread-host: accept failed: {e}"),
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = shutdown.changed() => break,
        }
    }
    connections.shutdown().await;
}

/// Takes the next connection. By default TCP_NODELAY stays off on it
/// (Nagle's algorithm on), as Spin's HTTP trigger and hyper leave it, so that
/// timings measured here are what Spin's users get. `tcp_nodelay` turns it on,
/// which Spin does not do: only the benchmark asks for it, to measure what
/// Spin would gain (docs/latency.md).
async fn accept(listener: &TcpListener, tcp_nodelay: bool) -> std::io::Result<(TcpStream, SocketAddr)> {
    let (stream, client) = listener.accept().await?;
    if tcp_nodelay {
        stream.set_nodelay(true)?;
    }
    Ok((stream, client))
}

/// Serves one keep-alive HTTP/1.1 connection.
async fn serve_connection(stream: TcpStream, client: SocketAddr, app: Arc<App>) {
    let service = hyper::service::service_fn(move |request| {
        let app = app.clone();
        async move { Ok::<_, Infallible>(handle_request(&app, request, client).await) }
    });
    let served = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(TokioIo::new(stream), service)
        .await;
    if let Err(e) = served
        && !e.is_incomplete_message()
    {
        eprintln!("unread-host: error serving {client}: {e}");
    }
}

/// Answers one request: Spin's well-known endpoints, a component, or 404.
pub async fn handle_request(app: &App, request: Request<Incoming>, client: SocketAddr) -> Response<WasiBody> {
    let path = request.uri().path().to_owned();
    if let Some(endpoint) = path.strip_prefix(WELL_KNOWN_PREFIX) {
        return well_known(app, endpoint);
    }
    let Some(route) = app.router.route(&path) else {
        return empty_response(StatusCode::NOT_FOUND);
    };
    let Some(handler) = app.handlers.get(&route.route.component) else {
        eprintln!("unread-host: no handler for component `{}`", route.route.component);
        return empty_response(StatusCode::INTERNAL_SERVER_ERROR);
    };
    if let Some(name) = non_utf8_header(request.headers()) {
        // Spin refuses these while copying headers for the component.
        eprintln!("unread-host: header {name} of a request for {path} is not valid UTF-8");
        return empty_response(StatusCode::INTERNAL_SERVER_ERROR);
    }
    let request = match prepare_request(request, &route, client) {
        Ok(request) => request,
        Err(e) => {
            eprintln!("unread-host: bad request for {path}: {e:#}");
            return empty_response(StatusCode::BAD_REQUEST);
        }
    };
    match handler.handle((), request).await {
        Ok(response) => response,
        Err(e) => {
            eprintln!("unread-host: component `{}` failed: {e:?}", route.route.component);
            empty_response(StatusCode::INTERNAL_SERVER_ERROR)
        }
    }
}

/// The name of the first header whose value is not UTF-8, if any.
fn non_utf8_header(headers: &http::HeaderMap) -> Option<&HeaderName> {
    headers.iter().find(|(_, value)| std::str::from_utf8(value.as_bytes()).is_err()).map(|(name, _)| name)
}

/// `/.well-known/spin/health` and `/.well-known/spin/info`, as in Spin.
fn well_known(app: &App, endpoint: &str) -> Response<WasiBody> {
    match endpoint {
        "health" => Response::new(full_body("OK")),
        "info" => {
            let mut response = Response::new(full_body(app.info_json.clone()));
            response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            response
        }
        _ => empty_response(StatusCode::NOT_FOUND),
    }
}

/// Turns the incoming request into what the component sees: absolute URI,
/// no `Connection` header, and Spin's `spin-*` headers appended.
fn prepare_request(
    request: Request<Incoming>,
    route: &RouteMatch<'_>,
    client: SocketAddr,
) -> Result<Request<WasiBody>> {
    let (mut parts, body) = request.into_parts();
    parts.headers.remove(CONNECTION);
    let authority = request_authority(&parts.uri, &parts.headers)?;
    let path_and_query = parts.uri.path_and_query().map_or("/", |pq| pq.as_str()).to_owned();
    let full_url = format!("http://{authority}{path_and_query}");
    parts.uri = Uri::builder()
        .scheme(Scheme::HTTP)
        .authority(authority)
        .path_and_query(path_and_query)
        .build()
        .context("cannot build the request URI")?;
    // As in Spin, a header whose name or value cannot be a header is left out.
    for (name, value) in spin_headers(route, &full_url, client) {
        if let (Ok(name), Ok(value)) = (name.parse::<HeaderName>(), HeaderValue::from_bytes(value.as_bytes())) {
            parts.headers.append(name, value);
        }
    }
    let body = body.map_err(wasmtime_wasi_http::Error::from).boxed_unsync();
    Ok(Request::from_parts(parts, body))
}

/// The request's authority, from the `Host` header or an absolute request URI.
fn request_authority(uri: &Uri, headers: &http::HeaderMap) -> Result<Authority> {
    let from_header = headers
        .get(HOST)
        .map(|host| -> Result<Authority> {
            let host = host.to_str().context("'Host' header is not valid UTF-8")?;
            host.parse().context("'Host' header is not a valid authority")
        })
        .transpose()?;
    match (from_header, uri.authority()) {
        (Some(header), Some(uri)) if &header != uri => {
            anyhow::bail!("authority in 'Host' header does not match the request URI")
        }
        (Some(header), _) => Ok(header),
        (None, Some(uri)) => Ok(uri.clone()),
        (None, None) => anyhow::bail!("no 'Host' header in request"),
    }
}

/// Spin's informational request headers for a matched route, in Spin's
/// order: then one `spin-path-match-<name>` per `:name` segment of the route
/// (Spin's `SPIN_PATH_MATCH_<NAME>`, upper-cased, then lower-cased with `_`
/// as `-`).
fn spin_headers(route: &RouteMatch<'_>, full_url: &str, client: SocketAddr) -> Vec<(String, String)> {
    let mut headers: Vec<(String, String)> = [
        ("spin-path-info", route.path_info.clone()),
        ("spin-full-url", full_url.to_owned()),
        ("spin-matched-route", route.route.based().to_owned()),
        ("spin-base-path", "/".to_owned()),
        ("spin-raw-component-route", route.route.raw.clone()),
        ("spin-component-route", route.route.raw_or_prefix().to_owned()),
        ("spin-client-addr", client.to_string()),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_owned(), value))
    .collect();
    for (name, value) in &route.named {
        let key = format!("SPIN_PATH_MATCH_{}", name.to_ascii_uppercase());
        headers.push((key.replace('_', "-").to_ascii_lowercase(), value.clone()));
    }
    headers
}

/// A response with only a status (Spin's plain 404 and 500).
fn empty_response(status: StatusCode) -> Response<WasiBody> {
    let mut response = Response::new(Empty::<Bytes>::new().map_err(|never| match never {}).boxed_unsync());
    *response.status_mut() = status;
    response
}

fn full_body(text: impl Into<Bytes>) -> WasiBody {
    Full::new(text.into()).map_err(|never| match never {}).boxed_unsync()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{HttpTrigger, RouteDecl};

    fn router(routes: &[(&str, &str)]) -> Router {
        let triggers: Vec<HttpTrigger> = routes
            .iter()
            .map(|(r, c)| HttpTrigger { route: RouteDecl::Path(r.to_string()), component: c.to_string() })
            .collect();
        Router::new(&triggers).unwrap()
    }

    #[test]
    fn spin_headers_for_a_wildcard_route() {
        let router = router(&[("/static/...", "files")]);
        let m = router.route("/static/a/b").unwrap();
        let client: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        let headers: HashMap<_, _> = spin_headers(&m, "http://h:1/static/a/b?x=1", client).into_iter().collect();
        assert_eq!(headers["spin-path-info"], "/a/b");
        assert_eq!(headers["spin-full-url"], "http://h:1/static/a/b?x=1");
        assert_eq!(headers["spin-matched-route"], "/static/...");
        assert_eq!(headers["spin-raw-component-route"], "/static/...");
        assert_eq!(headers["spin-component-route"], "/static");
        assert_eq!(headers["spin-base-path"], "/");
        assert_eq!(headers["spin-client-addr"], "127.0.0.1:4000");
    }

    #[test]
    fn spin_headers_for_named_segments() {
        // Spin's own case (`test_default_headers_with_named_wildcards`).
        let router = router(&[("/foo/:userid/...", "c")]);
        let m = router.route("/foo/42/bar").unwrap();
        let headers: HashMap<_, _> =
            spin_headers(&m, "https://fermyon.dev/foo/42/bar", "127.0.0.1:8777".parse().unwrap()).into_iter().collect();
        assert_eq!(headers["spin-path-info"], "/bar");
        assert_eq!(headers["spin-matched-route"], "/foo/:userid/...");
        assert_eq!(headers["spin-raw-component-route"], "/foo/:userid/...");
        assert_eq!(headers["spin-component-route"], "/foo/:userid");
        assert_eq!(headers["spin-path-match-userid"], "42");
        let router = self::router(&[("/base/:path_segment/:path_end/...", "c")]);
        let m = router.route("/base/path/end/rest").unwrap();
        let headers: HashMap<_, _> =
            spin_headers(&m, "http://h/base/path/end/rest", "127.0.0.1:1".parse().unwrap()).into_iter().collect();
        assert_eq!(headers["spin-path-match-path-segment"], "path");
        assert_eq!(headers["spin-path-match-path-end"], "end");
    }

    #[test]
    fn spin_headers_for_an_exact_route() {
        let router = router(&[("/v1/touch", "touch")]);
        let m = router.route("/v1/touch").unwrap();
        let headers: HashMap<_, _> =
            spin_headers(&m, "http://h/v1/touch", "127.0.0.1:1".parse().unwrap()).into_iter().collect();
        assert_eq!(headers["spin-path-info"], "");
        assert_eq!(headers["spin-matched-route"], "/v1/touch");
        assert_eq!(headers["spin-component-route"], "/v1/touch");
    }

    #[tokio::test]
    async fn accepted_connections_keep_nagle_on() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (accepted, from) = accept(&listener, false).await.unwrap();
        assert_eq!(from, client.local_addr().unwrap());
        assert!(!accepted.nodelay().unwrap(), "TCP_NODELAY is set on an accepted connection");
    }

    #[tokio::test]
    async fn tcp_nodelay_is_set_only_when_asked() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let _client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (accepted, _) = accept(&listener, true).await.unwrap();
        assert!(accepted.nodelay().unwrap(), "TCP_NODELAY was asked for");
    }

    #[test]
    fn non_utf8_header_values_are_found() {
        let mut headers = http::HeaderMap::new();
        headers.insert("x-ok", HeaderValue::from_static("fine"));
        assert!(non_utf8_header(&headers).is_none());
        headers.insert("x-bad", HeaderValue::from_bytes(b"\xff\xfe").unwrap());
        assert_eq!(non_utf8_header(&headers).map(HeaderName::as_str), Some("x-bad"));
    }

    #[test]
    fn authority_comes_from_host_header_or_uri() {
        let mut headers = http::HeaderMap::new();
        let relative: Uri = "/x".parse().unwrap();
        assert!(request_authority(&relative, &headers).is_err());
        headers.insert(HOST, HeaderValue::from_static("example.com:3000"));
        assert_eq!(request_authority(&relative, &headers).unwrap(), "example.com:3000");
        let absolute: Uri = "http://other.com/x".parse().unwrap();
        assert!(request_authority(&absolute, &headers).is_err());
        headers.clear();
        assert_eq!(request_authority(&absolute, &headers).unwrap(), "other.com");
    }
}
