//! `allowed_outbound_hosts`: which network destinations a component may reach.
//!
//! Entries have the form `<scheme>://<host>[:<port>]` where each part may be
//! `*`, the host may also be `*.<domain>` and the port a range `A..B`. With no
//! port, the scheme's well-known port applies (6379 for `redis`).

use crate::variables::{AppVariables, Template};
use anyhow::{Context, Result, bail, ensure};

/// The ports assumed when neither the entry nor the address names one.
fn well_known_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        "redis" => Some(6379),
        "rediss" => Some(6380),
        "mysql" => Some(3306),
        "postgres" => Some(5432),
        "mqtt" => Some(1883),
        _ => None,
    }
}

/// The resolved `allowed_outbound_hosts` of one component.
#[derive(Clone, Debug, Default)]
pub struct AllowedHosts {
    entries: Vec<AllowedHost>,
}

/// One parsed `allowed_outbound_hosts` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
struct AllowedHost {
    scheme: SchemePattern,
    host: HostPattern,
    port: PortPattern,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum SchemePattern {
    Any,
    Exact(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum HostPattern {
    Any,
    /// `*.example.com`, stored as `.example.com`.
    SubdomainOf(String),
    Exact(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum PortPattern {
    Any,
    Range(u16, u16),
}

impl AllowedHosts {
    /// Renders templated entries with `app` and parses them.
    ///
    /// Entries that render to an empty string are skipped (Spin's "optional
    /// endpoint" behaviour).
    pub fn resolve(
        component: &str,
        entries: &[String],
        app: &AppVariables,
    ) -> Result<AllowedHosts> {
        let mut parsed = Vec::new();
        for entry in entries {
            let rendered = Template::parse(entry)
                .and_then(|t| t.render(app))
                .with_context(|| {
                    format!("component `{component}`: allowed_outbound_hosts entry {entry:?}")
                })?;
            if rendered.trim().is_empty() {
                continue;
            }
            let host = AllowedHost::parse(&rendered).with_context(|| {
                format!(
                    "component `{component}`: invalid allowed_outbound_hosts entry {rendered:?}"
                )
            })?;
            parsed.push(host);
        }
        Ok(AllowedHosts { entries: parsed })
    }

    /// Parses already-resolved entries.
    #[cfg(test)]
    pub fn parse(entries: &[&str]) -> Result<AllowedHosts> {
        let entries = entries
            .iter()
            .map(|e| AllowedHost::parse(e))
            .collect::<Result<_>>()?;
        Ok(AllowedHosts { entries })
    }

    /// Whether `address` may be reached; `default_scheme` applies to scheme-less addresses.
    ///
    /// An address that cannot be parsed is not allowed.
    pub fn allows(&self, address: &str, default_scheme: &str) -> bool {
        let Some(target) = Target::parse(address, default_scheme) else {
            return false;
        };
        self.entries.iter().any(|entry| entry.allows(&target))
    }
}

impl AllowedHost {
    fn parse(entry: &str) -> Result<AllowedHost> {
        let entry = entry.trim();
        let Some((scheme, rest)) = entry.split_once("://") else {
            bail!("expected <scheme>://<host>[:<port>] (for example redis://127.0.0.1:6379)");
        };
        let rest = match rest.split_once('/') {
            Some((authority, "")) => authority,
            Some(_) => bail!("must not contain a path"),
            None => rest,
        };
        let (host, port) = split_host_port(rest);
        Ok(AllowedHost {
            scheme: SchemePattern::parse(scheme)?,
            host: HostPattern::parse(host)?,
            port: PortPattern::parse(port, scheme)?,
        })
    }

    fn allows(&self, target: &Target) -> bool {
        self.scheme.allows(&target.scheme)
            && self.host.allows(&target.host)
            && target.port.is_some_and(|port| self.port.allows(port))
    }
}

/// Splits `host[:port]`, keeping bracketed IPv6 literals whole.
fn split_host_port(authority: &str) -> (&str, &str) {
    if let Some(end) = authority.find(']') {
        let (host, after) = authority.split_at(end + 1);
        return (host, after.strip_prefix(':').unwrap_or(after));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => (host, port),
        None => (authority, ""),
    }
}

impl SchemePattern {
    fn parse(scheme: &str) -> Result<SchemePattern> {
        if scheme == "*" {
            return Ok(SchemePattern::Any);
        }
        ensure!(
            !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphabetic()),
            "invalid scheme {scheme:?}"
        );
        Ok(SchemePattern::Exact(scheme.to_ascii_lowercase()))
    }

    fn allows(&self, scheme: &str) -> bool {
        match self {
            SchemePattern::Any => true,
            SchemePattern::Exact(expected) => expected.eq_ignore_ascii_case(scheme),
        }
    }
}

impl HostPattern {
    fn parse(host: &str) -> Result<HostPattern> {
        ensure!(!host.is_empty(), "missing host");
        if host == "*" {
            return Ok(HostPattern::Any);
        }
        if let Some(domain) = host.strip_prefix("*.") {
            let domain = normalize_host(domain).context("invalid wildcard domain")?;
            return Ok(HostPattern::SubdomainOf(format!(".{domain}")));
        }
        ensure!(
            !host.contains('*'),
            "wildcards are allowed only as `*` or `*.<domain>`"
        );
        Ok(HostPattern::Exact(normalize_host(host)?))
    }

    fn allows(&self, host: &str) -> bool {
        match self {
            HostPattern::Any => true,
            HostPattern::SubdomainOf(suffix) => host.ends_with(suffix.as_str()),
            HostPattern::Exact(expected) => expected == host,
        }
    }
}

/// Canonical text of a host as the `url` crate writes it (lowercase, IPs normalized).
fn normalize_host(host: &str) -> Result<String> {
    let parsed = url::Host::parse(host).with_context(|| format!("invalid host {host:?}"))?;
    Ok(parsed.to_string())
}

impl PortPattern {
    fn parse(port: &str, scheme: &str) -> Result<PortPattern> {
        if port.is_empty() {
            let default = well_known_port(scheme).with_context(|| {
                format!("no port given and scheme {scheme:?} has no well-known port")
            })?;
            return Ok(PortPattern::Range(default, default));
        }
        if port == "*" {
            return Ok(PortPattern::Any);
        }
        let number = |text: &str| -> Result<u16> {
            text.parse()
                .with_context(|| format!("port {text:?} is not a number"))
        };
        match port.split_once("..") {
            Some((start, end)) => Ok(PortPattern::Range(
                number(start)?,
                number(end)?.saturating_sub(1),
            )),
            None => {
                let port = number(port)?;
                Ok(PortPattern::Range(port, port))
            }
        }
    }

    fn allows(&self, port: u16) -> bool {
        match *self {
            PortPattern::Any => true,
            PortPattern::Range(first, last) => (first..=last).contains(&port),
        }
    }
}

/// The destination of an outbound connection.
#[derive(Debug)]
struct Target {
    scheme: String,
    host: String,
    port: Option<u16>,
}

impl Target {
    /// Parses `address` as a URL; a scheme-less `host:port` gets `default_scheme://`.
    fn parse(address: &str, default_scheme: &str) -> Option<Target> {
        // Parse exactly as the redis client will, so the check is about the
        // host it would really connect to.
        let address = address.trim();
        let url = match url::Url::parse(address) {
            Ok(url) if url.has_host() => url,
            _ if address.contains("://") => return None,
            _ => url::Url::parse(&format!("{default_scheme}://{address}")).ok()?,
        };
        // Non-special schemes keep hosts verbatim; normalize like the entries are.
        let host = normalize_host(url.host_str()?).ok()?;
        let port = url.port().or_else(|| well_known_port(url.scheme()));
        Some(Target {
            scheme: url.scheme().to_owned(),
            host,
            port,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::VariableDecl;
    use std::collections::{BTreeMap, HashMap};

    fn allowed(entries: &[&str]) -> AllowedHosts {
        AllowedHosts::parse(entries).unwrap()
    }

    #[test]
    fn exact_entry_allows_only_that_destination() {
        let hosts = allowed(&["redis://127.0.0.1:6379"]);
        assert!(hosts.allows("redis://127.0.0.1:6379", "redis"));
        assert!(hosts.allows("redis://127.0.0.1:6379/0", "redis"));
        assert!(
            hosts.allows("redis://127.0.0.1", "redis"),
            "default redis port"
        );
        assert!(!hosts.allows("redis://127.0.0.1:6380", "redis"));
        assert!(!hosts.allows("redis://localhost:6379", "redis"));
        assert!(
            !hosts.allows("rediss://127.0.0.1:6379", "redis"),
            "scheme must match"
        );
        assert!(!hosts.allows("http://127.0.0.1:6379", "redis"));
    }

    #[test]
    fn entry_without_port_uses_the_default_port() {
        let hosts = allowed(&["redis://localhost"]);
        assert!(hosts.allows("redis://localhost:6379", "redis"));
        assert!(hosts.allows("redis://localhost", "redis"));
        assert!(!hosts.allows("redis://localhost:7000", "redis"));
    }

    #[test]
    fn wildcards() {
        assert!(allowed(&["redis://*:6379"]).allows("redis://example.com:6379", "redis"));
        assert!(!allowed(&["redis://*:6379"]).allows("redis://example.com:1", "redis"));
        assert!(allowed(&["redis://127.0.0.1:*"]).allows("redis://127.0.0.1:1234", "redis"));
        assert!(allowed(&["*://127.0.0.1:6379"]).allows("redis://127.0.0.1:6379", "redis"));
        assert!(allowed(&["*://*:*"]).allows("redis://anything:1", "redis"));
        let sub = allowed(&["redis://*.example.com:6379"]);
        assert!(sub.allows("redis://db.example.com:6379", "redis"));
        assert!(!sub.allows("redis://example.org:6379", "redis"));
    }

    #[test]
    fn port_ranges_exclude_the_end() {
        let hosts = allowed(&["redis://127.0.0.1:7000..7002"]);
        assert!(hosts.allows("redis://127.0.0.1:7000", "redis"));
        assert!(hosts.allows("redis://127.0.0.1:7001", "redis"));
        assert!(!hosts.allows("redis://127.0.0.1:7002", "redis"));
    }

    #[test]
    fn hosts_compare_case_insensitively() {
        assert!(allowed(&["redis://LocalHost:6379"]).allows("redis://localhost:6379", "redis"));
        assert!(allowed(&["redis://localhost:6379"]).allows("redis://LOCALHOST:6379", "redis"));
    }

    #[test]
    fn userinfo_is_not_the_host() {
        let hosts = allowed(&["redis://127.0.0.1:6379"]);
        assert!(hosts.allows("redis://:secret@127.0.0.1:6379", "redis"));
        assert!(hosts.allows("redis://user:p@ss@127.0.0.1:6379/2", "redis"));
        assert!(!hosts.allows("redis://127.0.0.1:6379@evil.example:6379", "redis"));
    }

    #[test]
    fn scheme_less_addresses_get_the_default_scheme() {
        let hosts = allowed(&["redis://127.0.0.1:6379"]);
        assert!(hosts.allows("127.0.0.1:6379", "redis"));
    }

    #[test]
    fn unparseable_addresses_are_not_allowed() {
        let hosts = allowed(&["*://*:*"]);
        assert!(!hosts.allows("not a url", "redis"));
        assert!(!hosts.allows("", "redis"));
        assert!(!hosts.allows("redis://[::1", "redis"));
    }

    #[test]
    fn no_entries_allow_nothing() {
        assert!(!AllowedHosts::default().allows("redis://127.0.0.1:6379", "redis"));
    }

    #[test]
    fn invalid_entries_are_rejected() {
        for entry in [
            "127.0.0.1:6379",
            "*",
            "redis://",
            "redis://h:port",
            "redis://h:1/path",
            "foo://h",
            "re dis://h:1",
        ] {
            assert!(AllowedHosts::parse(&[entry]).is_err(), "{entry}");
        }
    }

    #[test]
    fn templated_entries_resolve_from_application_variables() {
        let decls = BTreeMap::from([(
            "redis_url".to_owned(),
            VariableDecl {
                default: Some("redis://127.0.0.1:6379".into()),
                ..Default::default()
            },
        )]);
        let overrides =
            HashMap::from([("redis_url".to_owned(), "redis://10.0.0.5:7000".to_owned())]);
        let app = AppVariables::resolve(&decls, &overrides, |_| None).unwrap();
        let hosts = AllowedHosts::resolve("touch", &["{{ redis_url }}".to_owned()], &app).unwrap();
        assert!(hosts.allows("redis://10.0.0.5:7000", "redis"));
        assert!(!hosts.allows("redis://127.0.0.1:6379", "redis"));
    }

    #[test]
    fn entries_rendering_empty_are_skipped() {
        let decls = BTreeMap::from([(
            "x".to_owned(),
            VariableDecl {
                default: Some(String::new()),
                ..Default::default()
            },
        )]);
        let app = AppVariables::resolve(&decls, &HashMap::new(), |_| None).unwrap();
        let hosts = AllowedHosts::resolve("c", &["{{ x }}".to_owned()], &app).unwrap();
        assert!(!hosts.allows("redis://127.0.0.1:6379", "redis"));
    }
}
