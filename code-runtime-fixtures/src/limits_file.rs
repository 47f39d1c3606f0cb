//! [`LimitsFile`]: the `--limits` file of the command line.

use std::path::Path;

use std::fmt;

use code_runtime::json::{self, JsonValue};
use code_runtime::{Budget, Limits, RunLimits};
use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};

use crate::{FixtureError, NonNegative, from_document, read_document};

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
        from_document(document, origin)
    }

    /// `limits` with what this file sets.
    pub fn apply(&self, limits: Limits) -> Limits {
        limits.overridden(&self.values)
    }
}

/// The file's format, also met as the `limits` of a larger document (the MCP config): an
/// object of budget keys.
impl<'de> Deserialize<'de> for LimitsFile {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(Keys)
    }
}

/// Reads the budgets of a limits object by their keys.
struct Keys;

impl<'de> Visitor<'de> for Keys {
    type Value = LimitsFile;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of limits")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LimitsFile, A::Error> {
        let mut file = LimitsFile::default();
        while let Some(key) = map.next_key::<String>()? {
            let Some(budget) = Budget::ALL.into_iter().find(|budget| budget.key() == key) else {
                let keys: Vec<&str> = Budget::ALL.map(Budget::key).to_vec();
                return Err(de::Error::custom(format_args!(
                    "unknown limit {} ({})",
                    json::quote(&key),
                    keys.join(", ")
                )));
            };
            let NonNegative(number) = map.next_value()?;
            *budget.request_slot(&mut file.values) = Some(number);
        }
        Ok(file)
    }
}
