//! HTTP trigger routing, following Spin 4.1 (`crates/routes`, and
//! `crates/trigger-http` for the `spin-*` header values).
//!
//! As in Spin, the matching itself is done by the `routefinder` crate (the
//! version Spin 4.1 locks), so every pattern Spin accepts is accepted here and
//! ranked the same way:
//!
//! - A route is made absolute and loses one trailing slash (Spin's "based
//!   route"); a trailing `/...` becomes routefinder's wildcard `/*` (a
//!   trailing `/*` is one already); `:name` segments match one path segment
//!   and are captured.
//! - A path matches with its leading and trailing slashes ignored
//!   (`/v1/touch/` matches `/v1/touch`).
//! - Among the routes that match, the most specific wins, segment by segment
//!   from the left: a literal segment beats a `:name` one, which beats the
//!   wildcard; then more dots; then more segments. So an exact route beats any
//!   wildcard, and among wildcards the longest prefix wins. Routes of the same
//!   shape keep manifest order.
//! - A later route with the same text replaces an earlier one, in its place.

use crate::manifest::{HttpTrigger, RouteDecl};
use anyhow::{Result, anyhow};
use std::collections::BTreeMap;

/// Reserved path prefix for Spin's own endpoints (`health`, `info`).
pub const WELL_KNOWN_PREFIX: &str = "/.well-known/spin/";

/// All routable HTTP triggers of the application.
#[derive(Debug, Default)]
pub struct Router {
    routes: Vec<Route>,
    /// Matches paths; the handler of each pattern is its index in `routes`.
    finder: routefinder::Router<usize>,
}

/// One route of the router.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// The component serving the route.
    pub component: String,
    /// The route as written in the manifest.
    pub raw: String,
    /// The route made absolute, without one trailing slash: Spin's "based route".
    based: String,
}

/// The result of routing one request path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteMatch<'a> {
    /// The matched route.
    pub route: &'a Route,
    /// The part of the path under a wildcard route (`spin-path-info`).
    pub path_info: String,
    /// The values of the route's `:name` segments, by name (a repeated name
    /// keeps its last value, as Spin's map of them does).
    pub named: BTreeMap<String, String>,
}

impl Route {
    fn new(raw: &str, component: &str) -> Route {
        Route { component: component.to_owned(), raw: raw.to_owned(), based: based_route(raw) }
    }

    /// The route with the application base (always `/`) applied: Spin's "based route",
    /// sent as `spin-matched-route`.
    pub fn based(&self) -> &str {
        &self.based
    }

    /// The raw route without a trailing `/...` (`spin-component-route`).
    pub fn raw_or_prefix(&self) -> &str {
        self.raw.strip_suffix("/...").unwrap_or(&self.raw)
    }

    /// The routefinder pattern of the route, as Spin's `Router::parse_route` makes it.
    fn pattern(&self) -> String {
        match self.based.strip_suffix("/...") {
            Some(prefix) => format!("{prefix}/*"),
            None => self.based.clone(),
        }
    }
}

/// Spin's `sanitize_with_base("/", raw)`: the base `/` loses its slash, the
/// route is made absolute and loses one trailing slash.
fn based_route(raw: &str) -> String {
    let absolute = if raw.starts_with('/') { raw.to_owned() } else { format!("/{raw}") };
    absolute.strip_suffix('/').map(str::to_owned).unwrap_or(absolute)
}

impl Router {
    /// Builds the router from the manifest's HTTP triggers (private ones are skipped).
    ///
    /// Fails, as Spin does, on a pattern routefinder cannot parse (such as an
    /// unnamed `:` segment or a named `*`).
    pub fn new(triggers: &[HttpTrigger]) -> Result<Router> {
        let mut routes: Vec<Route> = Vec::new();
        for trigger in triggers {
            let RouteDecl::Path(raw) = &trigger.route else {
                continue;
            };
            let route = Route::new(raw, &trigger.component);
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
        let mut finder = routefinder::Router::new();
        for (index, route) in routes.iter().enumerate() {
            finder.add(route.pattern(), index).map_err(|e| {
                anyhow!("Error parsing route {} associated with component {}: {e}", route.based, route.component)
            })?;
        }
        Ok(Router { routes, finder })
    }

    /// The routes in manifest order.
    pub fn routes(&self) -> &[Route] {
        &self.routes
    }

    /// The best route for `path` (no query), or `None`.
    pub fn route(&self, path: &str) -> Option<RouteMatch<'_>> {
        let found = self.finder.best_match(path)?;
        let route = &self.routes[*found.handler()];
        let captures = found.captures();
        let named = captures.iter().map(|(name, value)| (name.to_owned(), value.to_owned())).collect();
        // Spin's compatibility rule: the wildcard part keeps the slashes
        // routefinder drops (a trailing one, and the one before it).
        let path_info = match captures.wildcard() {
            None => String::new(),
            Some(rest) => match (rest.is_empty(), path.ends_with('/')) {
                (true, false) => String::new(),
                (true, true) => "/".to_owned(),
                (false, false) => format!("/{rest}"),
                (false, true) => format!("/{rest}/"),
            },
        };
        Some(RouteMatch { route, path_info, named })
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
        // Spin's own case: the longest wildcard wins whatever the order.
        for order in
            [["/one/...", "/one/two/...", "/one/two/three/..."], ["/one/two/three/...", "/one/two/...", "/one/..."]]
        {
            let r = router(&order.map(|route| (route, route)));
            assert_eq!(component_for(&r, "/one/two/three/four"), Some("/one/two/three/..."));
        }
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
    fn named_segments_are_captured() {
        // Spin's own cases (`named_wildcard_is_captured`).
        let r = router(&[("/1/:two/3", "c")]);
        let m = r.route("/1/2/3").unwrap();
        assert_eq!(m.named["two"], "2");
        assert_eq!(m.path_info, "");
        let r = router(&[("/1/:two/...", "c")]);
        let m = r.route("/1/2/3").unwrap();
        assert_eq!(m.named["two"], "2");
        assert_eq!(m.path_info, "/3");
        // The conformance suite's route.
        let r = router(&[("/base/:path_segment/:path_end/...", "c")]);
        let m = r.route("/base/path/end/rest").unwrap();
        assert_eq!((m.named["path_segment"].as_str(), m.named["path_end"].as_str()), ("path", "end"));
        assert_eq!(m.path_info, "/rest");
        assert!(r.route("/base/path").is_none(), "a named segment needs a value");
    }

    #[test]
    fn named_segments_rank_between_literals_and_wildcards() {
        let r =
            router(&[("/v1/...", "wild"), ("/v1/:id", "named"), ("/v1/touch", "exact"), ("/v1/touch/...", "under")]);
        assert_eq!(component_for(&r, "/v1/touch"), Some("exact"));
        assert_eq!(component_for(&r, "/v1/other"), Some("named"));
        assert_eq!(component_for(&r, "/v1/other/x"), Some("wild"));
        // A literal segment beats a named one even when the literal route is a wildcard.
        let r = router(&[("/v1/:id", "named"), ("/v1/touch/...", "under")]);
        assert_eq!(component_for(&r, "/v1/touch"), Some("under"));
    }

    #[test]
    fn trailing_star_is_a_wildcard_too() {
        let r = router(&[("/files/*", "files")]);
        let m = r.route("/files/a/b").unwrap();
        assert_eq!((m.route.component.as_str(), m.path_info.as_str()), ("files", "/a/b"));
        assert_eq!((m.route.based(), m.route.raw_or_prefix()), ("/files/*", "/files/*"));
    }

    #[test]
    fn patterns_routefinder_refuses_fail_the_load() {
        for (route, reason) in [("/a/:/b", "params must be named"), ("/a/*rest", "it doesn't need a name")] {
            let triggers = vec![HttpTrigger { route: RouteDecl::Path(route.into()), component: "c".into() }];
            let err = Router::new(&triggers).unwrap_err().to_string();
            assert!(err.contains("Error parsing route") && err.contains(reason), "{route}: {err}");
        }
    }

    #[test]
    fn route_header_values() {
        let wild = Route::new("/...", "c");
        assert_eq!((wild.based(), wild.raw_or_prefix()), ("/...", ""));
        let prefix = Route::new("/api/...", "c");
        assert_eq!((prefix.based(), prefix.raw_or_prefix()), ("/api/...", "/api"));
        let exact = Route::new("/v1/touch", "c");
        assert_eq!((exact.based(), exact.raw_or_prefix()), ("/v1/touch", "/v1/touch"));
        let relative = Route::new("v1/touch/", "c");
        assert_eq!((relative.based(), relative.raw_or_prefix()), ("/v1/touch", "v1/touch/"));
        let named = Route::new("/foo/:userid/...", "c");
        assert_eq!((named.based(), named.raw_or_prefix()), ("/foo/:userid/...", "/foo/:userid"));
    }

    #[test]
    fn duplicate_routes_keep_the_last() {
        let r = router(&[("/x", "first"), ("/x", "second")]);
        assert_eq!(r.routes().len(), 1);
        assert_eq!(component_for(&r, "/x"), Some("second"));
    }

    #[test]
    fn same_shape_routes_keep_manifest_order() {
        // `/x` and `x` are different routes to Spin (it compares the text as
        // written) with the same pattern: the first one written serves.
        let r = router(&[("x", "first"), ("/x", "second")]);
        assert_eq!(r.routes().len(), 2);
        assert_eq!(component_for(&r, "/x"), Some("first"));
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
