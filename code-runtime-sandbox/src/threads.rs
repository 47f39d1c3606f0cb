//! How many threads this process has: what code that is only sound in a single-threaded process
//! (a copy made by the C library's `fork`, pages released after a check) checks before it acts,
//! rather than trusting a comment.

/// The threads of this process, as the kernel counts them (`/proc/self/stat`'s `num_threads`);
/// `None` when it cannot be read (no `/proc`), which callers take as "not known to be one".
pub fn threads_in_this_process() -> Option<usize> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name, in parentheses, may hold spaces and parentheses: the fields after it
    // start at its last `)`. `num_threads` is the 20th field, the 18th after the name.
    let (_, fields) = stat.rsplit_once(')')?;
    fields.split_ascii_whitespace().nth(17)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::threads_in_this_process;

    #[test]
    fn counts_the_threads_of_this_process() {
        let before = threads_in_this_process().expect("/proc/self/stat");
        assert!(before >= 1);
        let (started, stop) = (std::sync::mpsc::channel::<()>(), std::sync::mpsc::channel::<()>());
        let (ready, go_on) = (started.0, stop.1);
        let thread = std::thread::spawn(move || {
            ready.send(()).expect("the test waits");
            go_on.recv().expect("the test ends it");
        });
        started.1.recv().expect("the thread started");
        assert!(threads_in_this_process().expect("/proc/self/stat") >= 2);
        stop.0.send(()).expect("the thread waits");
        thread.join().expect("the thread");
    }
}
