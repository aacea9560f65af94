//! Message plumbing every protocol would otherwise write by hand.
//!
//! [`impl_message!`](crate::impl_message) implements
//! [`Message`](causeway_core::Message) for a protocol's message enum from
//! a list of its variants by direction: each variant's kind — the name in
//! per-kind message and byte counts — is its name in snake case
//! (`StableReport` → `"stable_report"`), computed at compile time, and
//! [`Message::is_client`](causeway_core::Message::is_client) follows from
//! the list it is in. What only the protocol knows (the longest key and
//! value a request carries, the user payload of each message) is written
//! in the same invocation and passed through unchanged.

/// Length of `s` (an ASCII CamelCase identifier) in snake case.
#[doc(hidden)]
pub const fn snake_len(s: &str) -> usize {
    let b = s.as_bytes();
    let (mut i, mut n) = (0, 0);
    while i < b.len() {
        if i > 0 && b[i].is_ascii_uppercase() {
            n += 1;
        }
        n += 1;
        i += 1;
    }
    n
}

/// `s` (an ASCII CamelCase identifier) in snake case, as bytes.
#[doc(hidden)]
pub const fn snake<const N: usize>(s: &str) -> [u8; N] {
    let b = s.as_bytes();
    let mut out = [0u8; N];
    let (mut i, mut j) = (0, 0);
    while i < b.len() {
        if b[i].is_ascii_uppercase() {
            if i > 0 {
                out[j] = b'_';
                j += 1;
            }
            out[j] = b[i].to_ascii_lowercase();
        } else {
            out[j] = b[i];
        }
        i += 1;
        j += 1;
    }
    out
}

/// The snake-case name of a variant identifier, as a `&'static str` built
/// at compile time.
#[doc(hidden)]
#[macro_export]
macro_rules! snake_name {
    ($v:ident) => {{
        const S: &str = stringify!($v);
        const B: [u8; $crate::kit::msg::snake_len(S)] = $crate::kit::msg::snake(S);
        const K: &str = match ::core::str::from_utf8(&B) {
            Ok(s) => s,
            Err(_) => panic!("message variant names are ASCII"),
        };
        K
    }};
}

/// Implements [`Message`](causeway_core::Message) for a message enum.
///
/// ```ignore
/// impl_message! {
///     Msg {
///         client: GetReq, GetReply, PutReply;           // requests and replies that write nothing
///         writes: PutReq;                               // client requests that write
///         peer: Replicate, Heartbeat;                   // between servers
///         nested: Path;                                 // Path(inner): inner.kind(), a peer message
///     }
///     fn max_key_value_len(&self) -> (usize, usize) { … }
///     fn payload_bytes(&self) -> usize { … }
/// }
/// ```
///
/// `writes` lists the client requests that change the store: a session
/// allowed only to read is refused them. Each list may be empty but must be present; `nested` variants hold one
/// value whose inherent `kind()` names them (see [`impl_kinds!`](crate::impl_kinds)).
/// A variant left out of every list is a compile error (the generated
/// `match` is exhaustive).
#[macro_export]
macro_rules! impl_message {
    (
        $msg:ident {
            client: $($client:ident),* $(,)?;
            writes: $($writes:ident),* $(,)?;
            peer: $($peer:ident),* $(,)?;
            nested: $($nested:ident),* $(,)?;
        }
        $($rest:tt)*
    ) => {
        impl ::causeway_core::Message for $msg {
            fn kind(&self) -> &'static str {
                match self {
                    $( $msg::$client { .. } => $crate::snake_name!($client), )*
                    $( $msg::$writes { .. } => $crate::snake_name!($writes), )*
                    $( $msg::$peer { .. } => $crate::snake_name!($peer), )*
                    $( $msg::$nested(inner) => inner.kind(), )*
                }
            }
            fn is_client(&self) -> bool {
                match self {
                    $( $msg::$client { .. } => true, )*
                    $( $msg::$writes { .. } => true, )*
                    $( $msg::$peer { .. } => false, )*
                    $( $msg::$nested(_) => false, )*
                }
            }
            fn is_write(&self) -> bool {
                match self {
                    $( $msg::$writes { .. } => true, )*
                    _ => false,
                }
            }
            $($rest)*
        }
    };
}

/// Gives an enum of peer messages nested in protocols' messages (such as
/// the replication path's) an inherent `kind()`: each variant's name in
/// snake case.
#[macro_export]
macro_rules! impl_kinds {
    ($msg:ident: $($v:ident),+ $(,)?) => {
        impl $msg {
            /// The variant's name in snake case, for per-kind counts.
            pub fn kind(&self) -> &'static str {
                match self {
                    $( $msg::$v { .. } => $crate::snake_name!($v), )+
                }
            }
        }
    };
}

/// [`Message::key_hint`](causeway_core::Message::key_hint) for a message
/// enum whose one-key messages are the struct variants named, each with a
/// `key` field, and (after `wrapping:`) the variants that wrap one struct
/// with a `key` field; invoked inside [`impl_message!`](crate::impl_message).
///
/// ```ignore
/// crate::key_hint!(Msg: GetReq, PutReq, Replicate);
/// crate::key_hint!(Msg: Read, PutReq; wrapping: Replicate);
/// ```
#[macro_export]
macro_rules! key_hint {
    ($msg:ident: $($v:ident),+ $(; wrapping: $($w:ident),+)? $(,)?) => {
        fn key_hint(&self) -> Option<&[u8]> {
            match self {
                $( $msg::$v { key, .. } => Some(key), )+
                $( $( $msg::$w(inner) => Some(&inner.key), )+ )?
                _ => None,
            }
        }
    };
}

/// Bytes of the keys and values given: a message's user payload, for
/// [`causeway_core::Message::payload_bytes`].
pub fn payload<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> usize {
    parts.into_iter().map(<[u8]>::len).sum()
}

/// `impl Versioned` for a protocol's stored version: a struct with a
/// `value: Value` field, ordered by the given fields (the store keeps each
/// key's versions in that order, and the last of them wins).
///
/// ```ignore
/// crate::impl_versioned!(Version, (TimeUs, DcId) = (ut, sr));
/// crate::impl_versioned!(Version, Stamp = stamp);
/// ```
#[macro_export]
macro_rules! impl_versioned {
    ($ty:ty, $order:ty = ($($field:ident),+)) => {
        impl causeway_core::Versioned for $ty {
            type Order = $order;
            fn order(&self) -> $order {
                ($(self.$field),+)
            }
            fn value(&self) -> &causeway_core::Value {
                &self.value
            }
        }
    };
    ($ty:ty, $order:ty = $field:ident) => {
        $crate::impl_versioned!($ty, $order = ($field));
    };
}

#[cfg(test)]
mod tests {
    #[derive(Debug)]
    #[allow(dead_code)]
    enum Probe {
        GetReq { key: u8 },
        PutReply,
        StableReport(u8),
    }
    impl_kinds!(Probe: GetReq, PutReply, StableReport);

    #[test]
    fn kinds_are_variant_names_in_snake_case() {
        assert_eq!(Probe::GetReq { key: 1 }.kind(), "get_req");
        assert_eq!(Probe::PutReply.kind(), "put_reply");
        assert_eq!(Probe::StableReport(0).kind(), "stable_report");
        assert_eq!(crate::snake_name!(X), "x");
    }
}

/// A list that is nearly always empty, in one pointer: a message variant
/// holding it stays under the inline line (see CausalSpartanX's `Msg`)
/// where a `Vec` (24 bytes) or a boxed slice (16) would push it over, and
/// nothing is allocated while it is empty. Encoded as a `Vec<T>` is, so
/// swapping one for the other changes no wire or log format.
// The box is the point: a thin pointer to the vector.
#[allow(clippy::box_collection)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Thin<T>(Option<Box<Vec<T>>>);

impl<T> Default for Thin<T> {
    fn default() -> Self {
        Thin(None)
    }
}

impl<T> Thin<T> {
    pub fn new() -> Self {
        Thin(None)
    }

    pub fn from_vec(v: Vec<T>) -> Self {
        Thin((!v.is_empty()).then(|| Box::new(v)))
    }

    pub fn as_slice(&self) -> &[T] {
        self.0.as_deref().map_or(&[], |v| v.as_slice())
    }

    pub fn into_vec(self) -> Vec<T> {
        self.0.map_or_else(Vec::new, |v| *v)
    }

    pub fn push(&mut self, x: T) {
        self.0.get_or_insert_with(Default::default).push(x);
    }

    pub fn retain(&mut self, keep: impl FnMut(&T) -> bool) {
        if let Some(v) = self.0.as_mut() {
            v.retain(keep);
            if v.is_empty() {
                self.0 = None;
            }
        }
    }
}

impl<T> std::ops::Deref for Thin<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T> From<Vec<T>> for Thin<T> {
    fn from(v: Vec<T>) -> Self {
        Thin::from_vec(v)
    }
}

impl<T> IntoIterator for Thin<T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;
    fn into_iter(self) -> Self::IntoIter {
        self.into_vec().into_iter()
    }
}

impl<'a, T> IntoIterator for &'a Thin<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

impl<T: serde::Serialize> serde::Serialize for Thin<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.as_slice())
    }
}

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for Thin<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<T>::deserialize(d).map(Thin::from_vec)
    }
}
