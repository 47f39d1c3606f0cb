//! `code-runtime describe`: what the model should read about a bindings file.

use std::path::PathBuf;
use std::process::ExitCode;

use code_runtime_fixtures::{Recorder, load_bindings};

use crate::Failure;
use crate::run::PythonSetup;

/// `code-runtime describe`'s options (CLI.md).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The bindings file, as for `run`.
    #[arg(long, value_name = "FILE")]
    bindings: Option<PathBuf>,
    /// TypeScript declarations or Python stubs.
    #[arg(long, value_name = "LANGUAGE", default_value = "typescript",
          value_parser = crate::language_parser())]
    language: code_runtime::Language,
    /// Python: the interpreter runs will use; when it is a virtual environment's, its packages
    /// (names and versions) follow the stubs, as `code-runtime mcp` tells the model.
    #[arg(long, value_name = "PATH")]
    python: Option<PathBuf>,
}

pub(crate) fn main(args: Args) -> Result<ExitCode, Failure> {
    let Args { bindings, language, python } = args;
    let path = bindings.ok_or("describe needs --bindings FILE")?;
    if python.is_some() && language != code_runtime::Language::Python {
        return Err(Failure::Misuse("--python is for --language python".to_owned()));
    }
    let request = load_bindings(&path, &Recorder::off())?.request(String::new());
    let mut text = code_runtime::describe_request(&request, language)?;
    if let Some(interpreter) = python {
        // The provider learns them as it starts (its probe, cached); nothing runs.
        let setup = PythonSetup { interpreter: Some(interpreter), preload: Vec::new() };
        let runtime = crate::run::python_provider(code_runtime::Limits::default(), false, &setup)?;
        if !runtime.packages().is_empty() {
            text.push_str(&format!("\n#{}\n", packages_line(runtime.packages())));
        }
    }
    crate::print_stdout(&text);
    Ok(ExitCode::SUCCESS)
}

/// The most packages `run_code`'s description names; the rest are counted.
const LISTED_PACKAGES: usize = 200;

/// What a Python program may import beyond the standard library, for the model.
pub(crate) fn packages_line(packages: &[(String, String)]) -> String {
    let listed: Vec<String> = packages
        .iter()
        .take(LISTED_PACKAGES)
        .map(|(name, version)| format!("{name} {version}"))
        .collect();
    let more = packages.len().saturating_sub(LISTED_PACKAGES);
    let more = if more > 0 { format!(" and {more} more") } else { String::new() };
    format!(" Python programs can import these packages: {}{more}.", listed.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_packages_line_names_each_package_with_its_version_and_counts_the_rest() {
        let packages = |count: usize| -> Vec<(String, String)> {
            (0..count).map(|n| (format!("p{n}"), format!("1.{n}"))).collect()
        };
        assert_eq!(
            packages_line(&packages(2)),
            " Python programs can import these packages: p0 1.0, p1 1.1."
        );
        let many = packages_line(&packages(LISTED_PACKAGES + 5));
        assert!(
            many.ends_with(&format!(
                "p{} 1.{} and 5 more.",
                LISTED_PACKAGES - 1,
                LISTED_PACKAGES - 1
            )),
            "{many}"
        );
        assert!(!many.contains(&format!("p{} ", LISTED_PACKAGES)), "{many}");
    }
}
