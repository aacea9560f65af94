//! Step-by-step tests.
