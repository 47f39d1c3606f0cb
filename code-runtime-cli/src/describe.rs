//! `code-runtime describe`: what the model should read about a bindings file.

use std::path::PathBuf;
use std::process::ExitCode;

use code_runtime_fixtures::{Recorder, load_bindings};

use crate::Failure;

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
}

pub(crate) fn main(args: Args) -> Result<ExitCode, Failure> {
    let Args { bindings, language } = args;
    let path = bindings.ok_or("describe needs --bindings FILE")?;
    let request = load_bindings(&path, &Recorder::off())?.request(String::new());
    let text = code_runtime::describe_request(&request, language)?;
    crate::print_stdout(&text);
    Ok(ExitCode::SUCCESS)
}
