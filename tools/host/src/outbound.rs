//! `allowed_outbound_hosts`: which network destinations a component may reach.
//!
//! Parsing and matching follow Spin 4.1's outbound-networking configuration
//! (`crates/outbound-networking-config/src/allowed_hosts.rs`):
//!
//! - An entry is `<scheme>://<host>[:<port>]` with an optional trailing `/`.
//!   The scheme is `*` or letters (compared exactly); the host is `*`,
//!   `*.<domain>`, an IP network in CIDR form (`10.0.0.0/8`), a domain or IP
//!   literal, or `self`; the port is `*`, a number or a range `A..B` (end
//!   excluded). Without a port, the scheme's well-known port applies (`mysql`
//!   3306, `postgres` 5432, `redis` 6379, ...). Userinfo (`user:pw@`) and
//!   paths (`/db`) make an entry invalid.
//! - A literal entry that does not parse stops the application from loading.
//!   A templated entry (`"{{ db_url }}"`) is checked at load time only with
//!   the variables' manifest defaults; at run time it is rendered with the
//!   resolved values. If it renders to `""`, `"http://"` or `"https://"` it is
//!   ignored; if it renders to anything invalid, every outbound check of the
//!   component fails (the guest sees an `other` error) instead of the load.
//! - A destination is parsed as a URL (with the capability's scheme put in
//!   front when it has none); its userinfo and path are ignored.

use crate::variables::{AppVariables, Template};
use anyhow::{Context, Result, bail, ensure};
use ipnet::IpNet;
use std::borrow::Cow;
use std::net::IpAddr;
use std::ops::Range;
use url::Host;

/// The ports assumed when neither the entry nor the destination names one (Spin's list).
fn well_known_port(scheme: &str) -> Option<u16> {
    match scheme {
        "postgres" => Some(5432),
        "mysql" => Some(3306),
        "redis" => Some(6379),
        "mqtt" => Some(1883),
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

/// The resolved `allowed_outbound_hosts` of one component.
#[derive(Clone, Debug)]
pub struct AllowedHosts {
    component: String,
    /// The parsed entries, or why the templated entries could not be resolved.
    resolved: Result<Vec<AllowedHost>, String>,
}

/// Why an outbound connection is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Denied {
    /// The destination is not in `allowed_outbound_hosts` (or cannot be parsed).
    NotAllowed,
    /// The component's `allowed_outbound_hosts` could not be resolved; the text says why.
    CheckFailed(String),
}

/// One `allowed_outbound_hosts` entry as written, with its template parsed.
struct Entry<'a> {
    text: &'a str,
    template: Template,
}

impl AllowedHosts {
    /// Parses the component's entries, rendering templates with `values`.
    ///
    /// Fails (the application does not load) on an invalid template, an
    /// invalid literal entry, or a templated entry that is invalid with the
    /// manifest `defaults` of its variables. A templated entry that becomes
    /// invalid only with the resolved `values` does not fail here: the
    /// component's outbound checks report it instead.
    pub fn resolve(
        component: &str,
        entries: &[String],
        values: &AppVariables,
        defaults: &AppVariables,
    ) -> Result<AllowedHosts> {
        let context = || format!("component `{component}`: `allowed_outbound_hosts` is malformed");
        let entries = parse_templates(entries).with_context(context)?;
        validate_with_defaults(&entries, defaults).with_context(context)?;
        let resolved = render_all(&entries, values);
        if let Err(reason) = &resolved {
            eprintln!(
                "unread-host: component `{component}`: `allowed_outbound_hosts` is malformed \
                 with the variables' values ({reason}); every outbound connection will fail"
            );
        }
        Ok(AllowedHosts { component: component.to_owned(), resolved })
    }

    /// Parses already-resolved entries for `component`.
    #[cfg(test)]
    pub fn parse(component: &str, entries: &[&str]) -> Result<AllowedHosts> {
        let entries = entries.iter().map(|e| AllowedHost::parse(e)).collect::<Result<_>>()?;
        Ok(AllowedHosts { component: component.to_owned(), resolved: Ok(entries) })
    }

    /// Whether the component may connect to `address`; `default_scheme`
    /// applies when the address has none (`127.0.0.1:3306`).
    ///
    /// A refusal is logged to stderr, like `spin up` does.
    pub fn permit(&self, address: &str, default_scheme: &str) -> Result<(), Denied> {
        let Some(target) = Target::parse(address, default_scheme) else {
            eprintln!(
                "unread-host: component `{}` tried to connect to {address:?}, which is not a valid address",
                self.component
            );
            return Err(Denied::NotAllowed);
        };
        let entries = self.resolved.as_ref().map_err(|e| Denied::CheckFailed(e.clone()))?;
        if entries.iter().any(|entry| entry.allows(&target)) {
            return Ok(());
        }
        let destination = target.destination();
        eprintln!(
            "unread-host: component `{}` tried to connect to {destination}, which its \
             allowed_outbound_hosts do not permit (add \"{destination}\" to allow it)",
            self.component
        );
        Err(Denied::NotAllowed)
    }
}

impl Default for AllowedHosts {
    /// No entries: nothing is allowed.
    fn default() -> AllowedHosts {
        AllowedHosts { component: String::new(), resolved: Ok(Vec::new()) }
    }
}

/// Parses every entry as a template; `insecure:allow-all` alone is refused as in Spin.
fn parse_templates(entries: &[String]) -> Result<Vec<Entry<'_>>> {
    if let [only] = entries
        && only == "insecure:allow-all"
    {
        bail!(
            "'insecure:allow-all' is not allowed - use '*://*:*' instead if you really want to allow all outbound traffic"
        );
    }
    entries
        .iter()
        .map(|text| {
            let template = Template::parse(text)?;
            Ok(Entry { text, template })
        })
        .collect()
}

/// Load-time validation: literal entries must parse; templated entries must
/// parse when rendered with the manifest defaults (skipped if a variable has none).
fn validate_with_defaults(entries: &[Entry<'_>], defaults: &AppVariables) -> Result<()> {
    for entry in entries {
        if entry.template.is_literal() {
            AllowedHost::parse(entry.text)?;
        } else if let Ok(rendered) = entry.template.render(defaults) {
            parse_or_skip(&rendered).with_context(|| {
                format!(
                    "using default variable value(s) with template {:?} results in invalid config {rendered:?}",
                    entry.text
                )
            })?;
        }
    }
    Ok(())
}

/// Run-time resolution: renders every entry with the resolved values.
fn render_all(entries: &[Entry<'_>], values: &AppVariables) -> Result<Vec<AllowedHost>, String> {
    let mut parsed = Vec::new();
    for entry in entries {
        let host = if entry.template.is_literal() {
            AllowedHost::parse(entry.text).map(Some)
        } else {
            entry.template.render(values).and_then(|rendered| parse_or_skip(&rendered))
        };
        // Like Spin, the guest only sees the outermost message.
        parsed.extend(host.map_err(|e| e.to_string())?);
    }
    Ok(parsed)
}

/// Parses a rendered template; the renderings of an empty variable are ignored
/// (Spin's "optional endpoint": `""`, `"http://"`, `"https://"`, untrimmed).
fn parse_or_skip(rendered: &str) -> Result<Option<AllowedHost>> {
    if matches!(rendered, "" | "http://" | "https://") {
        return Ok(None);
    }
    AllowedHost::parse(rendered).map(Some)
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
    /// `self` / `self.alt`: relative HTTP requests only, never a network destination.
    ToSelf,
    Literal(Host),
    Network(IpNet),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum PortPattern {
    Any,
    Exact(u16),
    /// `A..B`: `B` excluded.
    Range(Range<u16>),
}

impl AllowedHost {
    fn parse(original: &str) -> Result<AllowedHost> {
        let url = original.trim();
        let Some((scheme, rest)) = url.split_once("://") else {
            match url {
                "*" | ":" | "" | "?" => bail!(
                    "{url:?} is not an allowed outbound host format.\nHosts must be in the form \
                     <scheme>://<host>[:<port>], with '*' wildcards allowed for each.\nIf you intended \
                     to allow all outbound networking, you can use '*://*:*' - this will obviate all \
                     network sandboxing."
                ),
                _ => bail!("{url:?} does not contain a scheme (e.g., 'http://' or '*://')"),
            }
        };
        let (host, port) = split_host_port(url, rest)?;
        let port = PortPattern::parse(port, scheme).with_context(|| format!("Invalid allowed host port {port:?}"))?;
        let scheme = SchemePattern::parse(scheme).with_context(|| format!("Invalid allowed host scheme {scheme:?}"))?;
        let host = HostPattern::parse(host).with_context(|| format!("Invalid allowed host {host:?}"))?;
        Ok(AllowedHost { scheme, host, port })
    }

    fn allows(&self, target: &Target) -> bool {
        self.scheme.allows(&target.scheme)
            && self.host.allows(&target.host)
            && self.port.allows(target.port, &target.scheme)
    }
}

/// Splits what follows `scheme://` into host and port text, the way Spin does:
/// at the last `:`, unless the whole text is already a valid host (IPv6).
fn split_host_port<'a>(url: &str, rest: &'a str) -> Result<(&'a str, &'a str)> {
    match rest.rsplit_once(':') {
        None => Ok((rest, "")),
        Some((host, "")) => Ok((host, "")),
        Some(_) if HostPattern::parse(rest).is_ok() => Ok((rest, "")),
        Some((host, tail)) => match tail.split_once('/') {
            Some((_, path)) if !path.is_empty() => {
                bail!("{url:?} has a path but is not allowed to")
            }
            Some((port, _)) => Ok((host, port)),
            None => Ok((host, tail)),
        },
    }
}

impl SchemePattern {
    fn parse(scheme: &str) -> Result<SchemePattern> {
        if scheme == "*" {
            return Ok(SchemePattern::Any);
        }
        ensure!(!scheme.starts_with('{'), "scheme lists are not supported");
        ensure!(scheme.chars().all(char::is_alphabetic), "only alphabetic characters are allowed");
        Ok(SchemePattern::Exact(scheme.to_owned()))
    }

    fn allows(&self, scheme: &str) -> bool {
        match self {
            SchemePattern::Any => true,
            SchemePattern::Exact(expected) => expected == scheme,
        }
    }
}

impl HostPattern {
    fn parse(host: &str) -> Result<HostPattern> {
        let host = host.trim();
        match host {
            "*" => return Ok(HostPattern::Any),
            "self" | "self.alt" => return Ok(HostPattern::ToSelf),
            _ => {}
        }
        ensure!(!host.starts_with('{'), "host lists are not yet supported");
        if let Some(network) = parse_network(host) {
            return Ok(HostPattern::Network(network));
        }
        let host = host.strip_suffix('/').unwrap_or(host);
        ensure!(!host.contains('/'), "must not include a path");
        if let Some(domain) = host.strip_prefix("*.") {
            ensure!(!domain.contains('*'), "wildcards are allowed only as prefixes");
            let parsed = Host::parse(domain).with_context(|| format!("invalid wildcard host \"*.{domain}\""))?;
            let Host::Domain(domain) = parsed else {
                bail!("wildcard suffix must be a domain");
            };
            return Ok(HostPattern::SubdomainOf(format!(".{domain}")));
        }
        ensure!(!host.contains('*'), "wildcards are allowed only as subdomains");
        Ok(HostPattern::Literal(Host::parse(host)?))
    }

    fn allows(&self, host: &Host) -> bool {
        match (self, host) {
            (HostPattern::Any, _) => true,
            (HostPattern::SubdomainOf(suffix), Host::Domain(domain)) => domain.ends_with(suffix),
            (HostPattern::Literal(expected), host) => expected == host,
            (HostPattern::Network(network), Host::Ipv4(ip)) => network.contains(&IpAddr::V4(*ip)),
            (HostPattern::Network(network), Host::Ipv6(ip)) => network.contains(&IpAddr::V6(*ip)),
            _ => false,
        }
    }
}

/// Parses `address/prefix` as Spin does (`ip_network::IpNetwork::from_str_truncate`):
/// the address in std syntax, the prefix a decimal `u8` no longer than the
/// address, host bits cleared. `None` if `text` is not of that form.
fn parse_network(text: &str) -> Option<IpNet> {
    let (address, prefix) = text.split_once('/')?;
    let network = IpNet::new(address.parse().ok()?, prefix.parse().ok()?).ok()?;
    Some(network.trunc())
}

impl PortPattern {
    fn parse(port: &str, scheme: &str) -> Result<PortPattern> {
        if port.is_empty() {
            return well_known_port(scheme).map(PortPattern::Exact).with_context(|| {
                format!("no port was provided and the scheme {scheme:?} does not have a known default port number")
            });
        }
        if port == "*" {
            return Ok(PortPattern::Any);
        }
        ensure!(!port.starts_with('{'), "port lists are not yet supported");
        if let Some((start, end)) = port.split_once("..") {
            let number =
                |text: &str| text.parse::<u16>().with_context(|| format!("port range {port:?} contains non-number"));
            return Ok(PortPattern::Range(number(start)?..number(end)?));
        }
        let number = port.parse().with_context(|| format!("port {port:?} is not a number"))?;
        Ok(PortPattern::Exact(number))
    }

    /// Whether `port` (or, without one, the scheme's well-known port) is allowed.
    fn allows(&self, port: Option<u16>, scheme: &str) -> bool {
        let port = port.or_else(|| well_known_port(scheme));
        match (self, port) {
            (PortPattern::Any, _) => true,
            (_, None) => false,
            (PortPattern::Exact(expected), Some(port)) => *expected == port,
            (PortPattern::Range(range), Some(port)) => range.contains(&port),
        }
    }
}

/// The destination of an outbound connection.
#[derive(Debug)]
struct Target {
    scheme: String,
    host: Host,
    /// Only an explicit port (a special scheme's default port reads as none).
    port: Option<u16>,
}

impl Target {
    /// Parses `address` as a URL, retrying as `default_scheme://address`.
    ///
    /// As in Spin, the userinfo is percent-encoded first, so that a password
    /// with `#`, `/` or `@` in it cannot change which host is checked.
    fn parse(address: &str, default_scheme: &str) -> Option<Target> {
        let address = encode_userinfo(address);
        let url = match url::Url::parse(&address) {
            Ok(url) if url.has_host() => url,
            _ => url::Url::parse(&format!("{default_scheme}://{address}")).ok()?,
        };
        // Non-special schemes keep hosts verbatim: parse them like the entries.
        let host = Host::parse(url.host_str()?).ok()?;
        Some(Target { scheme: url.scheme().to_owned(), host, port: url.port() })
    }

    /// `scheme://host[:port]`, for messages.
    fn destination(&self) -> String {
        match self.port {
            Some(port) => format!("{}://{}:{port}", self.scheme, self.host),
            None => format!("{}://{}", self.scheme, self.host),
        }
    }
}

/// Percent-encodes everything between `://` (or the start) and the first `@`,
/// when that `@` comes before the first `/` of the rest.
fn encode_userinfo(address: &str) -> Cow<'_, str> {
    let Some(at) = address.find('@') else {
        return Cow::Borrowed(address);
    };
    let start = address.find("://").map_or(0, |i| i + 3);
    let path_start = address[start..].find('/').map_or(usize::MAX, |i| i + start);
    if at < start || at > path_start {
        return Cow::Borrowed(address);
    }
    let mut encoded = String::with_capacity(address.len() + 16);
    encoded.push_str(&address[..start]);
    for byte in address[start..at].bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded.push_str(&address[at..]);
    Cow::Owned(encoded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::VariableDecl;
    use std::collections::{BTreeMap, HashMap};

    fn allowed(entries: &[&str]) -> AllowedHosts {
        AllowedHosts::parse("c", entries).unwrap()
    }

    fn allows(hosts: &AllowedHosts, address: &str, scheme: &str) -> bool {
        hosts.permit(address, scheme).is_ok()
    }

    /// `(defaults, values)` for variables declared with `decls` and overridden by `overrides`.
    fn variables(decls: &[(&str, Option<&str>)], overrides: &[(&str, &str)]) -> (AppVariables, AppVariables) {
        let decls: BTreeMap<String, VariableDecl> = decls
            .iter()
            .map(|(name, default)| {
                let decl = VariableDecl { default: default.map(str::to_owned), ..Default::default() };
                (name.to_string(), decl)
            })
            .collect();
        let overrides: HashMap<String, String> =
            overrides.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let values = AppVariables::resolve(&decls, &overrides, |_| None).unwrap();
        (AppVariables::defaults_only(&decls), values)
    }

    fn resolve(entries: &[&str], vars: &(AppVariables, AppVariables)) -> Result<AllowedHosts> {
        let entries: Vec<String> = entries.iter().map(|e| e.to_string()).collect();
        AllowedHosts::resolve("c", &entries, &vars.1, &vars.0)
    }

    #[test]
    fn exact_entry_allows_only_that_destination() {
        let hosts = allowed(&["redis://127.0.0.1:6379"]);
        assert!(allows(&hosts, "redis://127.0.0.1:6379", "redis"));
        assert!(allows(&hosts, "redis://127.0.0.1:6379/0", "redis"));
        assert!(allows(&hosts, "redis://127.0.0.1", "redis"), "default redis port");
        assert!(!allows(&hosts, "redis://127.0.0.1:6380", "redis"));
        assert!(!allows(&hosts, "redis://localhost:6379", "redis"));
        assert!(!allows(&hosts, "rediss://127.0.0.1:6379", "redis"), "scheme must match");
        assert!(!allows(&hosts, "http://127.0.0.1:6379", "redis"));
    }

    #[test]
    fn entry_without_port_uses_the_default_port() {
        let hosts = allowed(&["redis://localhost"]);
        assert!(allows(&hosts, "redis://localhost:6379", "redis"));
        assert!(allows(&hosts, "redis://localhost", "redis"));
        assert!(!allows(&hosts, "redis://localhost:7000", "redis"));
    }

    #[test]
    fn database_default_ports() {
        let hosts = allowed(&["mysql://127.0.0.1", "postgres://127.0.0.1"]);
        assert!(allows(&hosts, "mysql://root@127.0.0.1/test", "mysql"));
        assert!(allows(&hosts, "mysql://root@127.0.0.1:3306/test", "mysql"));
        assert!(!allows(&hosts, "mysql://root@127.0.0.1:5432/test", "mysql"));
        assert!(allows(&hosts, "127.0.0.1:5432", "postgres"));
        assert!(allows(&hosts, "127.0.0.1", "postgres"));
        assert!(!allows(&hosts, "127.0.0.1:3306", "postgres"));
    }

    #[test]
    fn wildcards() {
        let any_host = allowed(&["redis://*:6379"]);
        assert!(allows(&any_host, "redis://example.com:6379", "redis"));
        assert!(!allows(&any_host, "redis://example.com:1", "redis"));
        assert!(allows(&allowed(&["redis://127.0.0.1:*"]), "redis://127.0.0.1:1234", "redis"));
        assert!(allows(&allowed(&["*://127.0.0.1:6379"]), "redis://127.0.0.1:6379", "redis"));
        assert!(allows(&allowed(&["*://*:*"]), "redis://anything:1", "redis"));
        assert!(allows(&allowed(&["*://*:*"]), "tcp://anything", "tcp"), "no port needed");
        let sub = allowed(&["redis://*.example.com:6379"]);
        assert!(allows(&sub, "redis://db.example.com:6379", "redis"));
        assert!(allows(&sub, "redis://a.b.Example.COM:6379", "redis"));
        assert!(!allows(&sub, "redis://example.com:6379", "redis"));
        assert!(!allows(&sub, "redis://example.org:6379", "redis"));
    }

    #[test]
    fn rediss_has_no_well_known_port() {
        // Spin's list of well-known ports has no `rediss`: an entry must name
        // its port, and an address without one is allowed only by a `*` port
        // (redis-rs would connect to 6379).
        assert!(AllowedHost::parse("rediss://cache.example.com").is_err());
        let hosts = allowed(&["rediss://cache.example.com:6380"]);
        assert!(allows(&hosts, "rediss://cache.example.com:6380", "redis"));
        assert!(allows(&hosts, "rediss://user:pw@cache.example.com:6380/2", "redis"));
        assert!(!allows(&hosts, "redis://cache.example.com:6380", "redis"), "scheme must match");
        assert!(!allows(&hosts, "rediss://cache.example.com", "redis"));
        assert!(!allows(&allowed(&["rediss://cache.example.com:6379"]), "rediss://cache.example.com", "redis"));
        assert!(allows(&allowed(&["rediss://cache.example.com:*"]), "rediss://cache.example.com", "redis"));
    }

    #[test]
    fn port_ranges_exclude_the_end() {
        let hosts = allowed(&["redis://127.0.0.1:7000..7002"]);
        assert!(allows(&hosts, "redis://127.0.0.1:7000", "redis"));
        assert!(allows(&hosts, "redis://127.0.0.1:7001", "redis"));
        assert!(!allows(&hosts, "redis://127.0.0.1:7002", "redis"));
        assert!(!allows(&allowed(&["redis://h:0..0"]), "redis://h:0", "redis"));
    }

    #[test]
    fn cidr_networks() {
        let hosts = allowed(&["mysql://10.1.0.0/16", "*://127.0.0.1/24:5432", "postgres://fd00::/8"]);
        assert!(allows(&hosts, "mysql://10.1.200.3", "mysql"));
        assert!(!allows(&hosts, "mysql://10.2.0.1", "mysql"));
        assert!(!allows(&hosts, "mysql://db.example.com", "mysql"));
        assert!(allows(&hosts, "postgres://127.0.0.9:5432", "postgres"));
        assert!(allows(&hosts, "postgres://[fd12::1]", "postgres"));
        assert!(!allows(&hosts, "postgres://[fe00::1]", "postgres"));
    }

    #[test]
    fn ipv6_literals() {
        let hosts = allowed(&["postgres://[::1]", "mysql://[::1]:3307"]);
        assert!(allows(&hosts, "postgres://[::1]:5432", "postgres"));
        assert!(allows(&hosts, "mysql://[::1]:3307", "mysql"));
        assert!(!allows(&hosts, "mysql://[::1]", "mysql"));
    }

    #[test]
    fn hosts_compare_case_insensitively_schemes_exactly() {
        let hosts = allowed(&["redis://LocalHost:6379"]);
        assert!(allows(&hosts, "redis://localhost:6379", "redis"));
        assert!(allows(&allowed(&["redis://localhost:6379"]), "redis://LOCALHOST:6379", "redis"));
        // Destinations' schemes are lowercased by URL parsing; entries' are not.
        assert!(!allows(&allowed(&["Redis://localhost:6379"]), "redis://localhost:6379", "redis"));
    }

    #[test]
    fn userinfo_and_path_of_destinations_are_ignored() {
        let hosts = allowed(&["redis://127.0.0.1:6379", "mysql://xyz.com"]);
        assert!(allows(&hosts, "redis://:secret@127.0.0.1:6379", "redis"));
        assert!(allows(&hosts, "redis://user:p@ss@127.0.0.1:6379/2", "redis"));
        assert!(!allows(&hosts, "redis://127.0.0.1:6379@evil.example:6379", "redis"));
        assert!(allows(&hosts, "mysql://user:pass#word@xyz.com", "mysql"));
        assert!(allows(&hosts, "mysql://user%3Apass%23word@xyz.com/db?x=1", "mysql"));
        assert!(allows(&hosts, "user%3Apass%23word@xyz.com", "mysql"));
    }

    #[test]
    fn scheme_less_addresses_get_the_default_scheme() {
        let hosts = allowed(&["redis://127.0.0.1:6379", "postgres://localhost"]);
        assert!(allows(&hosts, "127.0.0.1:6379", "redis"));
        assert!(allows(&hosts, "localhost:5432", "postgres"));
        assert!(allows(&hosts, "localhost", "postgres"));
    }

    #[test]
    fn unparseable_addresses_are_not_allowed() {
        let hosts = allowed(&["*://*:*"]);
        for address in ["not a url", "", "::1:5432"] {
            assert_eq!(hosts.permit(address, "redis"), Err(Denied::NotAllowed), "{address}");
        }
        // As in Spin, the retry with the scheme in front reads this one as host `redis`.
        let hosts = allowed(&["redis://127.0.0.1:6379"]);
        assert_eq!(hosts.permit("redis://[::1", "redis"), Err(Denied::NotAllowed));
    }

    #[test]
    fn no_entries_allow_nothing() {
        assert!(!allows(&AllowedHosts::default(), "redis://127.0.0.1:6379", "redis"));
    }

    #[test]
    fn self_is_never_a_network_destination() {
        assert!(!allows(&allowed(&["mysql://self"]), "mysql://self", "mysql"));
    }

    #[test]
    fn database_urls_accepted_as_entries() {
        for entry in [
            "mysql://127.0.0.1:3306",
            "mysql://127.0.0.1",
            "mysql://127.0.0.1:3306/",
            "mysql://localhost/",
            "postgres://127.0.0.1:5432",
            "postgres://db.example.com",
            "postgres://*:5432",
            "*://127.0.0.1:*",
        ] {
            assert!(AllowedHost::parse(entry).is_ok(), "{entry}");
        }
    }

    #[test]
    fn connection_strings_are_not_entries() {
        for entry in [
            "mysql://root@127.0.0.1:3306",
            "mysql://root:pw@127.0.0.1:3306",
            "mysql://root@127.0.0.1",
            "mysql://127.0.0.1:3306/test",
            "mysql://root@127.0.0.1:3306/test",
            "postgres://postgres@127.0.0.1:5432/test",
            "postgres://127.0.0.1/test",
            "postgres://127.0.0.1:5432/test?sslmode=disable",
            "host=127.0.0.1 user=postgres",
            "127.0.0.1:3306",
        ] {
            assert!(AllowedHost::parse(entry).is_err(), "{entry}");
        }
    }

    #[test]
    fn invalid_entries_are_rejected() {
        for entry in [
            "*",
            "",
            "redis://",
            "mysql://",
            "redis://h:port",
            "redis://h:1/path",
            "foo://h",
            "rediss://h",
            "re dis://h:1",
            "http://example.com:99999",
            "http://*.127.0.0.1",
            "http://exa*mple.com",
            "http://{a,b}:80",
            "http://a:{1,2}",
            "{http,https}://a",
            "http://example.com//",
        ] {
            assert!(AllowedHost::parse(entry).is_err(), "{entry}");
        }
    }

    #[test]
    fn literal_invalid_entries_fail_the_load() {
        let vars = variables(&[], &[]);
        let err = format!("{:#}", resolve(&["mysql://root@127.0.0.1:3306"], &vars).unwrap_err());
        assert!(err.contains("component `c`") && err.contains("root@127.0.0.1"), "{err}");
        assert!(resolve(&[""], &vars).is_err(), "a literal empty entry is an error");
        assert!(resolve(&["insecure:allow-all"], &vars).is_err());
        assert!(resolve(&["{{ unclosed"], &vars).is_err());
    }

    #[test]
    fn templated_entries_resolve_from_application_variables() {
        let vars =
            variables(&[("redis_url", Some("redis://127.0.0.1:6379"))], &[("redis_url", "redis://10.0.0.5:7000")]);
        let hosts = resolve(&["{{ redis_url }}"], &vars).unwrap();
        assert!(allows(&hosts, "redis://10.0.0.5:7000", "redis"));
        assert!(!allows(&hosts, "redis://127.0.0.1:6379", "redis"));
    }

    #[test]
    fn templates_rendering_empty_are_ignored() {
        for empty in ["", "http://", "https://"] {
            let vars = variables(&[("x", Some(empty))], &[]);
            let hosts = resolve(&["{{ x }}", "mysql://db:3306"], &vars).unwrap();
            assert!(allows(&hosts, "mysql://db", "mysql"), "{empty:?}");
            assert!(!allows(&hosts, "http://anything", "http"), "{empty:?}");
        }
        let vars = variables(&[("host", Some(""))], &[]);
        let hosts = resolve(&["https://{{ host }}"], &vars).unwrap();
        assert_eq!(hosts.permit("https://x", "https"), Err(Denied::NotAllowed));
    }

    #[test]
    fn templates_rendering_invalid_defaults_fail_the_load() {
        for default in ["mysql://", " ", "mysql://root@127.0.0.1:3306/test"] {
            let vars = variables(&[("sql_url", Some(default))], &[]);
            assert!(resolve(&["{{ sql_url }}"], &vars).is_err(), "{default:?}");
        }
    }

    #[test]
    fn templates_rendering_invalid_values_fail_every_check() {
        let vars = variables(&[("sql_url", None)], &[("sql_url", "mysql://root@127.0.0.1:3306/test")]);
        let hosts = resolve(&["{{ sql_url }}", "redis://127.0.0.1"], &vars).unwrap();
        let Err(Denied::CheckFailed(text)) = hosts.permit("redis://127.0.0.1", "redis") else {
            panic!("expected the check to fail");
        };
        assert!(text.contains("has a path"), "{text}");
        // An unparseable destination is refused before the entries are consulted.
        assert_eq!(hosts.permit("not a url", "mysql"), Err(Denied::NotAllowed));
    }

    #[test]
    fn templates_without_defaults_are_checked_only_at_run_time() {
        let vars = variables(&[("pg_host", None)], &[("pg_host", "127.0.0.1")]);
        let hosts = resolve(&["postgres://{{ pg_host }}:5432"], &vars).unwrap();
        assert!(allows(&hosts, "127.0.0.1:5432", "postgres"));
        let unknown = resolve(&["postgres://{{ nope }}"], &variables(&[], &[])).unwrap();
        assert!(matches!(unknown.permit("127.0.0.1", "postgres"), Err(Denied::CheckFailed(_))));
    }

    #[test]
    fn userinfo_encoding() {
        assert_eq!(encode_userinfo("mysql://a:b#c@h/d"), "mysql://a%3Ab%23c@h/d");
        assert_eq!(encode_userinfo("https://h/file@1.json"), "https://h/file@1.json");
        assert_eq!(encode_userinfo("u:p@h"), "u%3Ap@h");
        assert_eq!(encode_userinfo("a@b://h"), "a@b://h");
    }

    #[test]
    fn network_masks() {
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        let net = parse_network("192.168.1.77/24").unwrap();
        assert_eq!(net.addr(), ip("192.168.1.0"));
        assert!(net.contains(&ip("192.168.1.200")));
        assert!(!net.contains(&ip("192.168.2.1")));
        assert!(parse_network("0.0.0.0/0").unwrap().contains(&ip("8.8.8.8")));
        assert!(parse_network("10.0.0.1/33").is_none());
        assert!(parse_network("10.0.0.1").is_none());
        let v6 = parse_network("2001:db8::/32").unwrap();
        assert!(v6.contains(&ip("2001:db8:abcd::1")));
        assert!(!v6.contains(&ip("10.0.0.1")));
        assert!(parse_network("::1/128").unwrap().contains(&ip("::1")));
        // Spin's prefix syntax is Rust's `u8`: a sign and leading zeros are fine.
        assert_eq!(parse_network("10.1.2.3/+008"), parse_network("10.0.0.0/8"));
    }
}
