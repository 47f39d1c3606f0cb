//! [`Either`]: one of two substrates, for a provider that runs programs in either (an isolate on
//! a thread, or in a cell).

use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;

use crate::provider::{Answer, CallId, Ending, Event, Substrate, Teardown};

/// A substrate that is one of two kinds; each call goes to the one it is.
#[derive(Debug)]
pub enum Either<L, R> {
    /// The first kind.
    Left(L),
    /// The second kind.
    Right(R),
}

impl<L: Substrate, R: Substrate> Substrate for Either<L, R> {
    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Event> {
        match self {
            Either::Left(substrate) => substrate.poll_event(cx),
            Either::Right(substrate) => substrate.poll_event(cx),
        }
    }

    fn settle(&mut self, call: CallId, answer: Answer) {
        match self {
            Either::Left(substrate) => substrate.settle(call, answer),
            Either::Right(substrate) => substrate.settle(call, answer),
        }
    }

    fn compute_used(&self) -> Duration {
        match self {
            Either::Left(substrate) => substrate.compute_used(),
            Either::Right(substrate) => substrate.compute_used(),
        }
    }

    fn stop(&mut self) {
        match self {
            Either::Left(substrate) => substrate.stop(),
            Either::Right(substrate) => substrate.stop(),
        }
    }

    fn teardown(self, ending: Ending) -> BoxFuture<'static, Teardown> {
        match self {
            Either::Left(substrate) => substrate.teardown(ending),
            Either::Right(substrate) => substrate.teardown(ending),
        }
    }
}

/// A boxed substrate is one: a large one boxed keeps [`Either`] small.
impl<S: Substrate> Substrate for Box<S> {
    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Event> {
        (**self).poll_event(cx)
    }

    fn settle(&mut self, call: CallId, answer: Answer) {
        (**self).settle(call, answer);
    }

    fn compute_used(&self) -> Duration {
        (**self).compute_used()
    }

    fn stop(&mut self) {
        (**self).stop();
    }

    fn teardown(self, ending: Ending) -> BoxFuture<'static, Teardown> {
        (*self).teardown(ending)
    }
}
