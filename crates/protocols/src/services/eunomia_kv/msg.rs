use causeway_core::{DcId, Key, PartitionId, Value};
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::ser::{SerializeTuple, Serializer};
use serde::{Deserialize, Serialize};

/// An update's vector timestamp in its metadata, one entry per DC: kept
/// inline for up to three DCs (the paper's deployments), so an update's
/// metadata is one allocation (its key) to decode, move and drop, not
/// two. It travels as a sequence, as a `Vec` does.
pub type Vts = smallvec::SmallVec<[u64; 3]>;

/// One update's metadata, as a partition reports it to Eunomia and
/// Eunomia ships it (§5 "separation of data and metadata": the update's id
/// ⟨u.vts\[m\], Key\⟩ and its partition; the vector travels with it because
/// the receiver's dependency check needs it, Alg 5 line 12).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpMeta {
    pub key: Key,
    pub partition: PartitionId,
    /// u.vts: one entry per DC; the origin's entry is the update's
    /// timestamp, by which Eunomia orders it.
    pub vts: Vts,
    /// VClock_c\[origin\] when the update was written: its causal past in
    /// its own DC, which `vts[origin]` (its own timestamp) no longer shows.
    /// The receiver tells concurrent updates of one DC apart by it
    /// (deviation 8).
    pub dep_us: u64,
}

impl OpMeta {
    /// Whether this update (from DC `origin`) may depend on `w` (from DC
    /// `w_origin`): `w` is at or below this update's causal past.
    pub fn may_depend_on(&self, origin: usize, w: &OpMeta, w_origin: usize) -> bool {
        let past = if origin == w_origin { self.dep_us } else { self.vts[w_origin] };
        w.vts[w_origin] <= past
    }
}

/// Append each of `ops` to `out`, one after the other, each as postcard
/// encodes an [`OpMeta`] (the key's length and bytes, the partition, the
/// vector's length and entries, dep_us, each number a LEB128 varint), with
/// no count in front: [`decode_ops`] reads to the end. Written out here
/// rather than through serde: postcard appends each varint as a slice of
/// its own, and that was most of the cost of encoding an update.
pub(super) fn encode_ops<'a>(ops: impl IntoIterator<Item = &'a OpMeta>, out: &mut Vec<u8>) {
    #[inline(always)]
    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    for u in ops {
        out.reserve(u.key.len() + 10 * (u.vts.len() + 4));
        varint(out, u.key.len() as u64);
        out.extend_from_slice(&u.key);
        varint(out, u.partition.0.into());
        varint(out, u.vts.len() as u64);
        for &t in &u.vts {
            varint(out, t);
        }
        varint(out, u.dep_us);
    }
}

/// The updates [`encode_ops`] wrote, in order.
pub(super) fn decode_ops(mut bytes: &[u8], len_hint: usize) -> postcard::Result<Vec<OpMeta>> {
    // A hint from a peer: no more than the bytes could hold.
    let mut ops = Vec::with_capacity(len_hint.min(bytes.len() / 4));
    while !bytes.is_empty() {
        let (u, rest) = postcard::take_from_bytes::<OpMeta>(bytes)?;
        ops.push(u);
        bytes = rest;
    }
    Ok(ops)
}

/// A shipment's updates (Alg 3 line 10), in the order shipped. The Eunomia
/// replica that ships them encodes them once ([`Shipment::encoded`]): the
/// runtime writes those bytes to its log (the message's outbox record) and
/// to the wire, where it encoded every update for each, and a shipment to
/// a second receiver from a later point shares them. Decoded on arrival,
/// as any message is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shipment(Repr);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Repr {
    Ops(Vec<OpMeta>),
    /// `len` updates as [`encode_ops`] writes them, `key_bytes` bytes of
    /// keys among them.
    Encoded {
        len: usize,
        key_bytes: usize,
        bytes: bytes::Bytes,
    },
}

impl Shipment {
    /// `len` updates, `key_bytes` bytes of keys among them, as
    /// [`encode_ops`] wrote them.
    pub(super) fn encoded(len: usize, key_bytes: usize, bytes: bytes::Bytes) -> Shipment {
        Shipment(Repr::Encoded { len, key_bytes, bytes })
    }

    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Ops(ops) => ops.len(),
            Repr::Encoded { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes of the updates' keys.
    pub fn key_bytes(&self) -> usize {
        match &self.0 {
            Repr::Ops(ops) => ops.iter().map(|o| o.key.len()).sum(),
            Repr::Encoded { key_bytes, .. } => *key_bytes,
        }
    }

    /// The updates, in the order shipped.
    pub fn into_ops(self) -> Vec<OpMeta> {
        match self.0 {
            Repr::Ops(ops) => ops,
            Repr::Encoded { len, bytes, .. } => decode_ops(&bytes, len).expect("a shipment encoded here decodes"),
        }
    }

    /// A copy of the updates, in the order shipped.
    pub fn to_ops(&self) -> Vec<OpMeta> {
        self.clone().into_ops()
    }
}

impl From<Vec<OpMeta>> for Shipment {
    fn from(ops: Vec<OpMeta>) -> Shipment {
        Shipment(Repr::Ops(ops))
    }
}

/// On the wire and in the log: the count, the keys' bytes, then the
/// updates as one byte string.
impl Serialize for Shipment {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Blob<'a>(&'a [u8]);
        impl Serialize for Blob<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_bytes(self.0)
            }
        }
        let mut t = s.serialize_tuple(3)?;
        t.serialize_element(&self.len())?;
        t.serialize_element(&self.key_bytes())?;
        match &self.0 {
            Repr::Encoded { bytes, .. } => t.serialize_element(&Blob(bytes))?,
            Repr::Ops(ops) => {
                let mut out = Vec::new();
                encode_ops(ops, &mut out);
                t.serialize_element(&Blob(&out))?
            }
        }
        t.end()
    }
}

impl<'de> Deserialize<'de> for Shipment {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Shipment, D::Error> {
        /// The updates' byte string, decoded where it lies.
        struct Ops(Vec<OpMeta>);
        impl<'de> Deserialize<'de> for Ops {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Ops, D::Error> {
                struct V;
                impl Visitor<'_> for V {
                    type Value = Ops;
                    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                        f.write_str("a shipment's encoded updates")
                    }
                    fn visit_bytes<E: de::Error>(self, b: &[u8]) -> Result<Ops, E> {
                        decode_ops(b, 0).map(Ops).map_err(E::custom)
                    }
                }
                d.deserialize_bytes(V)
            }
        }
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Shipment;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a shipment")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Shipment, A::Error> {
                let missing = || de::Error::custom("a shipment cut short");
                let len: usize = seq.next_element()?.ok_or_else(missing)?;
                let _key_bytes: usize = seq.next_element()?.ok_or_else(missing)?;
                let Ops(ops) = seq.next_element()?.ok_or_else(missing)?;
                if ops.len() != len {
                    return Err(de::Error::custom(format!("a shipment of {len} updates holds {}", ops.len())));
                }
                Ok(Shipment(Repr::Ops(ops)))
            }
        }
        d.deserialize_tuple(3, V)
    }
}

/// What a receiver asks a partition to make visible: the version of `key`
/// with order ⟨ts, origin⟩ (its payload may not have arrived yet).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplyOp {
    pub key: Key,
    pub ts: u64,
    pub origin: DcId,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    // Client ↔ partition (Alg 1, Alg 2).
    GetReq {
        key: Key,
    },
    /// The value read and its vector timestamp (zeros when none).
    GetReply {
        key: Key,
        value: Option<Value>,
        vts: Vts,
    },
    /// An update with the client's causal past VClock_c.
    PutReq {
        key: Key,
        value: Value,
        vclock: Vec<u64>,
    },
    /// u.vts, which the client takes as its new VClock_c.
    PutReply {
        vts: Vec<u64>,
    },
    /// The server does not store `key`: a typed refusal.
    Refused {
        key: Key,
        reason: String,
    },

    // Partition → sibling partitions in the other DCs (§5: the payload
    // travels directly, with no ordering constraint).
    Payload {
        key: Key,
        version: Version,
    },
    // Partition → every Eunomia replica of its DC (Alg 2 line 8, Alg 4
    // `new_batch`): the batch's updates in timestamp order, then the
    // partition's time.
    Report {
        partition: PartitionId,
        ops: Vec<OpMeta>,
        partition_time_us: u64,
    },
    // Partition → every Eunomia replica of its DC (Alg 2 line 12): no
    // update of this partition will be stamped at or below this time.
    Heartbeat {
        partition: PartitionId,
        partition_time_us: u64,
    },
    // Eunomia leader → each remote DC's receiver (Alg 3 line 10): every
    // update of this DC with `from_us < ts ≤ to_us` (StableTime), in
    // timestamp order.
    Ship {
        from_us: u64,
        to_us: u64,
        ops: Shipment,
    },
    // Eunomia replica → the other replicas: alive (the failure detector's
    // heartbeat) and its StableTime (Alg 4 line 12, `stable`).
    ReplicaBeat {
        stable_us: u64,
    },
    // Receiver → every Eunomia replica of DC k: every update of k at or
    // below this time is queued here (deviation 7; not in the paper).
    Shipped {
        through_us: u64,
    },
    // Receiver → partition (Alg 5 line 14, `apply`), round `round`.
    Apply {
        round: u64,
        ops: Vec<ApplyOp>,
    },
    // Partition → receiver (Alg 5 line 15, `ok`): every op of the round
    // sent here is visible (or lost last-writer-wins to a visible one).
    Applied {
        round: u64,
    },
}

crate::impl_message! {
    Msg {
        client: GetReq, GetReply, PutReply, Refused;
        writes: PutReq;
        peer: Payload, Report, Heartbeat, Ship, ReplicaBeat, Shipped, Apply, Applied;
        nested: ;
    }
    fn max_key_value_len(&self) -> (usize, usize) {
        match self {
            Msg::GetReq { key } => (key.len(), 0),
            Msg::PutReq { key, value, .. } => (key.len(), value.len()),
            _ => (0, 0),
        }
    }
    crate::key_hint!(Msg: GetReq, PutReq, Payload);
    fn items(&self) -> usize {
        match self {
            Msg::Report { ops, .. } => ops.len(),
            Msg::Ship { ops, .. } => ops.len(),
            Msg::Apply { ops, .. } => ops.len(),
            _ => 1,
        }
    }
    fn payload_bytes(&self) -> usize {
        match self {
            Msg::GetReq { key } | Msg::Refused { key, .. } => key.len(),
            Msg::GetReply { key, value, .. } => key.len() + value.as_ref().map_or(0, |v| v.len()),
            Msg::PutReq { key, value, .. } | Msg::Payload { key, version: Version { value, .. } } => {
                key.len() + value.len()
            }
            Msg::Report { ops, .. } => ops.iter().map(|o| o.key.len()).sum(),
            Msg::Ship { ops, .. } => ops.key_bytes(),
            Msg::Apply { ops, .. } => ops.iter().map(|o| o.key.len()).sum(),
            Msg::PutReply { .. } | Msg::Heartbeat { .. } | Msg::ReplicaBeat { .. } | Msg::Shipped { .. } | Msg::Applied { .. } => 0,
        }
    }
    /// The heartbeats, a partition's and the failure detector's, a
    /// receiver's acknowledgement, and a shipment with no update (the
    /// leader's word that its DC has none in the range: deviation 11): the
    /// newest says all (each only grows), one is sent every period (a
    /// receiver's acknowledgement with each shipment of updates it takes),
    /// and each leaves after every message sent before it. A partition's
    /// promise outlives a crash through its clock lease, so neither end
    /// journals it.
    fn ephemeral(&self) -> bool {
        match self {
            Msg::Heartbeat { .. } | Msg::ReplicaBeat { .. } | Msg::Shipped { .. } => true,
            Msg::Ship { ops, .. } => ops.is_empty(),
            _ => false,
        }
    }
    /// An apply round and its acknowledgement may be lost: the receiver
    /// sends a round again until every partition has acknowledged it
    /// (`apply_retry_us`), after a restart too, and a partition applies a
    /// round again idempotently. Sequenced, each would cost a log record
    /// and so a sync at both ends of every round (the receiver's delivery
    /// mark of `Applied`, its outbox record of `Apply`), on the critical
    /// path of the receiver's apply rate (deviation 8). The partition's
    /// acknowledgement still leaves only once what it made visible is
    /// durable: that turn logs the versions it changed.
    fn transient(&self) -> bool {
        matches!(self, Msg::Apply { .. } | Msg::Applied { .. })
    }
}

/// A stored version: the value, its vector timestamp, and whether the
/// receiver has made it visible. Last-writer-wins order ⟨vts\[origin\],
/// origin⟩ (see the module's deviation 2: it extends causality).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Version {
    pub value: Value,
    /// `vts[origin]`, the order's first field.
    pub ts: u64,
    pub origin: DcId,
    pub vts: Vec<u64>,
    /// [`OpMeta::dep_us`]: the writer's causal past in the origin DC.
    pub dep_us: u64,
    /// Local updates are visible at once; a remote payload is stored
    /// invisible until the receiver's `Apply` for it (§5).
    pub visible: bool,
}

crate::impl_versioned!(Version, (u64, DcId) = (ts, origin));
