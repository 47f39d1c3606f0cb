//! [`Listener`]: the TCP listener of `code-runtime mcp --http`, which keeps serving the clients
//! that proved themselves while others hold connections open.
//!
//! A connection is *unproven* until a request of it has passed the checks (its Host and Origin,
//! and the bearer token when one is set: [`Proof::prove`]). Slowloris and its kin hold many
//! unproven connections (half-sent headers, nothing at all) to use up the descriptors the
//! server can have, so that an authenticated `run_code` finds no room. Here:
//!
//! - an unproven connection is closed after [`HANDSHAKE`] (it may be sending its headers one
//!   byte a minute);
//! - at most [`Caps::connections`] connections are open at once, well under the descriptor
//!   limit; past it, or when `accept` fails for want of descriptors, the oldest unproven
//!   connection of the peer with the most unproven ones is closed to make room, so a client
//!   that sends its request at once gets in whatever others hold, and one peer cannot crowd
//!   out another;
//! - one peer holds at most [`Caps::unproven_per_peer`] unproven connections (its oldest is
//!   closed for a newer one).
//!
//! A proven connection is never closed to make room: it carries work someone authenticated.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Sleep;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// How long a connection may take to send a request that passes the checks.
pub(crate) const HANDSHAKE: Duration = Duration::from_secs(10);

/// How many connections the listener keeps open.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Caps {
    /// In all.
    pub(crate) connections: usize,
    /// Unproven, from one peer address.
    pub(crate) unproven_per_peer: usize,
}

impl Caps {
    /// Caps that fit this process's descriptor limit (raised to its hard limit first): half
    /// of it for connections, the rest for runs (cells, pipes) and upstream servers.
    pub(crate) fn of_this_process() -> Self {
        let descriptors = raise_descriptor_limit();
        let connections = usize::try_from(descriptors / 2).unwrap_or(usize::MAX).clamp(16, 16_384);
        Self { connections, unproven_per_peer: (connections / 4).max(4) }
    }
}

/// Raises the soft limit on open descriptors to the hard one; the limit in force after.
fn raise_descriptor_limit() -> u64 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct we own; RLIMIT_NOFILE is a valid resource.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return 1024;
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
        // SAFETY: setrlimit reads the struct we own; raising a soft limit to the hard limit is
        // always permitted.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return raised.rlim_cur;
        }
    }
    limit.rlim_cur
}

/// The open connections.
#[derive(Default)]
struct Table {
    next: u64,
    open: usize,
    /// The unproven ones, oldest first (by number), and how many each peer has.
    unproven: BTreeMap<u64, (IpAddr, CancellationToken)>,
    per_peer: HashMap<IpAddr, usize>,
}

impl Table {
    fn forget_unproven(&mut self, number: u64) -> bool {
        let Some((peer, _)) = self.unproven.remove(&number) else { return false };
        if let Some(count) = self.per_peer.get_mut(&peer) {
            *count -= 1;
            if *count == 0 {
                self.per_peer.remove(&peer);
            }
        }
        true
    }

    /// Closes the oldest unproven connection of `peer`, or (`None`) of the peer with the most;
    /// whether there was one.
    fn evict(&mut self, peer: Option<IpAddr>) -> bool {
        let peer = peer.or_else(|| {
            self.per_peer.iter().max_by_key(|(_, count)| **count).map(|(peer, _)| *peer)
        });
        let Some(peer) = peer else { return false };
        let oldest = self.unproven.iter().find(|(_, (of, _))| *of == peer).map(|(n, _)| *n);
        let Some(oldest) = oldest else { return false };
        if let Some((_, token)) = self.unproven.get(&oldest) {
            token.cancel();
        }
        self.forget_unproven(oldest)
    }
}

/// The listener: a [`TcpListener`] whose connections are [`Guarded`].
pub(crate) struct Listener {
    tcp: TcpListener,
    caps: Caps,
    table: Arc<Mutex<Table>>,
}

impl Listener {
    pub(crate) fn new(tcp: TcpListener, caps: Caps) -> Self {
        Self { tcp, caps, table: Arc::default() }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes `stream` from `peer` in, closing others to make room as the module says; `None`
    /// (the stream is dropped, which closes it) when every open connection is proven and there
    /// is no room.
    fn admit(&self, stream: TcpStream, peer: SocketAddr) -> Option<Guarded> {
        let mut table = self.table();
        let ip = peer.ip();
        if table.per_peer.get(&ip).copied().unwrap_or(0) >= self.caps.unproven_per_peer {
            table.evict(Some(ip));
        }
        if table.open >= self.caps.connections && !table.evict(None) {
            return None;
        }
        let number = table.next;
        table.next += 1;
        table.open += 1;
        let cancel = CancellationToken::new();
        table.unproven.insert(number, (ip, cancel.clone()));
        *table.per_peer.entry(ip).or_default() += 1;
        drop(table);
        let proof = Proof(Arc::new(Entry {
            number,
            proven: AtomicBool::new(false),
            table: self.table.clone(),
        }));
        Some(Guarded {
            stream,
            proof,
            deadline: Box::pin(tokio::time::sleep(HANDSHAKE)),
            cancelled: Box::pin(cancel.cancelled_owned()),
        })
    }
}

impl axum::serve::Listener for Listener {
    type Io = Guarded;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Guarded, SocketAddr) {
        loop {
            match self.tcp.accept().await {
                Ok((stream, peer)) => {
                    if let Some(guarded) = self.admit(stream, peer) {
                        return (guarded, peer);
                    }
                }
                // Out of descriptors: an unproven connection makes room at once; with none, the
                // proven ones end in their time.
                Err(error) if matches!(error.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                    if !self.table().evict(None) {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
                // A connection that went away before it was taken (reset, aborted): the next.
                Err(error)
                    if matches!(
                        error.raw_os_error(),
                        Some(libc::ECONNABORTED | libc::ECONNRESET | libc::EPROTO | libc::EPERM)
                    ) =>
                {
                    tokio::task::yield_now().await;
                }
                // The kernel short of memory or buffers, say: it lasts, and must not spin.
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.tcp.local_addr()
    }
}

struct Entry {
    number: u64,
    proven: AtomicBool,
    table: Arc<Mutex<Table>>,
}

/// What a request knows of its connection (`ConnectInfo<Proof>`): [`prove`](Proof::prove)
/// marks it proven once the request passed the checks.
#[derive(Clone)]
pub(crate) struct Proof(Arc<Entry>);

impl Proof {
    /// The connection's request passed the checks: it is no longer closed to make room nor
    /// after [`HANDSHAKE`].
    pub(crate) fn prove(&self) {
        if !self.0.proven.swap(true, Ordering::AcqRel) {
            let mut table = self.0.table.lock().unwrap_or_else(PoisonError::into_inner);
            table.forget_unproven(self.0.number);
        }
    }
}

impl Connected<IncomingStream<'_, Listener>> for Proof {
    fn connect_info(stream: IncomingStream<'_, Listener>) -> Self {
        stream.io().proof.clone()
    }
}

/// A connection: its stream, failing reads and writes once it is closed to make room or its
/// handshake time ran out unproven (the server then drops it, which closes the descriptor).
pub(crate) struct Guarded {
    stream: TcpStream,
    proof: Proof,
    deadline: Pin<Box<Sleep>>,
    cancelled: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl Guarded {
    fn closed(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        if self.cancelled.as_mut().poll(cx).is_ready() {
            return Some(io::Error::new(io::ErrorKind::ConnectionAborted, "closed to make room"));
        }
        // Polled while unproven so that the timer wakes a connection that sends nothing.
        if !self.proof.0.proven.load(Ordering::Acquire)
            && self.deadline.as_mut().poll(cx).is_ready()
        {
            return Some(io::Error::new(io::ErrorKind::TimedOut, "no request in time"));
        }
        None
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        let mut table = self.proof.0.table.lock().unwrap_or_else(PoisonError::into_inner);
        table.forget_unproven(self.proof.0.number);
        table.open -= 1;
    }
}

impl AsyncRead for Guarded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Some(error) = self.closed(cx) {
            return Poll::Ready(Err(error));
        }
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if let Some(error) = self.closed(cx) {
            return Poll::Ready(Err(error));
        }
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
