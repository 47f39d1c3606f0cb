//! [`CellSpec`]: what a kind of cell runs and may use, as a host describes it.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::Options;

/// What a kind of cell runs and may use.
#[derive(Clone, Debug)]
pub struct CellSpec {
    /// The program: an absolute path, which must be among (or beneath) `read_only`.
    pub executable: PathBuf,
    /// Its argument vector, `argv[0]` first.
    pub args: Vec<OsString>,
    /// Host paths the program may read, visible at the same paths in the cell. The system's
    /// shared-library directories, the dynamic loader's cache and the time zones are added.
    pub read_only: Vec<PathBuf>,
    /// The layers asked for.
    pub options: Options,
    /// A directory where what this machine gives is remembered between processes (see
    /// [`CellPlan::new`](crate::CellPlan::new)); `None` probes in every process.
    pub machine_cache: Option<PathBuf>,
}
