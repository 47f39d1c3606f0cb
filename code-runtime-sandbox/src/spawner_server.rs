//! The spawner process's side of `spawner_process.rs`: what the plan's executable does once the
//! host executed it to start its cells (see [`serve`]).

use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

use crate::cell::{self, Cell};
use crate::cell_io::{CellExit, CellIo};
use crate::cell_plan::CellPlan;
use crate::cell_server::{
    self, Answer, BUILD, CONTROL_FD, Hello, Report, SpawnerCell, WireSpec, decode, encode,
};
use crate::message::{readable, receive, send};
use crate::plan::WorkerEnd;

/// Serves as the spawner process of the host that executed this process with its fd 3 the
/// spawner's socket: never returns. The host's executable calls it when its arguments say so
/// (`code_runtime_worker_thread::serve_cell_if_asked` does for V8 cells).
///
/// It must run before the process starts any thread: each cell's parent-death signal follows
/// the thread that started it, and this one serves on the main thread until the host is gone.
pub fn serve() -> ! {
    // SAFETY: `_exit` ends a process whose cells end with it (their parent-death signal).
    unsafe { libc::_exit(serve_until_gone(WorkerEnd::Execute)) }
}

/// Serves as [`serve`] does, but each cell's program is `entry`, called in a copy of this
/// process (made by `fork` once the cell's namespaces and layers are on, exactly where the
/// plan's executable would have been executed), which exits with what it returns.
///
/// A cell made so shares with this process every page neither writes: the executable's
/// relocated data (a megabyte and a half of a V8 executable's, which each `exec` writes anew),
/// the C library's, the code. What it shares besides: this process's address-space layout
/// (every cell of the spawner has its executable and libraries at the same addresses; what
/// `entry` maps, a V8 heap, lies where that cell's own draws put it) and its memory, which
/// holds no secret (the host starts it with an empty environment, and tells it only plans).
///
/// `entry` is what the executable's `main` would run in a cell: it owns the process (threads,
/// descriptors 0 to 3, which the cell set up) and must not return into anything of the
/// spawner's; this process must not have started a thread or initialised what `entry` needs
/// fresh in each cell (V8, for one).
pub fn serve_calling(entry: fn() -> libc::c_int) -> ! {
    // SAFETY: as in `serve`.
    unsafe { libc::_exit(serve_until_gone(WorkerEnd::Call(entry))) }
}

fn serve_until_gone(end: WorkerEnd) -> libc::c_int {
    // SAFETY: fstat on a descriptor number, with a buffer it fills.
    let is_socket = unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        libc::fstat(CONTROL_FD, &mut stat) == 0 && stat.st_mode & libc::S_IFMT == libc::S_IFSOCK
    };
    if !is_socket {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "code-runtime spawner process: started by a host with its socket as fd 3, not by hand"
        );
        return 2;
    }
    // SAFETY: fd 3 is the socket the host gave this process, owned by nothing else here.
    let control = unsafe { OwnedFd::from_raw_fd(CONTROL_FD) };
    let Some(plan) = hello(&control) else { return 2 };
    let mut cells: Vec<(Cell, OwnedFd)> = Vec::new();
    loop {
        let mut polled: Vec<libc::pollfd> = std::iter::once(control.as_raw_fd())
            .chain(cells.iter().map(|(cell, _)| cell.pidfd().as_raw_fd()))
            .map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 })
            .collect();
        // SAFETY: poll on pollfds we own, as many as the slice holds.
        let ready = unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, -1) };
        if ready < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return 1;
        }
        // Ended cells first (from the last, so the indices of the others hold).
        for index in (1..polled.len()).rev() {
            if polled[index].revents == 0 {
                continue;
            }
            let (mut cell, report) = cells.swap_remove(index - 1);
            let exit = cell.wait().unwrap_or(CellExit::Killed(libc::SIGKILL));
            let _ = send(report.as_fd(), &Report::Ended(exit).to_bytes(), &[]);
        }
        if polled[0].revents != 0 {
            let Ok((message, fds)) = receive(control.as_fd(), 5) else { return 1 };
            if message.is_empty() && fds.is_empty() {
                return 0; // The host is gone.
            }
            if let Some(started) = serve_request(&plan, &message, fds, end) {
                cells.push(started);
            }
        }
    }
}

/// Reads the host's hello and plans its cells; answers `ready` or `failed`.
fn hello(control: &OwnedFd) -> Option<CellPlan> {
    readable(control, -1);
    let (message, _) = receive(control.as_fd(), 0).ok()?;
    let (answer, plan) = answer_to(&message);
    send(control.as_fd(), &encode(&answer).ok()?, &[]).ok()?;
    plan
}

/// The answer to the hello `message`, and the plan of its cells: a hello that is not one, or
/// from a host of another build, is refused before anything is planned.
fn answer_to(message: &[u8]) -> (Answer, Option<CellPlan>) {
    let planned = decode::<Hello<WireSpec>>(message).and_then(|hello| {
        if hello.build != BUILD {
            return Err(format!("a host of build {} (this spawner is of {BUILD})", hello.build));
        }
        CellPlan::new(&hello.plan.into()).map_err(|error| error.to_string())
    });
    match planned {
        Ok(plan) => {
            let containment = Some(plan.containment());
            (Answer::Ready { build: BUILD.to_owned(), containment }, Some(plan))
        }
        Err(why) => (Answer::Failed { why }, None),
    }
}

/// Starts the cell a request asks for; answers on its report socket.
fn serve_request(
    plan: &CellPlan,
    message: &[u8],
    fds: Vec<OwnedFd>,
    end: WorkerEnd,
) -> Option<(Cell, OwnedFd)> {
    let Ok([stdin, stdout, stderr, channel, report]) = <[OwnedFd; 5]>::try_from(fds) else {
        return None; // Not from our host: it always sends five.
    };
    let refuse = |why: String| drop(send(report.as_fd(), &Report::Failed(why).to_bytes(), &[]));
    let SpawnerCell { limits, outer } = match cell_server::decode(message) {
        Ok(request) => request,
        Err(why) => {
            refuse(why);
            return None;
        }
    };
    // A cell that calls its program is made by the C library's `fork` in a copy of this process
    // (`child.rs`), sound only if no other thread could hold a lock at the clone: checked, not
    // assumed.
    if matches!(end, WorkerEnd::Call(_)) && crate::threads_in_this_process() != Some(1) {
        refuse("the spawner process has more than one thread: it cannot copy itself".to_owned());
        return None;
    }
    let io = CellIo { stdin, stdout, stderr, channel };
    match cell::start(&plan.plan, io, &limits, end, outer) {
        Ok(cell) => {
            let pidfds: Vec<libc::c_int> = std::iter::once(cell.pidfd())
                .chain(cell.worker_pidfd())
                .map(|fd| fd.as_raw_fd())
                .collect();
            if send(report.as_fd(), &Report::Ready.to_bytes(), &pidfds).is_err() {
                // The host gave up on this cell (it waited too long): nobody would end it.
                let mut cell = cell;
                cell.kill();
                return Some((cell, report));
            }
            Some((cell, report))
        }
        Err(error) => {
            refuse(error.to_string());
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hello_of_another_build_or_none_is_refused_before_anything_is_planned() {
        let spec = crate::CellSpec {
            executable: "/nowhere".into(),
            args: Vec::new(),
            read_only: Vec::new(),
            options: crate::Options::default(),
            machine_cache: None,
        };
        let other = Hello { build: "0123456789abcdef".to_owned(), plan: WireSpec::from(&spec) };
        let (answer, plan) = answer_to(&encode(&other).unwrap());
        assert!(plan.is_none());
        let Answer::Failed { why } = answer else { panic!("{answer:?}") };
        assert!(why.contains("a host of build 0123456789abcdef"), "{why}");
        let (answer, plan) = answer_to(b"ready");
        assert!(plan.is_none());
        assert!(matches!(answer, Answer::Failed { .. }), "{answer:?}");
    }
}
