//! The signals that stop a command that runs until it is told to (`drift serve`, `drift fix`).

use anyhow::Result;

/// SIGTERM and SIGINT (Ctrl-C), listened to from the point on which they must stop a command
/// cleanly: `drift serve` from its start, `drift fix` from when its action starts (before that a
/// signal stops it outright, with nothing begun).
///
/// Listened to from then on, not only from when the command first waits for a signal: until a
/// signal is listened to, it kills the process outright (its default action), and one arriving
/// while tokio turns its delivery on, before the listener exists, is lost (tokio records it and
/// broadcasts it to no listener; one made afterwards never sees it). `drift serve` listened
/// late and was killed by 35 of 40 SIGTERMs sent the moment it printed its address; a lost one
/// would leave a server running after its SIGTERM. A signal received before the command waits
/// is kept (the first wait returns at once), and a second one during a grace is never missed.
pub struct Stops {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

impl Stops {
    /// Listens to both signals from now on.
    pub fn listen() -> Result<Stops> {
        #[cfg(unix)]
        {
            use anyhow::Context;
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Stops {
                term: signal(SignalKind::terminate()).context("listening for SIGTERM")?,
                int: signal(SignalKind::interrupt()).context("listening for SIGINT")?,
            })
        }
        #[cfg(not(unix))]
        Ok(Stops {})
    }

    /// The next signal (at once for one received since [`Stops::listen`] and not yet waited for).
    pub async fn next(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
        #[cfg(not(unix))]
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
