//! `code-runtime describe`: what the model should read about a bindings file.

use std::path::PathBuf;
use std::process::ExitCode;

use code_runtime_fixtures::{Recorder, load_bindings};

use crate::Failure;

pub(crate) fn main(args: &[String]) -> Result<ExitCode, Failure> {
    let mut bindings: Option<PathBuf> = None;
    let mut language = "typescript".to_owned();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let mut value =
            || rest.next().cloned().ok_or_else(|| Failure::Misuse(format!("{arg} needs a value")));
        match arg.as_str() {
            "--bindings" => bindings = Some(value()?.into()),
            "--language" => language = value()?,
            other => return Err(Failure::Misuse(format!("unexpected argument {other}"))),
        }
    }
    if language != "typescript" && language != "python" {
        return Err(Failure::Misuse(format!(
            "--language must be typescript or python, got {language}"
        )));
    }
    let path = bindings.ok_or("describe needs --bindings FILE")?;
    let request = load_bindings(&path, &Recorder::off())?.request(String::new());
    let text = code_runtime::describe_request(&request, &language)?;
    crate::print_stdout(&text);
    Ok(ExitCode::SUCCESS)
}
