//! # causeway-bench
//!
//! The benchmark harness: an experiment file names the protocols, a base
//! scenario, the parameter swept (and optionally a second one drawn as
//! separate curves), the repetitions and the plots. The runner executes every
//! point on the simulator (or, for what it can express, on an embedded
//! network cluster), takes the median of each metric over the repetitions,
//! and writes CSV, JSON, SVG plots and a Markdown report.
//!
//! It is not a statistics package: medians of a handful of repetitions,
//! nothing more. And it adds no workload or fault of its own — everything an
//! experiment varies is a field of a simulator scenario, set by its dotted
//! path, so what the harness can sweep is exactly what a scenario can say.

pub mod capacity;
pub mod claims;
pub mod experiment;
pub mod labels;
pub mod measure;
pub mod microbench;
pub mod plot;
pub mod progress;
pub mod provenance;
pub mod report;
pub mod reproduction;
pub mod runner;

pub use experiment::{Experiment, ExperimentError};
pub use runner::{Results, run};
