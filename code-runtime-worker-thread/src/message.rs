//! The messages between the host and an isolate, and the two ways they travel: over channels to
//! the host loop in the same process (`thread` isolation), or as frames over the cell's channel
//! (`process` isolation, see `wire.rs`). No V8 type crosses: what the isolate reports is the host
//! loop's own [`Event`](code_runtime::provider::Event), and what the host sends back is a
//! [`ToIsolate`].

use std::cell::RefCell;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use code_runtime::provider::{Answer, CallId, Event};
use code_runtime_cell::{Frames, Framing};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::codec::Decoder as _;

use crate::wire;

/// How long the isolate looks for the host's answer before it sleeps until it comes. Waking a
/// thread that sleeps on another CPU costs tens of microseconds on a virtual machine, more than a
/// fast binding takes; looking for this long first saves that on every quick round trip, for
/// about the CPU time that sleeping and waking cost anyway (the Python bootstrap does the same).
const SPIN: Duration = Duration::from_micros(50);

/// What the host sends the isolate thread.
#[derive(Debug)]
pub(crate) enum ToIsolate {
    /// A binding call settled: a value, or the rejection the program's error will carry, and
    /// in a reproducible run the program's clock.
    Settle { call: CallId, answer: Answer },
    /// Wake up and stop: the host has terminated execution.
    Stop,
}

/// Held while a frame is written to a cell's channel, so that the last words of a V8 fatal error
/// (which may come from one of V8's own threads) never land inside another frame.
static WRITING: Mutex<()> = Mutex::new(());

/// Writes `frame` to descriptor `fd` whole, between the frames of others (see [`WRITING`]).
pub(crate) fn write_frame_to(fd: libc::c_int, frame: &[u8]) {
    let _writing = WRITING.lock().unwrap_or_else(PoisonError::into_inner);
    let mut rest = frame;
    while !rest.is_empty() {
        // SAFETY: writes from a live slice to a descriptor number; a closed one fails.
        let written = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
        match usize::try_from(written) {
            Ok(written) if written > 0 => rest = &rest[written..],
            _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
            _ => return,
        }
    }
}

/// Where an isolate sends its events.
#[derive(Clone, Debug)]
pub(crate) enum Outbox {
    /// The host loop of this process.
    Thread(UnboundedSender<Event>),
    /// The host process, over the cell's channel.
    Cell(Arc<CellOutbox>),
}

/// The cell's channel, and the frames held back to go with the next write.
#[derive(Debug)]
pub(crate) struct CellOutbox {
    channel: Arc<UnixStream>,
    held: Mutex<Vec<u8>>,
}

/// How many bytes of held frames go out at once, at the latest: a resumed run replays its
/// recorded calls in bursts, and a write per call would cost it more than the call itself.
const HOLD_BYTES: usize = 64 << 10;

impl Outbox {
    /// The outbox of a cell's channel.
    pub(crate) fn cell(channel: Arc<UnixStream>) -> Self {
        Outbox::Cell(Arc::new(CellOutbox { channel, held: Mutex::new(Vec::new()) }))
    }

    /// Sends `event`, after the frames held back; a host that is gone is not an error here (the
    /// isolate is about to be stopped, or the cell killed).
    pub(crate) fn send(&self, event: Event) {
        match self {
            Outbox::Thread(host) => {
                let _ = host.send(event);
            }
            Outbox::Cell(cell) => {
                let mut held = cell.held.lock().unwrap_or_else(PoisonError::into_inner);
                held.extend_from_slice(&wire::event(event));
                cell.write(&mut held);
            }
        }
    }

    /// Sends `event` with the next write (at the latest when [`HOLD_BYTES`] are held, or the
    /// isolate waits for the host, [`flush`](Outbox::flush)): for events the host need not see
    /// at once, which only the order of the others binds (a call answered from the record).
    pub(crate) fn send_held(&self, event: Event) {
        match self {
            Outbox::Thread(_) => self.send(event),
            Outbox::Cell(cell) => {
                let mut held = cell.held.lock().unwrap_or_else(PoisonError::into_inner);
                held.extend_from_slice(&wire::event(event));
                if held.len() >= HOLD_BYTES {
                    cell.write(&mut held);
                }
            }
        }
    }

    /// Writes the frames held back.
    pub(crate) fn flush(&self) {
        if let Outbox::Cell(cell) = self {
            let mut held = cell.held.lock().unwrap_or_else(PoisonError::into_inner);
            if !held.is_empty() {
                cell.write(&mut held);
            }
        }
    }
}

impl CellOutbox {
    /// Writes `frames` whole, between the frames of others (see [`WRITING`]), and empties them.
    fn write(&self, frames: &mut Vec<u8>) {
        let _writing = WRITING.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = (&*self.channel).write_all(frames);
        frames.clear();
    }
}

/// Where an isolate's loop waits for the host.
#[derive(Debug)]
pub(crate) enum Inbox {
    Thread(Receiver<ToIsolate>),
    Cell(FrameReader),
}

impl Inbox {
    /// The next message, waiting at most `timeout`. A host that is gone is `Disconnected`.
    pub(crate) fn recv_timeout(&self, timeout: Duration) -> Result<ToIsolate, RecvTimeoutError> {
        match self {
            Inbox::Thread(inbox) => {
                let started = Instant::now();
                let spin = SPIN.min(timeout);
                loop {
                    match inbox.try_recv() {
                        Ok(message) => return Ok(message),
                        Err(TryRecvError::Disconnected) => {
                            return Err(RecvTimeoutError::Disconnected);
                        }
                        Err(TryRecvError::Empty) if started.elapsed() < spin => {
                            std::hint::spin_loop();
                        }
                        Err(TryRecvError::Empty) => break,
                    }
                }
                inbox.recv_timeout(timeout.saturating_sub(started.elapsed()))
            }
            Inbox::Cell(reader) => {
                let payload = reader.next(timeout)?;
                match wire::to_cell(&payload) {
                    Ok(wire::ToCell::Settle { call, answer }) => {
                        Ok(ToIsolate::Settle { call, answer })
                    }
                    // A cell is prepared and set up once; anything else the cell cannot follow
                    // ends the run (the host reports the cell's exit).
                    Ok(wire::ToCell::Setup(_) | wire::ToCell::Prepare(_)) | Err(_) => {
                        Err(RecvTimeoutError::Disconnected)
                    }
                }
            }
        }
    }
}

/// Reads whole frames from a cell's channel with the cell layer's decoder (the host's
/// `Frames`, the one codec of both sides), as many bytes per system call as are there (a
/// binding round trip is two frames, and each read is on its latency).
#[derive(Debug)]
pub(crate) struct FrameReader {
    channel: Arc<UnixStream>,
    reading: RefCell<(Frames, BytesMut)>,
}

/// How much one read asks for: as much as the frame being read has so far, from
/// [`FIRST_READ_BYTES`] up to [`READ_BYTES`]. The buffer is zeroed before each read, so a
/// first read of a whole [`READ_BYTES`] would make every cell hold 64 KB for frames that are
/// mostly a few hundred bytes; a long frame grows the reads quickly.
const READ_BYTES: usize = 64 << 10;
const FIRST_READ_BYTES: usize = 4 << 10;

impl FrameReader {
    pub(crate) fn new(channel: Arc<UnixStream>) -> Self {
        // The host writes these frames: it bounds what it sends by the run's budgets, and an
        // answer may be as long as the run's memory.
        let frames = Frames::new(Framing::LengthPrefixed, usize::MAX);
        Self { channel, reading: RefCell::new((frames, BytesMut::new())) }
    }

    /// Whether a frame has begun to arrive: looked at without waiting.
    pub(crate) fn has_begun(&self) -> bool {
        !self.reading.borrow().1.is_empty() || readable(&self.channel, Duration::ZERO)
    }

    /// The next frame's payload, waiting at most `timeout` for it to begin. The host writes
    /// whole frames: once one has begun, the rest follows, so the rest is waited for.
    pub(crate) fn next(&self, timeout: Duration) -> Result<Vec<u8>, RecvTimeoutError> {
        let mut reading = self.reading.borrow_mut();
        let (frames, buffer) = &mut *reading;
        if buffer.is_empty() && !readable(&self.channel, timeout) {
            return Err(RecvTimeoutError::Timeout);
        }
        loop {
            match frames.decode(buffer) {
                Ok(Some(payload)) => return Ok(payload.to_vec()),
                Ok(None) => {}
                Err(_) => return Err(RecvTimeoutError::Disconnected),
            }
            let filled = buffer.len();
            buffer.resize(filled + filled.clamp(FIRST_READ_BYTES, READ_BYTES), 0);
            let read = (&*self.channel).read(&mut buffer[filled..]);
            match read {
                Ok(read) if read > 0 => buffer.truncate(filled + read),
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {
                    buffer.truncate(filled);
                }
                _ => {
                    buffer.truncate(filled);
                    return Err(RecvTimeoutError::Disconnected);
                }
            }
        }
    }
}

/// Whether `channel` has something to read (or is closed) within `timeout`: looked at without
/// sleeping for [`SPIN`] first.
fn readable(channel: &UnixStream, timeout: Duration) -> bool {
    let started = Instant::now();
    let spin = SPIN.min(timeout);
    loop {
        let mut poll = libc::pollfd { fd: channel.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd, for the duration of the call; a zero timeout only looks.
        if unsafe { libc::poll(&mut poll, 1, 0) } > 0 {
            return true;
        }
        if started.elapsed() >= spin {
            break;
        }
        // Yields rather than only spinning: the host's answer comes through threads that need
        // a CPU too (its reactor, which reads this channel's readiness, and the thread that polls
        // the run), and a host that spins while it waits for the reactor (the Python package's
        // event loop does) leaves none on a two-CPU machine. Measured there from Python: a round
        // trip 36-41 us against 57-61 with a plain spin; the Rust host's is the same either way.
        std::thread::yield_now();
    }
    let left = timeout.saturating_sub(started.elapsed());
    let mut poll = libc::pollfd { fd: channel.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    let millis = libc::c_int::try_from(left.as_micros().div_ceil(1000)).unwrap_or(libc::c_int::MAX);
    // SAFETY: one valid pollfd, for the duration of the call.
    let ready = unsafe { libc::poll(&mut poll, 1, millis) };
    ready > 0
}
