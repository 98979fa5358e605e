//! The crypto provider is the program's choice: building an HTTP(S) git source before the
//! program installed one is a clear configuration error, not a panic on the first fetch. Alone
//! in its test binary, so that no other test of the process has installed a provider yet.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use drift_core::ErrorKind;
use drift_git::{GitConfig, GitSource};

#[test]
fn an_http_git_source_needs_the_program_to_install_a_crypto_provider() {
    assert!(rustls::crypto::CryptoProvider::get_default().is_none(), "nothing installed one behind our back");
    let url = "https://x-access-token:hunter2@git.example.com/org/repo.git";
    let err = GitSource::new(GitConfig::new(url, "main")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ConfigInvalid);
    let message = err.to_string();
    assert!(message.contains("no rustls crypto provider is installed"), "{message}");
    assert!(!message.contains("hunter2"), "the URL is shown without its credentials: {message}");
    // Sources that do not speak HTTP do not need one.
    GitSource::new(GitConfig::new("file:///nowhere/repo.git", "main")).unwrap();

    common::install_crypto_provider();
    GitSource::new(GitConfig::new(url, "main")).unwrap();
}
