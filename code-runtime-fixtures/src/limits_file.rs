//! [`LimitsFile`]: the `--limits` file of the command line.

use std::path::Path;

use code_runtime::json::{self, JsonValue};
use code_runtime::{Budget, Limits, RunLimits};

use crate::{FixtureError, read_document};

/// `{"timeoutMs", "computeMs", "memoryMb", "maxOutputBytes", "maxCalls", "maxCallsPerFunction",
/// "maxPendingCalls"}` (each budget's [`Budget::key`]), all optional: the budgets a file sets,
/// applied over a provider's defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LimitsFile {
    /// What the file sets, by budget.
    pub values: RunLimits,
}

impl LimitsFile {
    /// Reads a limits file.
    ///
    /// # Errors
    ///
    /// A [`FixtureError`] for an unreadable file or one not in the format.
    pub fn load(path: &Path) -> Result<Self, FixtureError> {
        Self::from_json(&read_document(path)?, &path.display().to_string())
    }

    /// Reads a parsed limits document; `origin` names it in errors.
    ///
    /// # Errors
    ///
    /// A [`FixtureError`] for anything but an object of known keys holding non-negative integers.
    pub fn from_json(document: &JsonValue, origin: &str) -> Result<Self, FixtureError> {
        let object = document
            .as_object()
            .ok_or_else(|| FixtureError::new(format!("{origin}: expected a JSON object")))?;
        let mut file = Self::default();
        for (key, value) in object {
            let number = value.as_u64().ok_or_else(|| {
                FixtureError::new(format!("{origin}: {key} must be a non-negative integer"))
            })?;
            let Some(budget) = Budget::ALL.into_iter().find(|budget| budget.key() == key) else {
                let keys: Vec<&str> = Budget::ALL.map(Budget::key).to_vec();
                return Err(FixtureError::new(format!(
                    "{origin}: unknown limit {} ({})",
                    json::quote(key),
                    keys.join(", ")
                )));
            };
            *budget.request_slot(&mut file.values) = Some(number);
        }
        Ok(file)
    }

    /// `limits` with what this file sets.
    pub fn apply(&self, limits: Limits) -> Limits {
        limits.overridden(&self.values)
    }
}
