//! Printable names for keys and values, shared by the model's errors, the
//! explanations and the dbcop export.

use causeway_core::write_id_of;
use serde::Serialize;
use std::fmt;

/// A key, printable: UTF-8 (lossy), control characters escaped, truncated.
pub fn key_name(k: &[u8]) -> String {
    let s: String = String::from_utf8_lossy(k).chars().flat_map(|c| c.escape_debug()).collect();
    if s.chars().count() > 48 { format!("{}…", s.chars().take(47).collect::<String>()) } else { s }
}

/// A value, printable: `∅` for the initial state, `w<id>` for a tagged
/// runtime value, the quoted bytes otherwise.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ValueName {
    Absent,
    Write(u64),
    Bytes(String),
}

pub fn value_name(v: Option<&[u8]>) -> ValueName {
    match v {
        None => ValueName::Absent,
        Some(v) => match write_id_of(v) {
            Some(id) => ValueName::Write(id),
            None => ValueName::Bytes(key_name(v)),
        },
    }
}

impl fmt::Display for ValueName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueName::Absent => f.write_str("∅"),
            ValueName::Write(id) => write!(f, "w{id}"),
            ValueName::Bytes(s) => write!(f, "\"{s}\""),
        }
    }
}
