use crate::kit::msg::payload;
use causeway_core::{DcId, Key, OpError, Value};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A ROT's id: the session's cluster-wide nonce
/// ([`ClientCtx::nonce`](causeway_core::ClientCtx::nonce), never a server's
/// `ClientId`, which differs from server to server) and the session's
/// sequence number. A session runs one operation at a time, so once it
/// starts ROT s every ROT before s is over (or abandoned, its answers
/// ignored).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RotId {
    pub nonce: u64,
    pub seq: u64,
}

/// A set of ROT ids kept as one id per session, the highest: Didona et al.
/// §5, "each readers-check message response contains at most one ROT id per
/// client, i.e., the one corresponding to the most recent ROT of that
/// client". nonce → seq.
pub type OldReaders = BTreeMap<u64, u64>;

/// Bytes one ROT id takes in the `readers_check_bytes` accounting: the
/// nonce and the sequence number, 8 bytes each (the paper counts 8 bytes
/// per id, §5; ours name the session cluster-wide, hence 16).
pub const ROT_ID_BYTES: u64 = 16;

/// Whether ROT `id` is one of `readers` (or an earlier, abandoned ROT of the
/// same session, which is treated the same: its answers are ignored anyway).
pub fn contains(readers: &OldReaders, id: RotId) -> bool {
    readers.get(&id.nonce).is_some_and(|&s| s >= id.seq)
}

/// Add ROT `nonce`/`seq` to `into`, keeping the highest per session.
pub fn add(into: &mut OldReaders, nonce: u64, seq: u64) {
    let e = into.entry(nonce).or_insert(seq);
    *e = (*e).max(seq);
}

/// Merge `from` into `into`, keeping the highest ROT per session.
pub fn merge(into: &mut OldReaders, from: &OldReaders) {
    for (&n, &s) in from {
        add(into, n, s);
    }
}

/// A version's place in last-writer-wins order: Lamport time, then the DC
/// that accepted the write (one server per partition per DC, so unique per
/// key).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Stamp {
    pub ts: u64,
    pub dc: DcId,
}

/// A dependency: the version of `key` stamped `stamp` (COPS's ⟨key,
/// version⟩, Lloyd §2.3).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Dep {
    pub key: Key,
    pub stamp: Stamp,
}

/// Every message of the protocol.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// PUT(key, value) after the session's nearest dependencies.
    PutReq { key: Key, value: Value, deps: Vec<Dep> },
    /// The new version's stamp, once its readers check is done and it is
    /// visible; or why the PUT was refused.
    PutReply(Result<Stamp, OpError>),
    /// The one round of a ROT (a GET is a ROT of one key): read `keys` for
    /// ROT `id`. `record`: the ROT reads at more than one partition, so this
    /// partition records it as a reader (a ROT served by one partition in
    /// one step can never be an old reader; deviation 5). `lts` is read by
    /// the Lamport-only mutant alone.
    RotReq { id: RotId, keys: Vec<Key>, record: bool, lts: u64 },
    /// One version (or none) per key, in request order.
    RotReply { seq: u64, items: Result<Vec<Option<Item>>, OpError> },
    /// A GET: [`Msg::RotReq`] of one key, never recorded (deviation 5).
    GetReq { id: RotId, key: Key, lts: u64 },
    /// The version read (or none).
    GetReply { seq: u64, item: Result<Option<Item>, OpError> },
    /// A version to its replicas in the other DCs, with its dependencies
    /// ([`Replica`], boxed: inline it made this the largest variant).
    Replicate(Box<Replica>),
    /// The readers check of version `key`@`stamp` (combined, for a
    /// replicated version, with its dependency check): answer once each of
    /// `deps` is visible here, with the ROTs that must not see what
    /// depends on them.
    CheckReq { key: Key, stamp: Stamp, deps: Vec<Dep> },
    /// The answer to the check of `key`@`stamp`: its old readers.
    CheckReply { key: Key, stamp: Stamp, old_readers: OldReaders },
    /// Settling (deviation 10), to a replica: every version of the
    /// sender's stamped below Lamport time `below` was sent before this.
    Probe { below: u64 },
    /// The answer to a [`Msg::Probe`]: every version of the receiver's
    /// stamped below `below` is visible at the sender.
    Through { below: u64 },
    /// From a version's origin to its replicas: every version of the
    /// sender's stamped below `below` is visible in every DC and has been
    /// for a reader TTL, so no session need depend on it.
    Settled { below: u64 },
}

/// Every move of a message of over 128 bytes with the runtime's envelope is
/// a call to `memmove` (see CausalSpartanX's `Msg`); `Replicate` inline
/// made this 112. Boxing does not change the encoding.
const _: () = assert!(std::mem::size_of::<Msg>() <= 104, "a CC-LO message moves inline");

/// What [`Msg::Replicate`] carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replica {
    pub key: Key,
    pub value: Value,
    pub stamp: Stamp,
    pub deps: Vec<Dep>,
    pub written_us: u64,
}

/// A version read: its value and stamp. The session then depends on it,
/// unless it is settled (`never_depend`, deviation 10).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    pub value: Value,
    pub stamp: Stamp,
    pub never_depend: bool,
}

crate::impl_message! {
    Msg {
        client: PutReply, RotReq, RotReply, GetReq, GetReply;
        writes: PutReq;
        peer: Replicate, CheckReq, CheckReply, Probe, Through, Settled;
        nested: ;
    }
    /// Settling's messages: probes and settlements are sent every tick
    /// they change (and every second regardless), each probe answered by a
    /// `Through`; handlers keep the maximum, or answer from the newest, so
    /// the newest says everything older ones did and a lost one is made up
    /// by the next. The runtime still delivers one after every message sent
    /// before it, which is what a [`Msg::Probe`]'s claim rests on.
    fn ephemeral(&self) -> bool {
        matches!(self, Msg::Probe { .. } | Msg::Through { .. } | Msg::Settled { .. })
    }
    fn max_key_value_len(&self) -> (usize, usize) {
        match self {
            Msg::PutReq { key, value, deps } => {
                (deps.iter().map(|d| d.key.len()).max().unwrap_or(0).max(key.len()), value.len())
            }
            Msg::RotReq { keys, .. } => (keys.iter().map(|k| k.len()).max().unwrap_or(0), 0),
            Msg::GetReq { key, .. } => (key.len(), 0),
            _ => (0, 0),
        }
    }
    crate::key_hint!(Msg: PutReq, CheckReq, GetReq; wrapping: Replicate);
    fn payload_bytes(&self) -> usize {
        // Dependency keys and the checked version's key are metadata: they
        // name other writes.
        match self {
            Msg::PutReq { key, value, .. } => key.len() + value.len(),
            Msg::Replicate(r) => r.key.len() + r.value.len(),
            Msg::RotReq { keys, .. } => payload(keys.iter().map(|k| &k[..])),
            Msg::RotReply { items: Ok(items), .. } => payload(items.iter().flatten().map(|i| &i.value[..])),
            Msg::GetReq { key, .. } => key.len(),
            Msg::GetReply { item: Ok(item), .. } => payload(item.iter().map(|i| &i.value[..])),
            Msg::PutReply(_)
            | Msg::RotReply { items: Err(_), .. }
            | Msg::GetReply { item: Err(_), .. }
            | Msg::CheckReq { .. }
            | Msg::CheckReply { .. }
            | Msg::Probe { .. }
            | Msg::Through { .. }
            | Msg::Settled { .. } => 0,
        }
    }
}

/// A stored version.
///
/// - `visible`: its readers check (and, replicated, its dependency check)
///   is done, so reads may return it. Until then it waits in the store, so
///   that a crash cannot lose it.
/// - `deps`: what it was written after, kept until it is visible (the check
///   runs again after a restart); empty once visible.
/// - `old_readers`: the ROTs that must not see it — they read an older
///   version than one of its dependencies, or are old readers of one of
///   them. Cleared `reader_ttl_us` after it became visible (every such ROT
///   is over by then; deviation 3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    pub value: Value,
    pub stamp: Stamp,
    pub deps: Vec<Dep>,
    pub visible: bool,
    pub old_readers: OldReaders,
    /// The origin's physical clock when the PUT was accepted, for the
    /// visibility-latency estimate (not a time any rule reads).
    pub written_us: u64,
}

crate::impl_versioned!(Version, Stamp = stamp);

/// Dependencies a request may carry at most.
pub const MAX_DEPS: usize = 4_096;
