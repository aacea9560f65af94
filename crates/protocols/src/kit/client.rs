//! Small helpers every client half needs.

use causeway_core::{ClientCtx, ClientEnv, Key, NodeId, OpError, OpKind, OpResult};

/// The server a client of `ctx` talks to for `key`: the key's partition in the
/// client's own DC, or, under partial replication, in the nearest DC storing
/// it. Always `Some` today; the `Option` keeps room for placement that can
/// leave a partition unreachable, in which case the op is failed here.
pub fn client_server_for<M>(ctx: &ClientCtx, env: &mut impl ClientEnv<M>, key: &[u8]) -> Option<NodeId> {
    let t = &ctx.topology;
    let p = t.partition_of(key);
    let dc = t.serving_dc(ctx.dc, p);
    match t.server(dc, p) {
        Some(n) => Some(n),
        None => {
            env.complete(OpResult::Failed(OpError::NoReplica));
            None
        }
    }
}

/// Send a one-key request, built from `key` by `msg`, to the key's server
/// ([`client_server_for`]): true if it went out, false if the operation
/// failed there instead.
pub fn send_for_key<M>(ctx: &ClientCtx, env: &mut impl ClientEnv<M>, key: Key, msg: impl FnOnce(Key) -> M) -> bool {
    let Some(to) = client_server_for(ctx, env, &key) else { return false };
    env.send(to, msg(key));
    true
}

/// The server of each key, in order, or `None` (the operation failed with
/// [`OpError::NoReplica`]) before anything is sent: a fan-out either
/// reaches every key's server or does not start.
pub fn client_servers_for<'a, M>(
    ctx: &ClientCtx,
    env: &mut impl ClientEnv<M>,
    keys: impl IntoIterator<Item = &'a [u8]>,
) -> Option<Vec<NodeId>> {
    keys.into_iter().map(|k| client_server_for(ctx, env, k)).collect()
}

/// Writes grouped by the server of each (`servers[i]` is `writes[i]`'s, as
/// [`client_servers_for`] gives them): one request per server, as a client
/// library splitting Cassandra's `batch_mutate` sends (Lloyd §7.3.1).
pub fn by_server<T>(writes: Vec<T>, servers: Vec<NodeId>) -> std::collections::BTreeMap<NodeId, Vec<T>> {
    let mut grouped: std::collections::BTreeMap<NodeId, Vec<T>> = Default::default();
    for (w, to) in writes.into_iter().zip(servers) {
        grouped.entry(to).or_default().push(w);
    }
    grouped
}

/// Complete an operation the protocol does not implement with a typed error.
pub fn fail_unsupported<M>(env: &mut impl ClientEnv<M>, kind: OpKind) {
    env.complete(OpResult::Failed(OpError::Unsupported(kind)));
}
