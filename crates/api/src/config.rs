//! The functions' Spin variables. A variable the component does not declare
//! (Spin's `undefined`) may take a default; one that cannot be read is a 503,
//! logged with the reason, never a silent default.

use spin_sdk::variables::Error as VariableError;

use crate::Problem;

/// A variable's value; `None` when the component does not declare it.
pub async fn optional_variable(name: &str) -> Result<Option<String>, Problem> {
    match spin_sdk::variables::get(name).await {
        Ok(value) => Ok(Some(value)),
        Err(VariableError::Undefined(_)) => Ok(None),
        // A provider (a vault, say) that fails may recover: unavailable.
        Err(VariableError::Provider(reason)) => {
            Err(Problem::unavailable(format!("variable {name} cannot be read from its provider: {reason}")))
        }
        Err(error) => Err(Problem::misconfigured(format!("variable {name} cannot be read: {error:?}"))),
    }
}

/// A variable the function cannot do without: undeclared is misconfigured.
pub async fn variable(name: &str) -> Result<String, Problem> {
    optional_variable(name)
        .await?
        .ok_or_else(|| Problem::misconfigured(format!("variable {name} is not declared for this component")))
}

/// A variable with a default for when the component does not declare it.
pub async fn variable_or(name: &str, default: &str) -> Result<String, Problem> {
    Ok(optional_variable(name).await?.unwrap_or_else(|| default.to_string()))
}
