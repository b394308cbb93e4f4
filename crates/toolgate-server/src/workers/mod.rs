//! The background workers: what every process runs beside the handlers,
//! from the launcher's start to its shutdown.
//!
//! - [`continuation`]: continues the conversations whose approvals were
//!   decided out of band (it runs the stored runs of `run/`).

pub mod continuation;
