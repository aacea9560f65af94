//! Alg 1, the client: the shared [`VectorClient`] over EunomiaKV's messages.

use super::msg::Msg;
use crate::services::vector_client::{VectorClient, VectorMsgs, VectorReply};
use causeway_core::{Key, Value};

pub type EunomiaKvClient = VectorClient<Msg>;

impl VectorMsgs for Msg {
    fn get_req(key: Key) -> Msg {
        Msg::GetReq { key }
    }
    fn put_req(key: Key, value: Value, vclock: Vec<u64>) -> Msg {
        Msg::PutReq { key, value, vclock }
    }
    fn into_reply(self) -> VectorReply {
        match self {
            Msg::GetReply { value, vts, .. } => VectorReply::Get { value, vts: vts.to_vec() },
            Msg::PutReply { vts } => VectorReply::Put { vts },
            Msg::Refused { reason, .. } => VectorReply::Refused { reason },
            _ => VectorReply::Other,
        }
    }
}
