//! Application and component variables, and the `spin:variables/variables@3.0.0` host.
//!
//! The rules follow Spin 4.1 (`crates/factor-variables`, `crates/expressions`,
//! `crates/variables-env`): an application variable's value comes from the
//! first provider that has one: explicit overrides (Spin's `--variable`), then
//! the environment (`SPIN_VARIABLE_<NAME>`), then the manifest default.
//! Component variables are templates over application variables
//! (`"{{ redis_url }}"`). Names follow Spin's rules ([`validate_name`]).

use crate::bindings::spin::variables::variables::{Error as VariableError, Host, HostWithStore};
use crate::error::HostError;
use crate::manifest::VariableDecl;
use anyhow::{Result, bail};
use std::collections::{BTreeMap, HashMap};
use wasmtime::component::{Accessor, HasData};

/// The prefix of environment variables that provide application variable values.
pub const ENV_PREFIX: &str = "SPIN_VARIABLE_";

/// Checks Spin's rules for a variable name; `Err` holds the reason.
///
/// Names are non-empty, use lowercase ASCII letters, digits and underscores,
/// start with a letter, do not end with an underscore and have no `__`. The
/// checks run in Spin's order and the reasons are Spin's own words
/// (`spin-expressions`' `Key::validate`), as a guest sees them in
/// `invalid-name` errors.
pub fn validate_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("must not be empty".into());
    }
    if let Some(bad) = name.chars().find(|c| !matches!(c, 'a'..='z' | '0'..='9' | '_')) {
        return Err(format!(
            "invalid character {bad:?}. Variable names may contain only lower-case letters, numbers, and underscores."
        ));
    }
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err("must start with a lowercase ASCII letter".into());
    }
    if name.ends_with('_') {
        return Err("must end with a lowercase ASCII letter or digit".into());
    }
    if name.contains("__") {
        return Err("must not contain multiple consecutive underscores".into());
    }
    Ok(())
}

/// The environment variable that provides a value for application variable `name`.
pub fn env_var_name(name: &str) -> String {
    format!("{ENV_PREFIX}{}", name.to_ascii_uppercase())
}

/// A string with `{{ variable }}` expressions, as used in the manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    parts: Vec<TemplatePart>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum TemplatePart {
    Literal(String),
    Variable(String),
}

impl Template {
    /// Parses `text`; fails on an unmatched `{{` or an invalid variable name.
    pub fn parse(text: &str) -> Result<Template> {
        let mut parts = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            if let Some(after_open) = rest.strip_prefix("{{") {
                let Some((expr, after_close)) = after_open.split_once("}}") else {
                    bail!("unmatched '{{{{' in template {text:?}");
                };
                let name = expr.trim();
                if let Err(reason) = validate_name(name) {
                    bail!("invalid variable name {name:?} in template {text:?}: {reason}");
                }
                parts.push(TemplatePart::Variable(name.to_owned()));
                rest = after_close;
            } else {
                let end = rest.find("{{").unwrap_or(rest.len());
                parts.push(TemplatePart::Literal(rest[..end].to_owned()));
                rest = &rest[end..];
            }
        }
        Ok(Template { parts })
    }

    /// Whether the template has no `{{ variable }}` expressions.
    pub fn is_literal(&self) -> bool {
        self.parts.iter().all(|part| matches!(part, TemplatePart::Literal(_)))
    }

    /// The names of the variables the template refers to.
    #[cfg(test)]
    pub fn referenced_variables(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|part| match part {
            TemplatePart::Variable(name) => Some(name.as_str()),
            TemplatePart::Literal(_) => None,
        })
    }

    /// Substitutes application variable values; fails on an undeclared variable.
    pub fn render(&self, app: &AppVariables) -> Result<String> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                TemplatePart::Literal(text) => out.push_str(text),
                TemplatePart::Variable(name) => match app.get(name) {
                    Some(value) => out.push_str(value),
                    None => bail!("template refers to unknown application variable `{name}`"),
                },
            }
        }
        Ok(out)
    }
}

/// Resolved values of all application variables.
#[derive(Clone, Debug, Default)]
pub struct AppVariables {
    values: HashMap<String, String>,
}

impl AppVariables {
    /// Resolves every declared variable: `overrides`, then `env`, then the default.
    ///
    /// Fails naming every required variable that no provider has a value for.
    pub fn resolve(
        decls: &BTreeMap<String, VariableDecl>,
        overrides: &HashMap<String, String>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<AppVariables> {
        let mut values = HashMap::new();
        let mut missing = Vec::new();
        for (name, decl) in decls {
            let value =
                overrides.get(name).cloned().or_else(|| env(&env_var_name(name))).or_else(|| decl.default.clone());
            match value {
                Some(value) => {
                    values.insert(name.clone(), value);
                }
                None if decl.required => missing.push(name.as_str()),
                None => {}
            }
        }
        if !missing.is_empty() {
            let hints: Vec<String> =
                missing.iter().map(|name| format!("`{name}` (set {})", env_var_name(name))).collect();
            bail!("required application variable(s) without a value: {}", hints.join(", "));
        }
        Ok(AppVariables { values })
    }

    /// Only the manifest defaults (variables without one have no value).
    ///
    /// Spin validates templated `allowed_outbound_hosts` entries with these
    /// when it loads the application, before any provider is consulted.
    pub fn defaults_only(decls: &BTreeMap<String, VariableDecl>) -> AppVariables {
        let values = decls.iter().filter_map(|(name, decl)| Some((name.clone(), decl.default.clone()?))).collect();
        AppVariables { values }
    }

    /// Resolves with the process environment as the environment provider.
    pub fn resolve_from_process_env(
        decls: &BTreeMap<String, VariableDecl>,
        overrides: &HashMap<String, String>,
    ) -> Result<AppVariables> {
        AppVariables::resolve(decls, overrides, |key| std::env::var(key).ok())
    }

    /// The value of application variable `name`, if it has one.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }
}

/// The variables one component may read, with their values resolved.
#[derive(Clone, Debug, Default)]
pub struct ComponentVariables {
    component: String,
    values: HashMap<String, String>,
}

impl ComponentVariables {
    /// Resolves the component's `[component.ID.variables]` templates.
    pub fn resolve(
        component: &str,
        templates: &BTreeMap<String, String>,
        app: &AppVariables,
    ) -> Result<ComponentVariables> {
        let mut values = HashMap::new();
        for (name, text) in templates {
            let value = validate_name(name)
                .map_err(|reason| anyhow::anyhow!("invalid name: {reason}"))
                .and_then(|()| Template::parse(text)?.render(app));
            match value {
                Ok(value) => values.insert(name.clone(), value),
                Err(e) => bail!("component `{component}`, variable `{name}`: {e:#}"),
            };
        }
        Ok(ComponentVariables { component: component.to_owned(), values })
    }

    /// What `spin:variables/variables.get(name)` answers for this component.
    pub fn lookup(&self, name: &str) -> Result<String, VariableError> {
        if let Err(reason) = validate_name(name) {
            return Err(VariableError::InvalidName(format!("{name:?}: {reason}")));
        }
        self.values
            .get(name)
            .cloned()
            .ok_or_else(|| VariableError::Undefined(format!("no variable for {:?}.{name:?}", self.component)))
    }
}

/// [`HasData`] marker for the `spin:variables` host; its view is the component's variables.
pub struct VariablesHost;

impl HasData for VariablesHost {
    type Data<'a> = &'a ComponentVariables;
}

impl Host for &ComponentVariables {
    fn convert_error(&mut self, error: HostError<VariableError>) -> wasmtime::Result<VariableError> {
        error.into_guest()
    }
}

impl<T> HostWithStore<T> for VariablesHost {
    async fn get(accessor: &Accessor<T, Self>, name: String) -> Result<String, HostError<VariableError>> {
        Ok(accessor.with(|mut access| access.get().lookup(&name))?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decls(entries: &[(&str, Option<&str>, bool)]) -> BTreeMap<String, VariableDecl> {
        entries
            .iter()
            .map(|(name, default, required)| {
                let decl = VariableDecl { default: default.map(str::to_owned), required: *required, secret: false };
                (name.to_string(), decl)
            })
            .collect()
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn valid_names() {
        for name in ["a", "abc", "a1b2c3", "a_1", "a_1_b_3", "redis_url"] {
            assert_eq!(validate_name(name), Ok(()), "{name}");
        }
    }

    #[test]
    fn invalid_names() {
        for name in ["", "aX", "1bc", "_x", "x.y", "x_", "a__b", "x-y", "Redis_url", "a b"] {
            assert!(validate_name(name).is_err(), "{name}");
        }
    }

    #[test]
    fn invalid_name_reasons_are_spins_words() {
        let reason = |name: &str| validate_name(name).unwrap_err();
        assert_eq!(reason(""), "must not be empty");
        assert_eq!(
            reason("a-b"),
            "invalid character '-'. Variable names may contain only lower-case letters, numbers, and underscores."
        );
        assert_eq!(reason("4a"), "must start with a lowercase ASCII letter");
        assert_eq!(reason("a_"), "must end with a lowercase ASCII letter or digit");
        assert_eq!(reason("a__b"), "must not contain multiple consecutive underscores");
        let vars = ComponentVariables::default();
        let Err(VariableError::InvalidName(text)) = vars.lookup("a__b") else { panic!("not invalid-name") };
        assert_eq!(text, "\"a__b\": must not contain multiple consecutive underscores");
    }

    #[test]
    fn defaults_apply_without_other_providers() {
        let app = AppVariables::resolve(&decls(&[("a", Some("1"), false)]), &HashMap::new(), no_env).unwrap();
        assert_eq!(app.get("a"), Some("1"));
    }

    #[test]
    fn environment_beats_default() {
        let env = |key: &str| (key == "SPIN_VARIABLE_REDIS_URL").then(|| "redis://env".to_owned());
        let app = AppVariables::resolve(&decls(&[("redis_url", Some("d"), false)]), &HashMap::new(), env).unwrap();
        assert_eq!(app.get("redis_url"), Some("redis://env"));
    }

    #[test]
    fn overrides_beat_environment() {
        let env = |_: &str| Some("from-env".to_owned());
        let overrides = HashMap::from([("a".to_owned(), "from-override".to_owned())]);
        let app = AppVariables::resolve(&decls(&[("a", Some("d"), false)]), &overrides, env).unwrap();
        assert_eq!(app.get("a"), Some("from-override"));
    }

    #[test]
    fn missing_required_variables_are_all_named() {
        let decls = decls(&[("jwt_secret", None, true), ("service_token", None, true)]);
        let err = AppVariables::resolve(&decls, &HashMap::new(), no_env).unwrap_err().to_string();
        assert!(err.contains("jwt_secret") && err.contains("SPIN_VARIABLE_JWT_SECRET"), "{err}");
        assert!(err.contains("service_token"), "{err}");
    }

    #[test]
    fn optional_variables_may_stay_unset() {
        let app = AppVariables::resolve(&decls(&[("a", None, false)]), &HashMap::new(), no_env).unwrap();
        assert_eq!(app.get("a"), None);
    }

    #[test]
    fn templates_render_literals_and_variables() {
        let app = AppVariables::resolve(&decls(&[("host", Some("h"), false)]), &HashMap::new(), no_env).unwrap();
        let render = |text: &str| Template::parse(text).unwrap().render(&app).unwrap();
        assert_eq!(render("plain"), "plain");
        assert_eq!(render("{{ host }}"), "h");
        assert_eq!(render("{{host}}"), "h");
        assert_eq!(render("redis://{{ host }}:1/{{ host }}"), "redis://h:1/h");
        assert_eq!(render(""), "");
    }

    #[test]
    fn literal_templates() {
        assert!(Template::parse("mysql://h:1").unwrap().is_literal());
        assert!(Template::parse("").unwrap().is_literal());
        assert!(!Template::parse("mysql://{{ h }}").unwrap().is_literal());
    }

    #[test]
    fn defaults_only_ignores_providers_and_required_variables() {
        let decls = decls(&[("a", Some("1"), false), ("b", None, true)]);
        let app = AppVariables::defaults_only(&decls);
        assert_eq!(app.get("a"), Some("1"));
        assert_eq!(app.get("b"), None);
    }

    #[test]
    fn bad_templates_are_rejected() {
        assert!(Template::parse("{{ open").is_err());
        assert!(Template::parse("{{ Bad }}").is_err());
        let app = AppVariables::default();
        assert!(Template::parse("{{ unknown }}").unwrap().render(&app).is_err());
    }

    fn component_with(templates: &[(&str, &str)]) -> Result<ComponentVariables> {
        let app = AppVariables::resolve(
            &decls(&[("redis_url", Some("redis://x"), false), ("n", Some("5"), false)]),
            &HashMap::new(),
            no_env,
        )
        .unwrap();
        let templates = templates.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        ComponentVariables::resolve("touch", &templates, &app)
    }

    #[test]
    fn component_variables_resolve_templates() {
        let vars = component_with(&[("redis_url", "{{ redis_url }}"), ("lit", "x{{ n }}")]).unwrap();
        assert_eq!(vars.lookup("redis_url").unwrap(), "redis://x");
        assert_eq!(vars.lookup("lit").unwrap(), "x5");
    }

    #[test]
    fn component_variables_must_reference_declared_variables() {
        let err = format!("{:#}", component_with(&[("a", "{{ nope }}")]).unwrap_err());
        assert!(err.contains("touch") && err.contains("nope"), "{err}");
    }

    #[test]
    fn lookup_of_undeclared_name_is_undefined() {
        let vars = component_with(&[("redis_url", "{{ redis_url }}")]).unwrap();
        assert!(matches!(vars.lookup("n"), Err(VariableError::Undefined(_))));
    }

    #[test]
    fn lookup_of_invalid_name_is_invalid_name() {
        let vars = component_with(&[]).unwrap();
        for name in ["Redis_url", "", "a-b", "_a"] {
            assert!(matches!(vars.lookup(name), Err(VariableError::InvalidName(_))), "{name}");
        }
    }
}
