//! Every text the faces print and every shape they return, built from the verbs' results.

pub mod format;
pub mod prefixed;
#[cfg(feature = "schema")]
pub mod schema;
pub mod table;
pub mod view;
