//! A client connection's replies on their way out: written by the protocol
//! thread itself at the end of its turn when the socket takes them, by the
//! connection's writer task only when it does not.
//!
//! Why: a writer task fed one encoded reply per channel message cost, per
//! reply, an allocation, a channel send and receive, and a wake-up and poll
//! of the task, on the node's one thread; redis-server writes its replies
//! from its event loop directly. Here the protocol thread appends each
//! reply's frame to the connection's buffer ([`ReplyPipe::push`]) and, once
//! the turn's replies are all in, writes each touched connection's buffer
//! with one non-blocking write ([`ReplyPipe::write_now`]). A socket that is
//! full (a slow reader), a TLS record that cannot be flushed at once, or a
//! write half the writer task holds, leave the bytes to the writer task,
//! which waits for the socket with a real waker. Nothing is lost or
//! reordered: the bytes stay in one buffer, and whoever holds the write
//! half writes from its front.

use crate::tls::Conn;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use tokio::io::{AsyncWrite, AsyncWriteExt, WriteHalf};
use tokio::sync::Notify;

pub(crate) struct ReplyPipe {
    state: Mutex<State>,
    /// Wakes the writer task: bytes left for it, or the connection ending.
    wake: Notify,
}

struct State {
    /// Encoded frames not yet written, in order.
    queued: Vec<u8>,
    /// The write half, here while nobody writes; the writer task takes it
    /// while it waits on the socket.
    wr: Option<WriteHalf<Conn>>,
    /// Bytes were written that a flush must still push out (a TLS record).
    unflushed: bool,
    /// The connection ended or failed: nothing more goes out.
    closed: bool,
    /// The connection's reader is done: once the protocol thread holds no
    /// [`PipeSender`] for it (it has forgotten the connection's sessions,
    /// so no reply is still to come), the writer task writes what is queued
    /// and stops.
    ending: bool,
    /// [`PipeSender`]s alive: one per session of the connection that the
    /// protocol thread knows.
    senders: usize,
}

/// Where the protocol thread puts one session's replies: the connection's
/// pipe and the session's slot on it.
pub(crate) struct PipeSender {
    pub(crate) pipe: Arc<ReplyPipe>,
    pub(crate) slot: u32,
}

impl PipeSender {
    pub(crate) fn new(pipe: &Arc<ReplyPipe>, slot: u32) -> PipeSender {
        pipe.state.lock().expect("reply pipe").senders += 1;
        PipeSender { pipe: pipe.clone(), slot }
    }
}

impl Drop for PipeSender {
    fn drop(&mut self) {
        self.pipe.state.lock().expect("reply pipe").senders -= 1;
        self.pipe.wake.notify_one();
    }
}

impl ReplyPipe {
    pub(crate) fn new(wr: WriteHalf<Conn>) -> ReplyPipe {
        ReplyPipe {
            state: Mutex::new(State {
                queued: Vec::new(),
                wr: Some(wr),
                unflushed: false,
                closed: false,
                ending: false,
                senders: 0,
            }),
            wake: Notify::new(),
        }
    }

    /// Append a frame to what goes out: `encode` takes the buffer and
    /// returns it with the frame encoded at its end (no buffer per reply).
    /// True if the buffer was empty, so the caller lists the pipe for
    /// [`ReplyPipe::write_now`] once per turn; a pipe whose buffer holds
    /// bytes is listed already, or they wait for the writer task, which
    /// takes what follows them too.
    pub(crate) fn push(&self, encode: impl FnOnce(Vec<u8>) -> Vec<u8>) -> bool {
        let mut st = self.state.lock().expect("reply pipe");
        if st.closed {
            return false;
        }
        let was_empty = st.queued.is_empty();
        st.queued = encode(std::mem::take(&mut st.queued));
        was_empty
    }

    /// Append `frame`, encoded, and leave it to the writer task (a
    /// connection task's own refusals, off the protocol thread).
    pub(crate) fn send(&self, frame: Vec<u8>) {
        self.push(|mut b| {
            b.extend_from_slice(&frame);
            b
        });
        self.wake.notify_one();
    }

    /// Write what is queued now, without waiting: as much as the socket
    /// takes. What it does not take is left to the writer task.
    pub(crate) fn write_now(&self) {
        let mut st = self.state.lock().expect("reply pipe");
        let State { queued, wr, unflushed, closed, .. } = &mut *st;
        if *closed || (queued.is_empty() && !*unflushed) {
            return;
        }
        // The writer task holds the half: it takes the queue after its write.
        let Some(wr) = wr.as_mut() else { return };
        // A waker that does nothing: a socket that would block registers
        // it and forgets it, and the writer task, told below, polls again
        // with its own.
        let mut cx = Context::from_waker(Waker::noop());
        let mut done = 0;
        let mut left_over = false;
        while done < queued.len() {
            match Pin::new(&mut *wr).poll_write(&mut cx, &queued[done..]) {
                Poll::Ready(Ok(n)) if n > 0 => {
                    done += n;
                    *unflushed = true;
                }
                Poll::Ready(_) => {
                    // An error, or a write of nothing: the connection is
                    // gone (its reader sees it too).
                    *closed = true;
                    *queued = Vec::new();
                    drop(st);
                    self.wake.notify_one();
                    return;
                }
                Poll::Pending => {
                    left_over = true;
                    break;
                }
            }
        }
        queued.drain(..done);
        if !left_over {
            match Pin::new(&mut *wr).poll_flush(&mut cx) {
                Poll::Ready(Ok(())) => *unflushed = false,
                Poll::Ready(Err(_)) => *closed = true,
                Poll::Pending => left_over = true,
            }
        }
        if left_over || *closed {
            drop(st);
            self.wake.notify_one();
        }
    }

    /// The connection's reader is done: the writer task writes what is
    /// queued and what the protocol thread still answers (a last refusal,
    /// the replies to requests in flight), and stops.
    pub(crate) fn end(&self) {
        self.state.lock().expect("reply pipe").ending = true;
        self.wake.notify_one();
    }

    /// The writer task: writes what [`ReplyPipe::write_now`] left, waiting
    /// on the socket as long as it takes, until the connection ends.
    pub(crate) async fn writer(&self) {
        let mut batch = Vec::new();
        loop {
            let took = {
                let mut st = self.state.lock().expect("reply pipe");
                if st.closed {
                    return;
                }
                if st.queued.is_empty() && !st.unflushed {
                    if st.ending && st.senders == 0 {
                        st.closed = true;
                        return;
                    }
                    None
                } else {
                    let Some(wr) = st.wr.take() else { return };
                    std::mem::swap(&mut batch, &mut st.queued);
                    st.unflushed = false;
                    Some(wr)
                }
            };
            let Some(mut wr) = took else {
                self.wake.notified().await;
                continue;
            };
            let flush_only = batch.is_empty();
            let wrote = async {
                if !flush_only {
                    wr.write_all(&batch).await?;
                }
                wr.flush().await
            }
            .await;
            batch.clear();
            let mut st = self.state.lock().expect("reply pipe");
            if wrote.is_err() {
                st.closed = true;
                st.queued = Vec::new();
                return;
            }
            st.wr = Some(wr);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;
    use tokio::net::{TcpListener, TcpStream};

    /// A reader far slower than the writer: most replies do not fit the
    /// socket, so `write_now` leaves them to the writer task, while more
    /// arrive behind them. The reader gets every byte, in order; a reply
    /// pushed after the connection's reader ended, by a session the
    /// protocol thread still knows, goes out too; then the writer stops.
    #[tokio::test]
    async fn a_slow_reader_gets_every_reply_in_order() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, server) = tokio::join!(TcpStream::connect(addr), listener.accept());
        let (mut client, (server, _)) = (client.unwrap(), server.unwrap());
        let (_rd, wr) = tokio::io::split(Conn::Plain(server));
        let pipe = Arc::new(ReplyPipe::new(wr));
        let sender = PipeSender::new(&pipe, 0);
        let writer = tokio::spawn({
            let pipe = pipe.clone();
            async move { pipe.writer().await }
        });
        // 16 MiB in 4 KiB "replies" numbered so that a lost or reordered
        // byte shows.
        let replies = 4096u32;
        let reply = |i: u32| -> Vec<u8> { (0..4096u32).map(|j| (i.wrapping_mul(31) ^ j) as u8).collect() };
        let want: Vec<u8> = (0..=replies).flat_map(reply).collect();
        let pushing = {
            let pipe = pipe.clone();
            tokio::spawn(async move {
                let mut left_to_writer = 0;
                for i in 0..replies {
                    pipe.push(|mut b| {
                        b.extend_from_slice(&reply(i));
                        b
                    });
                    pipe.write_now();
                    left_to_writer += usize::from(!pipe.state.lock().unwrap().queued.is_empty());
                    tokio::task::yield_now().await;
                }
                pipe.end();
                // After the end: a session the protocol thread still knows.
                sender.pipe.push(|mut b| {
                    b.extend_from_slice(&reply(replies));
                    b
                });
                sender.pipe.write_now();
                drop(sender);
                left_to_writer
            })
        };
        let mut got = Vec::new();
        let mut buf = vec![0; 1000];
        while got.len() < want.len() {
            let n = client.read(&mut buf).await.unwrap();
            assert!(n > 0, "connection closed after {} of {} bytes", got.len(), want.len());
            got.extend_from_slice(&buf[..n]);
            if got.len() % 64 == 0 {
                tokio::time::sleep(std::time::Duration::from_micros(50)).await;
            }
        }
        let left_to_writer = pushing.await.unwrap();
        assert!(left_to_writer > 0, "the socket took every write at once: the writer task was never tested");
        assert!(got == want, "bytes differ from the first at {:?}", got.iter().zip(&want).position(|(a, b)| a != b));
        tokio::time::timeout(std::time::Duration::from_secs(5), writer).await.expect("the writer stopped").unwrap();
    }
}
