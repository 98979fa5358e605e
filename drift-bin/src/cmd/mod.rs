//! One module per subcommand.

pub mod diff;
pub mod render;
pub mod scan;
pub mod serve;
pub mod store;
