//! What every protocol shares, so that a protocol's folder holds only its
//! algorithm: client-side routing and fan-out helpers, and the hand-cranked
//! network the step-by-step tests drive.

pub mod client;
pub mod msg;
pub mod node;
pub mod testkit;
