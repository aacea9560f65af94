//! Closing a connection so that its last words arrive.

use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// How long a refused peer is listened to before the connection is dropped.
const LINGER: Duration = Duration::from_millis(500);

/// How much of what a refused peer still sends is read (and discarded).
const LINGER_BYTES: usize = 1 << 20;

/// Shut our side and drain what the peer already sent until it closes too,
/// bounded in both time and bytes. Closing a socket that still holds unread
/// input makes the kernel send a reset, and a reset can overtake the last
/// reply in flight, so the peer would see "connection reset" instead of
/// the reason it was refused. What is drained goes through a small buffer
/// on the stack: lingering costs no memory whatever the peer sends.
pub(crate) async fn close_after_refusal(s: &mut (impl AsyncRead + AsyncWrite + Unpin)) {
    let _ = s.flush().await;
    let _ = s.shutdown().await;
    let _ = tokio::time::timeout(LINGER, async {
        let mut buf = [0u8; 4096];
        let mut drained = 0;
        while drained < LINGER_BYTES {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => drained += n,
            }
        }
    })
    .await;
}
