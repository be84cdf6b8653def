//! Every text the faces print and every shape they return, built from the verbs' results.

pub mod format;
pub mod prefixed;
pub mod table;
pub mod view;
