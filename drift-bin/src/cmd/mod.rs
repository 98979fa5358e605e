//! One module per subcommand.

pub mod audit;
pub mod check;
pub mod decide;
pub mod diff;
pub mod fix;
pub mod propose;
pub mod render;
pub mod scan;
pub mod secret_key;
pub mod serve;
pub mod shell;
pub mod store;
