//! Fuzz the frame decoder with every protocol's message type: whatever bytes
//! arrive, decoding returns a value or a typed error and never panics, and a
//! decoded frame re-encodes to something that decodes again.
//!
//! Run: `cargo +nightly fuzz run frame_decode` (from the repository root).

#![no_main]

use causeway_net::frame::{decode, encode};
use causeway_protocols::{causal_spartan_x, eventual};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(w) = decode::<eventual::Msg>(data) {
        let again = encode(&w);
        assert!(decode::<eventual::Msg>(&again[4..]).is_ok());
    }
    if let Ok(w) = decode::<causal_spartan_x::Msg>(data) {
        let again = encode(&w);
        assert!(decode::<causal_spartan_x::Msg>(&again[4..]).is_ok());
    }
});
