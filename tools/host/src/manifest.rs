//! Reading `spin.toml` (manifest version 2): only the parts this host uses.
//!
//! Unknown keys (for example `[component.NAME.build]`) are ignored, as the
//! host never builds anything.

use anyhow::{Context, Result, bail, ensure};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A parsed Spin application manifest.
#[derive(Debug, Deserialize)]
pub struct Manifest {
    /// Must be 2.
    pub spin_manifest_version: u32,
    /// Application metadata.
    pub application: Application,
    /// Application variables by name.
    #[serde(default)]
    pub variables: BTreeMap<String, VariableDecl>,
    /// Triggers by type; only `http` is used.
    #[serde(default)]
    pub trigger: Triggers,
    /// Components by id.
    #[serde(default)]
    pub component: BTreeMap<String, ComponentDecl>,
}

/// The `[application]` table.
#[derive(Debug, Deserialize)]
pub struct Application {
    /// Application name.
    pub name: String,
    /// Application version.
    #[serde(default)]
    pub version: Option<String>,
}

/// One entry of the `[variables]` table.
#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct VariableDecl {
    /// The value used when no provider has one.
    #[serde(default)]
    pub default: Option<String>,
    /// Whether a provider must supply a value.
    #[serde(default)]
    pub required: bool,
    /// Whether the value is a secret (kept out of logs; no other effect here).
    #[serde(default)]
    pub secret: bool,
}

/// The `[trigger]` table.
#[derive(Debug, Default, Deserialize)]
pub struct Triggers {
    /// The `[[trigger.http]]` entries.
    #[serde(default)]
    pub http: Vec<HttpTrigger>,
}

/// One `[[trigger.http]]` entry.
#[derive(Debug, Deserialize)]
pub struct HttpTrigger {
    /// Where the component is mounted.
    pub route: RouteDecl,
    /// The id of the component that serves the route.
    pub component: String,
}

/// A trigger route: a path pattern, or `{ private = true }` for an unroutable component.
#[derive(Debug, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum RouteDecl {
    /// A path pattern such as `/v1/touch` or `/api/...`.
    Path(String),
    /// A component reachable only by service chaining.
    Private {
        /// Must be true.
        private: bool,
    },
}

/// One `[component.NAME]` table.
#[derive(Debug, Deserialize)]
pub struct ComponentDecl {
    /// Path of the Wasm file, relative to the manifest directory.
    pub source: SourceDecl,
    /// Outbound destinations the component may reach (may contain `{{ var }}` templates).
    #[serde(default)]
    pub allowed_outbound_hosts: Vec<String>,
    /// Component variables: name -> template over application variables.
    #[serde(default)]
    pub variables: BTreeMap<String, String>,
    /// Environment variables of the component's WASI context, taken as written
    /// (Spin does not render templates in them); the guest lists them in name order.
    #[serde(default)]
    pub environment: BTreeMap<String, String>,
}

/// A component `source`: only local files are supported by this host.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum SourceDecl {
    /// A path relative to the manifest directory.
    Local(String),
    /// Any other form (URL, registry reference): rejected with a clear error.
    Other(serde::de::IgnoredAny),
}

impl Manifest {
    /// Reads and validates the manifest at `path`.
    pub fn load(path: &Path) -> Result<Manifest> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read manifest {}", path.display()))?;
        Manifest::parse(&text).with_context(|| format!("invalid manifest {}", path.display()))
    }

    /// Parses and validates manifest text.
    pub fn parse(text: &str) -> Result<Manifest> {
        let manifest: Manifest = toml::from_str(text)?;
        manifest.validate()?;
        Ok(manifest)
    }

    /// The Wasm file of `component`, resolved against the manifest directory.
    pub fn component_path(&self, manifest_dir: &Path, component: &str) -> Result<PathBuf> {
        let decl =
            self.component.get(component).with_context(|| format!("no component `{component}` in the manifest"))?;
        match &decl.source {
            SourceDecl::Local(source) => Ok(manifest_dir.join(source)),
            SourceDecl::Other(_) => {
                bail!("component `{component}`: only local file `source`s are supported")
            }
        }
    }

    /// Keeps only the components `retained` names and the triggers that
    /// serve them, as `spin up --component-id` does (Spin's
    /// `retain_components`): every other route is gone, so a request for it
    /// is a plain 404. The application's variables all stay: Spin still
    /// resolves every required one at startup. Fails, as Spin does, on an id
    /// the manifest does not have, and on a retained component allowed to
    /// chain to one that is not (`http://<id>.spin.internal`, or `*`).
    pub fn retain_components(&mut self, retained: &[String]) -> Result<()> {
        for id in retained {
            ensure!(self.component.contains_key(id), "Specified component \"{id}\" not found in application");
        }
        for trigger in self.trigger.http.iter().filter(|t| retained.contains(&t.component)) {
            let hosts = &self.component[&trigger.component].allowed_outbound_hosts;
            for target in hosts.iter().filter_map(|host| service_chaining_target(host)) {
                if retained.iter().any(|id| id == target) {
                    continue;
                }
                let id = &trigger.component;
                if target == "*" {
                    bail!(
                        "Selected component '{id}' cannot use wildcard service chaining: \
                         allowed_outbound_hosts = [\"http://*.spin.internal\"]"
                    );
                }
                bail!(
                    "Selected component '{id}' cannot use service chaining to unselected component: \
                     allowed_outbound_hosts = [\"http://{target}.spin.internal\"]"
                );
            }
        }
        self.trigger.http.retain(|trigger| retained.contains(&trigger.component));
        // A retained component that no trigger serves goes too, as in Spin.
        let served: BTreeSet<String> = self.trigger.http.iter().map(|t| t.component.clone()).collect();
        self.component.retain(|id, _| served.contains(id));
        Ok(())
    }

    fn validate(&self) -> Result<()> {
        ensure!(
            self.spin_manifest_version == 2,
            "spin_manifest_version must be 2, found {}",
            self.spin_manifest_version
        );
        self.validate_variables()?;
        self.validate_triggers()?;
        for id in self.component.keys() {
            self.component_path(Path::new(""), id)?;
        }
        Ok(())
    }

    fn validate_variables(&self) -> Result<()> {
        for (name, decl) in &self.variables {
            crate::variables::validate_name(name)
                .map_err(|reason| anyhow::anyhow!("invalid variable name {name:?}: {reason}"))?;
            ensure!(
                !(decl.required && decl.default.is_some()),
                "variable `{name}` cannot be both required and have a default"
            );
        }
        Ok(())
    }

    fn validate_triggers(&self) -> Result<()> {
        for trigger in &self.trigger.http {
            ensure!(
                self.component.contains_key(&trigger.component),
                "trigger route {:?} refers to unknown component `{}`",
                trigger.route,
                trigger.component
            );
            if let RouteDecl::Private { private } = trigger.route {
                ensure!(private, "route of component `{}` must be a path or `{{ private = true }}`", trigger.component);
            }
        }
        Ok(())
    }
}

/// The component an `allowed_outbound_hosts` entry chains to
/// (`http://<id>.spin.internal`), if it is one; a templated entry is not
/// rendered yet and counts as none (Spin cannot parse it as a URI either).
fn service_chaining_target(entry: &str) -> Option<&str> {
    if entry.contains("{{") {
        return None;
    }
    let (_, rest) = entry.split_once("://")?;
    let authority = rest.split('/').next()?;
    let host = authority.rsplit_once(':').map_or(authority, |(host, _)| host);
    let (first, domain) = host.split_once('.')?;
    (domain == "spin.internal").then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project_manifest() -> Manifest {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../spin.toml");
        Manifest::load(&path).expect("the project's spin.toml parses")
    }

    #[test]
    fn parses_the_project_manifest() {
        let manifest = project_manifest();
        assert_eq!(manifest.application.name, "unread");
        assert!(!manifest.trigger.http.is_empty());
        for trigger in &manifest.trigger.http {
            assert!(manifest.component.contains_key(&trigger.component));
        }
    }

    #[test]
    fn project_manifest_variables_are_declared() {
        let manifest = project_manifest();
        let redis = &manifest.variables["redis_url"];
        assert!(redis.default.is_some() && redis.secret && !redis.required);
        for (id, component) in &manifest.component {
            for template in component.variables.values() {
                let template = crate::variables::Template::parse(template).unwrap();
                for name in template.referenced_variables() {
                    assert!(manifest.variables.contains_key(name), "{id} uses undeclared {name}");
                }
            }
        }
    }

    #[test]
    fn project_manifest_sources_are_relative_to_the_manifest() {
        let manifest = project_manifest();
        let (id, _) = manifest.component.iter().next().unwrap();
        let path = manifest.component_path(Path::new("/app"), id).unwrap();
        assert!(path.starts_with("/app") && path.extension().is_some_and(|e| e == "wasm"));
    }

    const MINIMAL: &str = r#"
        spin_manifest_version = 2
        [application]
        name = "x"
        [variables]
        a = { default = "1" }
        b = { required = true, secret = true }
        [[trigger.http]]
        route = "/..."
        component = "c"
        [[trigger.http]]
        route = { private = true }
        component = "c"
        [component.c]
        source = "c.wasm"
        allowed_outbound_hosts = ["redis://{{ a }}"]
        [component.c.variables]
        v = "{{ a }}"
        [component.c.build]
        command = "make"
        [component.c.unknown]
        whatever = 1
    "#;

    #[test]
    fn parses_tables_and_ignores_build_and_unknown_keys() {
        let manifest = Manifest::parse(MINIMAL).unwrap();
        assert_eq!(manifest.variables["a"].default.as_deref(), Some("1"));
        assert!(manifest.variables["b"].required);
        assert_eq!(manifest.trigger.http[0].route, RouteDecl::Path("/...".into()));
        assert_eq!(manifest.trigger.http[1].route, RouteDecl::Private { private: true });
        assert_eq!(manifest.component["c"].variables["v"], "{{ a }}");
        assert!(manifest.component["c"].environment.is_empty());
    }

    #[test]
    fn parses_the_environment_table() {
        let text = MINIMAL.replace(
            "allowed_outbound_hosts = [",
            "environment = { B = \"2\", A = \"{{ a }}\" }\n        allowed_outbound_hosts = [",
        );
        let manifest = Manifest::parse(&text).unwrap();
        let environment: Vec<_> = manifest.component["c"].environment.iter().collect();
        assert_eq!(environment, [(&"A".to_owned(), &"{{ a }}".to_owned()), (&"B".to_owned(), &"2".to_owned())]);
    }

    const THREE: &str = r#"
        spin_manifest_version = 2
        [application]
        name = "x"
        [variables]
        secret = { required = true }
        [[trigger.http]]
        route = "/a"
        component = "a"
        [[trigger.http]]
        route = "/a2"
        component = "a"
        [[trigger.http]]
        route = "/b"
        component = "b"
        [[trigger.http]]
        route = "/..."
        component = "rest"
        [component.a]
        source = "a.wasm"
        allowed_outbound_hosts = ["redis://{{ secret }}"]
        [component.b]
        source = "b.wasm"
        [component.rest]
        source = "rest.wasm"
        [component.unrouted]
        source = "u.wasm"
    "#;

    fn routes(manifest: &Manifest) -> Vec<(String, &str)> {
        let route = |r: &RouteDecl| match r {
            RouteDecl::Path(path) => path.clone(),
            RouteDecl::Private { .. } => "private".into(),
        };
        manifest.trigger.http.iter().map(|t| (route(&t.route), t.component.as_str())).collect()
    }

    #[test]
    fn retaining_components_keeps_their_routes_and_every_variable() {
        let mut manifest = Manifest::parse(THREE).unwrap();
        manifest.retain_components(&["a".into()]).unwrap();
        assert_eq!(routes(&manifest), [("/a".into(), "a"), ("/a2".into(), "a")]);
        assert_eq!(manifest.component.keys().collect::<Vec<_>>(), ["a"]);
        assert!(manifest.variables.contains_key("secret"), "Spin keeps the app's variables");

        let mut manifest = Manifest::parse(THREE).unwrap();
        manifest.retain_components(&["rest".into(), "b".into(), "unrouted".into()]).unwrap();
        assert_eq!(routes(&manifest), [("/b".into(), "b"), ("/...".into(), "rest")]);
        assert_eq!(manifest.component.keys().collect::<Vec<_>>(), ["b", "rest"], "an unrouted one goes");
    }

    #[test]
    fn retaining_an_unknown_component_fails_as_in_spin() {
        let mut manifest = Manifest::parse(THREE).unwrap();
        let err = manifest.retain_components(&["a".into(), "nope".into()]).unwrap_err().to_string();
        assert_eq!(err, "Specified component \"nope\" not found in application");
    }

    #[test]
    fn retained_components_may_chain_only_to_retained_ones() {
        let chaining = |hosts: &str| {
            THREE.replace(
                "allowed_outbound_hosts = [\"redis://{{ secret }}\"]",
                &format!("allowed_outbound_hosts = [{hosts}]"),
            )
        };
        let mut manifest = Manifest::parse(&chaining("\"http://b.spin.internal\"")).unwrap();
        let err = manifest.retain_components(&["a".into()]).unwrap_err().to_string();
        assert!(err.contains("cannot use service chaining to unselected component") && err.contains("b.spin"), "{err}");
        let mut manifest = Manifest::parse(&chaining("\"http://*.spin.internal\"")).unwrap();
        let err = manifest.retain_components(&["a".into(), "b".into()]).unwrap_err().to_string();
        assert!(err.contains("wildcard service chaining"), "{err}");
        let mut manifest =
            Manifest::parse(&chaining("\"http://b.spin.internal:80\", \"http://{{ secret }}.spin.internal\"")).unwrap();
        manifest.retain_components(&["a".into(), "b".into()]).unwrap();
        assert_eq!(manifest.component.len(), 2);
    }

    #[test]
    fn rejects_other_manifest_versions() {
        let text = MINIMAL.replace("spin_manifest_version = 2", "spin_manifest_version = 1");
        assert!(Manifest::parse(&text).is_err());
    }

    #[test]
    fn rejects_triggers_of_unknown_components() {
        let text = MINIMAL.replace("component = \"c\"", "component = \"nope\"");
        let err = format!("{:#}", Manifest::parse(&text).unwrap_err());
        assert!(err.contains("nope"), "{err}");
    }

    #[test]
    fn rejects_required_variables_with_defaults() {
        let text = MINIMAL.replace("b = { required = true,", "b = { default = \"x\", required = true,");
        assert!(Manifest::parse(&text).is_err());
    }

    #[test]
    fn rejects_remote_sources() {
        let text =
            MINIMAL.replace("source = \"c.wasm\"", "source = { url = \"https://x/c.wasm\", digest = \"sha256:00\" }");
        let err = format!("{:#}", Manifest::parse(&text).unwrap_err());
        assert!(err.contains("local file"), "{err}");
    }
}
