//! One module per subcommand.

pub mod diff;
