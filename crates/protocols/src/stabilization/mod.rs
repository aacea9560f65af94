//! The stabilization family: a remote write is stored on arrival but made
//! visible only once a *stable time* computed inside the DC covers it — a
//! scalar GST (GentleRain), a per-DC stable vector (CausalSpartanX), and
//! next a vector GST (Cure), a GSS (Contrarian) or a UST (PaRiS). The shared
//! kit is the per-DC aggregation tree that computes the stable time.

pub mod causal_spartan_x;
pub mod gentlerain;
pub mod slices;
pub mod stable_tree;
