//! `cargo xtask image [--tag NAME]`: the `Containerfile` built into an image (default tag
//! `code-runtime:dev`) by the first container builder that works here: podman, docker (with a
//! daemon that answers) or buildah. With the offline V8 library beside the project, the build
//! is handed it (`--build-context v8=DIR`), so no download is needed for it.
//!
//! Where no builder works, it says why and builds nothing: that is not a failure (CI machines
//! have none), but a builder that starts and fails is.

use std::process::{Command, Stdio};

use crate::toolchain::{offline_v8_archive, project_root};

/// Each builder, and the subcommand that tells whether it can build now.
const BUILDERS: [(&str, &[&str]); 3] =
    [("podman", &["info"]), ("docker", &["info"]), ("buildah", &["info"])];

#[expect(clippy::disallowed_methods, reason = "xtask runs the container builder")]
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let tag = match args {
        [] => "code-runtime:dev".to_owned(),
        [flag, tag] if flag == "--tag" => tag.clone(),
        _ => return Err("usage: cargo xtask image [--tag NAME]".into()),
    };
    let mut why_not = Vec::new();
    let Some(builder) = BUILDERS.iter().find_map(|(builder, probe)| {
        match Command::new(builder).args(*probe).stdout(Stdio::null()).output() {
            Ok(output) if output.status.success() => Some(*builder),
            Ok(output) => {
                let said = String::from_utf8_lossy(&output.stderr);
                let said = said.lines().find(|line| !line.trim().is_empty()).unwrap_or("");
                why_not.push(format!("{builder} is installed but cannot build ({said})"));
                None
            }
            Err(_) => {
                why_not.push(format!("no {builder}"));
                None
            }
        }
    }) else {
        println!("image: not built: {}", why_not.join("; "));
        return Ok(());
    };
    let mut build = Command::new(builder);
    build.current_dir(project_root()).args(["build", "--file", "Containerfile", "--tag", &tag]);
    if let Some(archive) = offline_v8_archive() {
        let (Some(dir), Some(name)) = (archive.parent(), archive.file_name()) else {
            return Err(format!("{} is not a file in a directory", archive.display()));
        };
        build.arg("--build-context").arg(format!("v8={}", dir.display()));
        build.arg("--build-arg").arg(format!("RUSTY_V8_ARCHIVE=/v8/{}", name.to_string_lossy()));
    }
    build.arg(".");
    println!("image: {builder} build --tag {tag}");
    let status = build.status().map_err(|error| format!("{builder}: {error}"))?;
    if status.success() { Ok(()) } else { Err(format!("{builder} build failed ({status})")) }
}
