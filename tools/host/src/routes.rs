//! HTTP trigger routing, following Spin 4.1 (`crates/routes`, and
//! `crates/trigger-http` for the `spin-*` header values).
//!
//! A route is exact (`/v1/touch`) or a trailing wildcard (`/v1/...`, `/...`).
//! Leading and trailing slashes do not matter for matching (`/v1/touch/`
//! matches `/v1/touch`). An exact match beats any wildcard; among wildcards the
//! longest prefix wins. A later route with the same text replaces an earlier one.
//! Spin's other pattern syntax (`:name` segments, a trailing `/*`) is not
//! ported: the product does not use it, and `*` is refused.

use crate::manifest::{HttpTrigger, RouteDecl};
use anyhow::{Result, bail};

/// Reserved path prefix for Spin's own endpoints (`health`, `info`).
pub const WELL_KNOWN_PREFIX: &str = "/.well-known/spin/";

/// All routable HTTP triggers of the application.
#[derive(Clone, Debug, Default)]
pub struct Router {
    routes: Vec<Route>,
}

/// One route of the router.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// The component serving the route.
    pub component: String,
    /// The route as written in the manifest.
    pub raw: String,
    /// Path segments to match, without leading/trailing slashes.
    pattern: String,
    /// Whether the route ends in `/...`.
    wildcard: bool,
}

/// The result of routing one request path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteMatch<'a> {
    /// The matched route.
    pub route: &'a Route,
    /// The part of the path under a wildcard route (`spin-path-info`).
    pub path_info: String,
}

impl Route {
    /// Parses a manifest route for `component`.
    pub fn parse(raw: &str, component: &str) -> Result<Route> {
        let absolute = if raw.starts_with('/') { raw.to_owned() } else { format!("/{raw}") };
        let (prefix, wildcard) = match absolute.strip_suffix("/...") {
            Some(prefix) => (prefix.to_owned(), true),
            None => (absolute.clone(), false),
        };
        if prefix.contains("...") || prefix.contains('*') {
            bail!("route {raw:?} of component `{component}`: `...` may only end a route");
        }
        Ok(Route {
            component: component.to_owned(),
            raw: raw.to_owned(),
            pattern: prefix.trim_matches('/').to_owned(),
            wildcard,
        })
    }

    /// The route with the application base (always `/`) applied: Spin's "based route",
    /// sent as `spin-matched-route`.
    pub fn based(&self) -> String {
        let absolute = if self.raw.starts_with('/') { self.raw.clone() } else { format!("/{}", self.raw) };
        absolute.strip_suffix('/').map(str::to_owned).unwrap_or(absolute)
    }

    /// The raw route without a trailing `/...` (`spin-component-route`).
    pub fn raw_or_prefix(&self) -> &str {
        self.raw.strip_suffix("/...").unwrap_or(&self.raw)
    }

    /// Whether the route matches `trimmed_path` (a path without leading/trailing slashes).
    fn matches(&self, trimmed_path: &str) -> bool {
        if !self.wildcard {
            return trimmed_path == self.pattern;
        }
        self.pattern.is_empty()
            || trimmed_path == self.pattern
            || trimmed_path.strip_prefix(&self.pattern).is_some_and(|rest| rest.starts_with('/'))
    }

    /// How specific the route is: exact routes first, then longer prefixes.
    fn specificity(&self) -> (bool, usize) {
        let segments = if self.pattern.is_empty() { 0 } else { self.pattern.split('/').count() };
        (!self.wildcard, segments)
    }

    /// The part of `path` under this wildcard route, keeping a trailing slash as Spin does.
    fn path_info(&self, path: &str) -> String {
        if !self.wildcard {
            return String::new();
        }
        let trimmed = path.trim_matches('/');
        let under = trimmed[self.pattern.len()..].trim_matches('/');
        match (under.is_empty(), path.ends_with('/')) {
            (true, false) => String::new(),
            (true, true) => "/".to_owned(),
            (false, false) => format!("/{under}"),
            (false, true) => format!("/{under}/"),
        }
    }
}

impl Router {
    /// Builds the router from the manifest's HTTP triggers (private ones are skipped).
    pub fn new(triggers: &[HttpTrigger]) -> Result<Router> {
        let mut routes: Vec<Route> = Vec::new();
        for trigger in triggers {
            let RouteDecl::Path(raw) = &trigger.route else {
                continue;
            };
            let route = Route::parse(raw, &trigger.component)?;
            if let Some(existing) = routes.iter_mut().find(|r| r.raw == route.raw) {
                eprintln!(
                    "warning: route {raw:?} of `{}` replaces the same route of `{}`",
                    route.component, existing.component
                );
                *existing = route;
            } else {
                routes.push(route);
            }
        }
        Ok(Router { routes })
    }

    /// The routes in manifest order.
    pub fn routes(&self) -> &[Route] {
        &self.routes
    }

    /// The best route for `path` (no query), or `None`.
    pub fn route(&self, path: &str) -> Option<RouteMatch<'_>> {
        let trimmed = path.trim_matches('/');
        let route =
            self.routes.iter().filter(|route| route.matches(trimmed)).max_by_key(|route| route.specificity())?;
        Some(RouteMatch { route, path_info: route.path_info(path) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn router(routes: &[(&str, &str)]) -> Router {
        let triggers: Vec<HttpTrigger> = routes
            .iter()
            .map(|(route, component)| HttpTrigger {
                route: RouteDecl::Path(route.to_string()),
                component: component.to_string(),
            })
            .collect();
        Router::new(&triggers).unwrap()
    }

    fn component_for<'a>(router: &'a Router, path: &str) -> Option<&'a str> {
        router.route(path).map(|m| m.route.component.as_str())
    }

    #[test]
    fn exact_routes_match_only_their_path() {
        let r = router(&[("/v1/touch", "touch")]);
        assert_eq!(component_for(&r, "/v1/touch"), Some("touch"));
        assert_eq!(component_for(&r, "/v1/touch/"), Some("touch"));
        assert_eq!(component_for(&r, "/v1/touch/x"), None);
        assert_eq!(component_for(&r, "/v1/touchy"), None);
        assert_eq!(component_for(&r, "/v1"), None);
        assert_eq!(component_for(&r, "/"), None);
    }

    #[test]
    fn wildcard_routes_match_prefix_and_below() {
        let r = router(&[("/api/...", "api")]);
        for path in ["/api", "/api/", "/api/x", "/api/x/y/"] {
            assert_eq!(component_for(&r, path), Some("api"), "{path}");
        }
        assert_eq!(component_for(&r, "/apix"), None);
        assert_eq!(component_for(&r, "/"), None);
    }

    #[test]
    fn root_wildcard_matches_everything() {
        let r = router(&[("/...", "all")]);
        for path in ["/", "/x", "/a/b/c", "/v1/touch"] {
            assert_eq!(component_for(&r, path), Some("all"), "{path}");
        }
    }

    #[test]
    fn most_specific_route_wins() {
        let r = router(&[
            ("/...", "all"),
            ("/v1/...", "v1"),
            ("/v1/touch", "touch"),
            ("/v1/touch/...", "touch-under"),
            ("/v1/badge", "badge"),
        ]);
        assert_eq!(component_for(&r, "/v1/touch"), Some("touch"));
        assert_eq!(component_for(&r, "/v1/touch/x"), Some("touch-under"));
        assert_eq!(component_for(&r, "/v1/badge"), Some("badge"));
        assert_eq!(component_for(&r, "/v1/other"), Some("v1"));
        assert_eq!(component_for(&r, "/v2"), Some("all"));
        assert_eq!(component_for(&r, "/"), Some("all"));
    }

    #[test]
    fn order_does_not_change_specificity() {
        let r = router(&[("/v1/touch", "touch"), ("/...", "all")]);
        assert_eq!(component_for(&r, "/v1/touch"), Some("touch"));
        assert_eq!(component_for(&r, "/x"), Some("all"));
    }

    #[test]
    fn no_match_without_catch_all() {
        let r = router(&[("/v1/touch", "touch")]);
        assert!(r.route("/nope").is_none());
    }

    #[test]
    fn path_info_follows_spin() {
        let r = router(&[("/test/...", "t"), ("/...", "all"), ("/exact", "e")]);
        let info = |path: &str| r.route(path).unwrap().path_info;
        assert_eq!(info("/test"), "");
        assert_eq!(info("/test/"), "/");
        assert_eq!(info("/test/hello"), "/hello");
        assert_eq!(info("/test/hello/"), "/hello/");
        assert_eq!(info("/1/2/3"), "/1/2/3");
        assert_eq!(info("/"), "/");
        assert_eq!(info("/exact"), "");
    }

    #[test]
    fn route_header_values() {
        let wild = Route::parse("/...", "c").unwrap();
        assert_eq!((wild.based(), wild.raw_or_prefix()), ("/...".to_owned(), ""));
        let prefix = Route::parse("/api/...", "c").unwrap();
        assert_eq!((prefix.based(), prefix.raw_or_prefix()), ("/api/...".to_owned(), "/api"));
        let exact = Route::parse("/v1/touch", "c").unwrap();
        assert_eq!((exact.based(), exact.raw_or_prefix()), ("/v1/touch".to_owned(), "/v1/touch"));
    }

    #[test]
    fn duplicate_routes_keep_the_last() {
        let r = router(&[("/x", "first"), ("/x", "second")]);
        assert_eq!(r.routes().len(), 1);
        assert_eq!(component_for(&r, "/x"), Some("second"));
    }

    #[test]
    fn private_routes_are_not_routable() {
        let triggers = vec![HttpTrigger { route: RouteDecl::Private { private: true }, component: "p".into() }];
        assert!(Router::new(&triggers).unwrap().route("/").is_none());
    }

    #[test]
    fn project_routes() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../spin.toml");
        let manifest = crate::manifest::Manifest::load(&path).unwrap();
        let r = Router::new(&manifest.trigger.http).unwrap();
        for trigger in &manifest.trigger.http {
            let RouteDecl::Path(route) = &trigger.route else {
                continue;
            };
            if !route.ends_with("/...") {
                assert_eq!(component_for(&r, route), Some(trigger.component.as_str()), "{route}");
            }
        }
    }
}
