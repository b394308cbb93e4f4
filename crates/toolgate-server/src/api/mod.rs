//! The HTTP handlers, one file per resource.

pub(crate) mod agui;
