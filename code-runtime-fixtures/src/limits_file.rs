//! [`LimitsFile`]: the `--limits` file of the command line.

use std::path::Path;

use code_runtime::Limits;
use code_runtime::json::{self, JsonValue};

use crate::{FixtureError, read_document};

/// `{"timeoutMs", "computeMs", "memoryMb", "maxOutputBytes", "maxCalls", "maxCallsPerFunction",
/// "maxPendingCalls"}`, all optional: the budgets a file sets, applied over a provider's defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LimitsFile {
    /// `timeoutMs`: the wall clock ([`Limits::max_wall_ms`]).
    pub timeout_ms: Option<u64>,
    /// `computeMs` ([`Limits::compute_ms`]).
    pub compute_ms: Option<u64>,
    /// `memoryMb` ([`Limits::max_memory_mb`]).
    pub memory_mb: Option<u64>,
    /// `maxOutputBytes` ([`Limits::max_output_bytes`]).
    pub max_output_bytes: Option<u64>,
    /// `maxCalls` ([`Limits::max_calls`]).
    pub max_calls: Option<u64>,
    /// `maxCallsPerFunction` ([`Limits::max_calls_per_function`]).
    pub max_calls_per_function: Option<u64>,
    /// `maxPendingCalls` ([`Limits::max_pending_calls`]).
    pub max_pending_calls: Option<u64>,
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
            let slot = match key.as_str() {
                "timeoutMs" => &mut file.timeout_ms,
                "computeMs" => &mut file.compute_ms,
                "memoryMb" => &mut file.memory_mb,
                "maxOutputBytes" => &mut file.max_output_bytes,
                "maxCalls" => &mut file.max_calls,
                "maxCallsPerFunction" => &mut file.max_calls_per_function,
                "maxPendingCalls" => &mut file.max_pending_calls,
                other => {
                    return Err(FixtureError::new(format!(
                        "{origin}: unknown limit {} (timeoutMs, computeMs, memoryMb, maxOutputBytes, maxCalls, maxCallsPerFunction, maxPendingCalls)",
                        json::quote(other)
                    )));
                }
            };
            *slot = Some(number);
        }
        Ok(file)
    }

    /// `limits` with what this file sets.
    pub fn apply(&self, limits: Limits) -> Limits {
        Limits {
            max_wall_ms: self.timeout_ms.unwrap_or(limits.max_wall_ms),
            compute_ms: self.compute_ms.unwrap_or(limits.compute_ms),
            max_memory_mb: self.memory_mb.unwrap_or(limits.max_memory_mb),
            max_output_bytes: self.max_output_bytes.unwrap_or(limits.max_output_bytes),
            max_calls: self.max_calls.unwrap_or(limits.max_calls),
            max_calls_per_function: self
                .max_calls_per_function
                .unwrap_or(limits.max_calls_per_function),
            max_pending_calls: self.max_pending_calls.unwrap_or(limits.max_pending_calls),
        }
    }
}
