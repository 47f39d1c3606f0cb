//! `code-runtime describe`: what the model should read about a bindings file.

use std::path::PathBuf;
use std::process::ExitCode;

use code_runtime_fixtures::{Recorder, load_bindings};
use code_runtime_mcp::packages_line;
use code_runtime_providers::{ProviderSpec, PythonSetup};

use crate::Failure;

/// `code-runtime describe`'s options (docs/cli.md).
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
        let spec = ProviderSpec {
            python: PythonSetup { interpreter: Some(interpreter), preload: Vec::new() },
            warm: false,
            resident: false,
            ..ProviderSpec::new(code_runtime::Language::Python)
        };
        let built = crate::run::build(&spec)?;
        if !built.python_packages.is_empty() {
            text.push_str(&format!("\n#{}\n", packages_line(&built.python_packages)));
        }
    }
    crate::print_stdout(&text);
    Ok(ExitCode::SUCCESS)
}
