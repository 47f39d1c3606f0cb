//! [`CellSubstrate`]: one run's cell as the host loop's [`Substrate`], whatever its protocol: the
//! frames read (long ones parsed off the loop) and written (never awaited in place), each call
//! answered once, the whole cell's memory and CPU time held to the run's budgets, and teardown.

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::BytesMut;
use code_runtime::json;
use code_runtime::provider::{
    Answer, BindingTable, CallId, Ending, Event, Held, HostMemory, StopReason, Substrate, Teardown,
    reactor,
};
use code_runtime::{BindingArgs, JsonValue, Limits};
use code_runtime_sandbox::{CellExit, WatchedCell};
use futures::StreamExt;
use futures::future::BoxFuture;
use tokio::io::AsyncWrite;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio_util::codec::FramedRead;

use crate::frames::{FrameError, Frames};
use crate::launch::Launched;
use crate::protocol::{Callee, Incoming, Protocol, Unread};

/// How long a run whose channel ended waits for its cell to exit by itself before it is killed.
/// The init exits at once once the program is gone, with the program's status; on a loaded
/// machine "at once" can take longer than 100 ms to be scheduled, and a kill then would lose
/// that status. A cell whose program left processes behind waits this long before it is killed.
const EXIT_GRACE: Duration = Duration::from_millis(500);

/// How long teardown reads what a stopped cell wrote before it was killed.
const DRAIN_WITHIN: Duration = Duration::from_secs(1);

/// How many frames one poll reads before yielding, so a cell that floods its channel (with junk,
/// say) cannot keep the host loop from its other branches.
const FRAMES_PER_POLL: usize = 64;

/// Frames longer than this are parsed on one of the reactor's blocking threads, not in the host
/// loop: the host loop shares its thread with other runs, and a 100 MB frame takes about a second
/// to parse. Shorter ones (every honest call and log, nearly) parse in place, in microseconds.
const INLINE_PARSE_BYTES: usize = 256 << 10;

/// How a frame read: parsed (`None`: dropped), or unread.
type Parsed<F> = Result<Option<F>, Unread>;

/// What a run gives its cell besides the protocol.
#[derive(Debug)]
pub struct CellRun {
    /// The run's budgets.
    pub limits: Limits,
    /// The run's account of what the host holds because of the program.
    pub memory: HostMemory,
    /// The functions the program may call, to resolve calls by name.
    pub table: Arc<BindingTable>,
    /// What the whole cell may hold beyond the run's memory budget: the engine's own memory,
    /// outside what the budget inside the cell sees.
    pub overhead_bytes: u64,
    /// CPU time the host spent on the run before the cell took it (stripping its program's
    /// types, say), which the run's compute budget pays too.
    pub prepaid: Duration,
    /// The frames the cell gets first (the run's setup).
    pub first: Vec<Vec<u8>>,
    /// A longer frame limit for this run than the cell was launched with (a run whose session
    /// state crosses the channel); `None` keeps the launch's.
    pub max_frame_bytes: Option<usize>,
}

/// One run's cell, seen from the host.
pub struct CellSubstrate<P: Protocol> {
    protocol: P,
    process: WatchedCell,
    frames: FramedRead<OwnedReadHalf, Frames>,
    writer: OwnedWriteHalf,
    /// Frames to the cell, written by `poll_event` as the socket takes them: never awaited in
    /// place, so a cell that stops reading cannot stall the host loop, and never dropped before
    /// they are written whole, so none is lost when the loop polls something else; `written`
    /// bytes of the first are out. Each answer holds its charge of host memory until written.
    outbox: VecDeque<(Vec<u8>, Option<Held>)>,
    written: usize,
    writable: bool,
    memory: HostMemory,
    /// A long frame being parsed off the host loop, with the charge of its bytes; later frames
    /// wait for it, in order.
    parsing: Option<(tokio::task::JoinHandle<Parsed<P::Frame>>, Held)>,
    /// Set when an answer could not be queued within the memory budget: the run ends.
    over_budget: bool,
    table: Arc<BindingTable>,
    /// Each id is answered once; a repeated (forged) one is ignored.
    seen: HashSet<CallId>,
    limits: Limits,
    overhead_bytes: u64,
    /// What the cell used before the run (its engine's start) is not the program's.
    cpu_before: Duration,
    /// What the host used for the run before the cell took it is ([`CellRun::prepaid`]).
    prepaid: Duration,
    /// Whether the channel ended in the middle of a frame.
    truncated: bool,
    /// Whether the cell sent the program's ending (nothing is left to read).
    ended: bool,
}

impl Launched {
    /// Hands this cell to a run: its frames are charged to the run's memory from now on, and
    /// `run.first` is sent before anything else.
    pub fn run<P: Protocol>(mut self, protocol: P, run: CellRun) -> CellSubstrate<P> {
        let cpu_before = self.process.cpu_used();
        self.frames.decoder_mut().charge_to(run.memory.clone());
        if let Some(max_frame_bytes) = run.max_frame_bytes {
            self.frames.decoder_mut().allow_up_to(max_frame_bytes);
        }
        for frame in &run.first {
            protocol.trace(false, frame);
        }
        CellSubstrate {
            protocol,
            process: self.process,
            frames: self.frames,
            writer: self.writer,
            outbox: run.first.into_iter().map(|frame| (frame, None)).collect(),
            written: 0,
            writable: true,
            memory: run.memory,
            parsing: None,
            over_budget: false,
            table: run.table,
            seen: HashSet::new(),
            limits: run.limits,
            overhead_bytes: run.overhead_bytes,
            cpu_before,
            prepaid: run.prepaid,
            truncated: false,
            ended: false,
        }
    }
}

impl<P: Protocol> Substrate for CellSubstrate<P> {
    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Event> {
        if let Some(event) = self.poll_memory(cx) {
            return Poll::Ready(event);
        }
        if self.over_budget {
            return Poll::Ready(self.host_memory_spent());
        }
        self.poll_write(cx);
        let event = self.poll_frames(cx).or_else(|| match self.protocol.poll_output(cx) {
            Poll::Ready(Some(line)) => Some(Event::Log(line)),
            Poll::Ready(None) | Poll::Pending => None,
        });
        // A frame may have queued one for the cell.
        self.poll_write(cx);
        match event {
            Some(event) => Poll::Ready(event),
            None => Poll::Pending,
        }
    }

    fn settle(&mut self, call: CallId, answer: Answer) {
        if !self.writable {
            return;
        }
        // The answer is the host's, but its size is the program's doing (a rejection quoting what
        // it passed, a value of what it asked for), and it waits until the cell reads it.
        let frame = self.protocol.settle(call, answer);
        match self.memory.hold(frame.len()) {
            Ok(held) => {
                self.protocol.trace(false, &frame);
                self.outbox.push_back((frame, Some(held)));
            }
            Err(_) => self.over_budget = true,
        }
    }

    fn compute_used(&self) -> Duration {
        self.process.cpu_used().saturating_sub(self.cpu_before).saturating_add(self.prepaid)
    }

    fn stop(&mut self) {
        self.process.kill();
    }

    fn teardown(mut self, ending: Ending) -> BoxFuture<'static, Teardown> {
        Box::pin(async move {
            let channel_ended = matches!(ending, Ending::Exited(_));
            if channel_ended {
                // The program is most likely gone and the init follows it at once with its
                // status, which killing the init first would lose.
                self.process.wait_exit(EXIT_GRACE).await;
            }
            // Give a program that already ended, or died, no chance to linger.
            self.process.kill();
            // What the cell wrote before it was stopped is still the program's output: its
            // streams and channel end as soon as its processes are dead, before the kernel has
            // torn its namespaces down (unmounting its file system waits for RCU).
            let mut logs = Vec::new();
            if P::DRAINS_CHANNEL && !channel_ended && !self.ended {
                logs = self.drain_channel().await;
            }
            logs.extend(self.protocol.drain_output().await);
            let mut process = self.process;
            if !channel_ended {
                // The result does not depend on how the cell ends: reap it in the background.
                let cleanup: BoxFuture<'static, ()> = Box::pin(async move {
                    process.reap().await;
                });
                return Teardown { ending, logs, cleanup: Some(cleanup) };
            }
            let exit = process.reap().await;
            let last_words = self.protocol.last_words();
            let ending =
                refine(ending, exit, last_words, process.last_cpu(), &self.limits, self.truncated);
            Teardown::new(ending, logs)
        })
    }
}

impl<P: Protocol> CellSubstrate<P> {
    /// The ending of a run that made the host hold more than its memory budget; the cell goes.
    fn host_memory_spent(&mut self) -> Event {
        self.process.kill();
        Event::Ended(Ending::Stopped(StopReason::HostMemory {
            max_memory_mb: self.limits.max_memory_mb,
        }))
    }

    /// The whole cell's budget: the run's, and what its engine holds of its own.
    fn memory_budget(&self) -> u64 {
        self.limits.memory_bytes().saturating_add(self.overhead_bytes)
    }

    /// Compares the whole cell's memory with its budget when a look is due. The budgets inside
    /// the cell hold the program; this catches what they do not see (its engine's own memory,
    /// what other processes of the cell hold, its files in `/tmp`).
    fn poll_memory(&mut self, cx: &mut Context<'_>) -> Option<Event> {
        let budget = self.memory_budget();
        let Poll::Ready(used) = self.process.poll_over_memory(cx, budget) else { return None };
        Some(self.out_of_memory(used))
    }

    /// The out-of-memory ending, when the cell holds more than its budget now: one last look
    /// when the program ends, as it may have grown past the budget since the last.
    fn over_memory(&mut self) -> Option<Event> {
        let used = self.process.over_memory(self.memory_budget())?;
        Some(self.out_of_memory(used))
    }

    fn out_of_memory(&mut self, used: u64) -> Event {
        let budget = self.memory_budget();
        tracing::debug!(used, budget, "the cell is over its memory budget");
        self.process.kill();
        Event::Ended(Ending::Stopped(StopReason::OutOfMemory {
            max_memory_mb: self.limits.max_memory_mb,
        }))
    }

    /// Writes queued frames as far as the socket takes them.
    fn poll_write(&mut self, cx: &mut Context<'_>) {
        while self.writable {
            let Some((frame, _)) = self.outbox.front() else { return };
            match Pin::new(&mut self.writer).poll_write(cx, &frame[self.written..]) {
                Poll::Ready(Ok(written)) if written > 0 => {
                    self.written += written;
                    if self.written == frame.len() {
                        // The charge goes with the frame.
                        self.outbox.pop_front();
                        self.written = 0;
                    }
                }
                // The cell closed its channel; its end shows on the read side.
                Poll::Ready(_) => {
                    self.writable = false;
                    self.outbox.clear();
                }
                Poll::Pending => return,
            }
        }
    }

    fn poll_frames(&mut self, cx: &mut Context<'_>) -> Option<Event> {
        for _ in 0..FRAMES_PER_POLL {
            let frame = match self.poll_parsed(cx) {
                Poll::Pending => return None,
                Poll::Ready(Err(ending)) => return Some(Event::Ended(ending)),
                Poll::Ready(Ok(None)) => continue,
                Poll::Ready(Ok(Some(Err(Unread::TooLarge)))) => {
                    return Some(self.host_memory_spent());
                }
                Poll::Ready(Ok(Some(Err(Unread::Malformed(why))))) => {
                    let violation = format!("protocol violation: {why}");
                    return Some(Event::Ended(Ending::Failed(violation)));
                }
                Poll::Ready(Ok(Some(Ok(frame)))) => frame,
            };
            let Some(frame) = frame else { continue };
            let mut outgoing = Vec::new();
            let incoming = self.protocol.on_frame(frame, &mut outgoing);
            for frame in outgoing {
                self.protocol.trace(false, &frame);
                self.outbox.push_back((frame, None));
            }
            let event = match incoming {
                Incoming::Nothing => None,
                Incoming::Log(line) => Some(Event::Log(line)),
                Incoming::Call { id, callee, args, replayed } => {
                    self.on_call(id, callee, args, replayed)
                }
                Incoming::Captured(capture) => Some(Event::Captured(capture)),
                Incoming::Ended(ending) => {
                    self.ended = true;
                    Some(self.over_memory().unwrap_or(Event::Ended(ending)))
                }
            };
            if event.is_some() {
                return event;
            }
        }
        // More may be waiting; come back after the loop's other branches had their turn.
        cx.waker().wake_by_ref();
        None
    }

    fn on_call(
        &mut self,
        id: CallId,
        callee: Callee,
        args: JsonValue,
        replayed: bool,
    ) -> Option<Event> {
        if !self.seen.insert(id) {
            return None;
        }
        let function = match callee {
            Callee::Id(function) => function,
            Callee::Named { global, name } => match self.table.find(&global, &name) {
                Some(function) => function,
                // Named by the program, as long as it likes: the host cuts it in its answer.
                None => return Some(Event::Stray { id, label: format!("{global}.{name}") }),
            },
        };
        // The argument stays on the host while the call waits and runs: it is charged until the
        // closure lets it go.
        match self.memory.hold(json::held_bytes(&args)) {
            Ok(held) => {
                let args = BindingArgs::held(args, held);
                Some(if replayed {
                    Event::Replayed { id, function, args }
                } else {
                    Event::Call { id, function, args }
                })
            }
            Err(_) => Some(self.host_memory_spent()),
        }
    }

    /// The next frame: one being parsed off the loop when it is done, else the next one read (a
    /// short one parsed here; a long one handed to a blocking thread, `Ok(None)` meanwhile).
    /// `Err` is how the channel ended.
    fn poll_parsed(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Parsed<P::Frame>>, Ending>> {
        if let Some((parsing, _held)) = &mut self.parsing {
            let joined = std::task::ready!(Pin::new(parsing).poll(cx));
            // The frame's charge goes with it; its values are charged as they are kept.
            self.parsing = None;
            let parsed = joined.unwrap_or_else(|_| Err(Unread::Malformed("a lost parse".into())));
            return Poll::Ready(Ok(Some(parsed)));
        }
        let frame = match self.frames.poll_next_unpin(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Some(Ok(frame))) => frame,
            Poll::Ready(ended) => return Poll::Ready(Err(self.channel_ended(ended))),
        };
        self.protocol.trace(true, &frame);
        // The frame is held while it is parsed: what its values may take is what is left.
        let Ok(held) = self.memory.hold(frame.len()) else {
            return Poll::Ready(Ok(Some(Err(Unread::TooLarge))));
        };
        let (len, room, limits) = (frame.len(), self.memory.room(), self.limits);
        let parse = move || P::parse(&frame, room, &limits);
        if len <= INLINE_PARSE_BYTES {
            return Poll::Ready(Ok(Some(parse())));
        }
        match reactor::handle() {
            Ok(reactor) => {
                self.parsing = Some((reactor.spawn_blocking(parse), held));
                Poll::Ready(Ok(None))
            }
            Err(_) => Poll::Ready(Ok(Some(parse()))),
        }
    }

    /// How the channel ended.
    fn channel_ended(&mut self, ended: Option<Result<BytesMut, FrameError>>) -> Ending {
        match ended {
            Some(Err(error @ FrameError::TooLong { .. })) => {
                Ending::Failed(format!("protocol violation: {error}"))
            }
            Some(Err(FrameError::OverBudget)) => {
                self.process.kill();
                Ending::Stopped(StopReason::HostMemory { max_memory_mb: self.limits.max_memory_mb })
            }
            Some(Err(FrameError::Truncated { .. })) => {
                self.truncated = true;
                Ending::Exited(None)
            }
            Some(Err(FrameError::Io(error))) => {
                tracing::debug!(%error, "the cell's channel failed");
                Ending::Exited(None)
            }
            Some(Ok(_)) | None => Ending::Exited(None),
        }
    }

    /// Reads the lines a stopped cell wrote on its channel before it died, until the channel
    /// ends.
    async fn drain_channel(&mut self) -> Vec<String> {
        let deadline = tokio::time::Instant::now() + DRAIN_WITHIN;
        let mut logs = Vec::new();
        loop {
            let next = reactor::enter(|| tokio::time::timeout_at(deadline, self.frames.next()));
            let Ok(Some(Ok(frame))) = next.await else { return logs };
            let room = self.memory.room();
            if let Ok(Some(frame)) = P::parse(&frame, room, &self.limits) {
                if let Incoming::Log(line) = self.protocol.on_frame(frame, &mut Vec::new()) {
                    logs.push(line);
                }
            }
        }
    }
}

/// An ending the loop could only guess at ([`Ending::Exited`]), made exact: the cell's last words
/// (a fatal error it reported), the CPU limit's signals, a frame cut short, or the program's own
/// exit status (the cell's init exits with it, `128 + signal` when it was killed).
fn refine(
    ending: Ending,
    exit: Option<CellExit>,
    last_words: Option<String>,
    cpu_used: Duration,
    limits: &Limits,
    truncated: bool,
) -> Ending {
    let Ending::Exited(_) = ending else { return ending };
    if let Some(text) = last_words {
        return Ending::Failed(text);
    }
    let code = exit.and_then(CellExit::status);
    let budget = Duration::from_millis(limits.compute_ms);
    if exit.is_some_and(|exit| exit.by_cpu_limit(cpu_used, budget)) {
        return Ending::Stopped(StopReason::Compute { compute_ms: limits.compute_ms });
    }
    if truncated && code == Some(0) {
        return Ending::Failed(
            "protocol violation: fd 3 closed in the middle of a frame".to_owned(),
        );
    }
    Ending::Exited(code)
}
