//! The settings of a `postgres://` URL, read through a URL parser once and judged key by key:
//! what may be shown (every secret replaced by `***`), what is refused before anything connects,
//! and what the driver is given.
//!
//! A setting is secret when its key, in any letter case, names a password, a passphrase, a
//! secret or a token: libpq's `password`, `sslpassword` and `oauth_client_secret`, their
//! spellings in other cases, sqlx's `options[password]`, and a `-c password=...` inside
//! `options`. The password of the user information is secret, and so is a `#fragment`, which a
//! PostgreSQL URL does not have: it is what follows a `#` written unencoded in a password.

use std::borrow::Cow;

/// Words that make a key secret, matched in lower case anywhere in the key.
const SECRET_WORDS: [&str; 6] = ["password", "passwd", "passphrase", "secret", "token", "pwd"];

/// The query keys the driver (sqlx) reads; it logs any other key with its value, so the others
/// never reach it.
const DRIVER_KEYS: [&str; 18] = [
    "sslmode",
    "ssl-mode",
    "sslrootcert",
    "ssl-root-cert",
    "ssl-ca",
    "sslcert",
    "ssl-cert",
    "sslkey",
    "ssl-key",
    "statement-cache-capacity",
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "application_name",
    "options",
];

/// Whether a connection setting's key names a secret (any letter case).
pub(crate) fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    SECRET_WORDS.iter().any(|w| key.contains(w))
}

fn is_options_key(key: &str) -> bool {
    key.eq_ignore_ascii_case("options") || key.to_ascii_lowercase().starts_with("options[")
}

/// The URL with every secret replaced by `***`: the user information's password, the value of
/// every secret key, the value of every secret setting inside `options`, and the fragment. A
/// URL that does not parse is shown as its scheme only (where its secrets end is unknown).
pub fn redact_url(url: &str) -> String {
    let Ok(mut parsed) = url::Url::parse(url) else {
        return match url.split_once("://") {
            Some((scheme, _)) if scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) => {
                format!("{scheme}://*** (not a valid URL)")
            }
            _ => "*** (not a valid URL)".to_owned(),
        };
    };
    if parsed.password().is_some() && parsed.set_password(Some("***")).is_err() {
        return format!("{}://*** (a password that cannot be hidden)", parsed.scheme());
    }
    if parsed.query().is_some() {
        let pairs: Vec<(String, String)> = parsed
            .query_pairs()
            .map(|(k, v)| {
                let v = if is_secret_key(&k) {
                    "***".to_owned()
                } else if is_options_key(&k) {
                    redact_options(&v).into_owned()
                } else {
                    v.into_owned()
                };
                (k.into_owned(), v)
            })
            .collect();
        parsed.query_pairs_mut().clear().extend_pairs(pairs);
    }
    if parsed.fragment().is_some() {
        parsed.set_fragment(Some("***"));
    }
    // `***` is shown as written, not percent-encoded.
    parsed.to_string().replace("%2A%2A%2A", "***")
}

/// The command-line options of `options` (`-c name=value`, `-cname=value`, `--name=value`,
/// backslash-escaped spaces kept in their word) with the value of every secret setting
/// replaced by `***`.
pub(crate) fn redact_options(options: &str) -> Cow<'_, str> {
    let words = split_words(options);
    if !words.iter().any(|(_, w)| setting_of(w).is_some_and(|(name, _)| is_secret_key(name))) {
        return Cow::Borrowed(options);
    }
    let mut out = String::with_capacity(options.len());
    let mut at = 0;
    for (start, word) in words {
        out.push_str(&options[at..start]);
        match setting_of(word) {
            Some((name, value)) if is_secret_key(name) => {
                out.push_str(&word[..word.len() - value.len()]);
                out.push_str("***");
            }
            _ => out.push_str(word),
        }
        at = start + word.len();
    }
    out.push_str(&options[at..]);
    Cow::Owned(out)
}

/// The words of `options` and where each starts: split at white space that no backslash escapes.
fn split_words(text: &str) -> Vec<(usize, &str)> {
    let mut words = Vec::new();
    let mut start = None;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        if c == '\\' {
            escaped = true;
            start.get_or_insert(i);
        } else if c.is_whitespace() {
            if let Some(s) = start.take() {
                words.push((s, &text[s..i]));
            }
        } else {
            start.get_or_insert(i);
        }
    }
    if let Some(s) = start {
        words.push((s, &text[s..]));
    }
    words
}

/// The name and the value of a word `name=value`, `-cname=value` or `--name=value`.
fn setting_of(word: &str) -> Option<(&str, &str)> {
    let word = word.strip_prefix("--").or_else(|| word.strip_prefix("-c")).unwrap_or(word);
    word.split_once('=')
}

/// What is wrong with the URL's settings, naming keys and never a value: a fragment, or a
/// secret key the driver does not read (`sslpassword`, `PASSWORD`, ...), which would otherwise
/// be logged by the driver or silently dropped.
pub(crate) fn check(url: &str) -> Result<(), String> {
    let Ok(parsed) = url::Url::parse(url) else {
        // The driver refuses it too; its error quotes no part of the URL.
        return Ok(());
    };
    if parsed.fragment().is_some() {
        return Err("the database URL has a `#`: a PostgreSQL URL has no fragment, and a `#` in a password must \
                    be written %23 (better: name the variable that holds the password in `password_env`)"
            .to_owned());
    }
    for (key, _) in parsed.query_pairs() {
        if is_secret_key(&key) && key != "password" && !is_options_key(&key) {
            return Err(format!(
                "the database URL's setting `{}` is not read by drift's PostgreSQL driver (setting names are \
                 case-sensitive; an encrypted client key is not supported): remove it, and give the password \
                 as `password` or, better, in `password_env`",
                shown_key(&key)
            ));
        }
    }
    Ok(())
}

/// A key as an error may name it: printable ASCII only, at most 40 characters.
fn shown_key(key: &str) -> String {
    let clean: String = key.chars().filter(|c| c.is_ascii_graphic()).take(40).collect();
    if clean.is_empty() { "?".to_owned() } else { clean }
}

/// The URL the driver is given and the keys left out of it: the settings it reads, and no
/// other (it would log each other key with its value at `warn`).
pub(crate) fn driver_url(url: &str) -> (Cow<'_, str>, Vec<String>) {
    let Ok(mut parsed) = url::Url::parse(url) else { return (Cow::Borrowed(url), Vec::new()) };
    if parsed.query().is_none() {
        return (Cow::Borrowed(url), Vec::new());
    }
    let mut dropped = Vec::new();
    let kept: Vec<(String, String)> = parsed
        .query_pairs()
        .filter(|(k, _)| {
            let known = DRIVER_KEYS.contains(&k.as_ref()) || k.starts_with("options[");
            if !known {
                dropped.push(shown_key(k));
            }
            known
        })
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    if dropped.is_empty() {
        return (Cow::Borrowed(url), dropped);
    }
    if kept.is_empty() {
        parsed.set_query(None);
    } else {
        parsed.query_pairs_mut().clear().extend_pairs(kept);
    }
    (Cow::Owned(parsed.to_string()), dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every form of issue 37 (and issue 16's), with a canary that must never be shown.
    const FORMS: [&str; 16] = [
        "postgres://drift:CANARY@db/drift",
        "postgres://drift:CAN%2FARY@db:5432/drift?sslmode=require",
        "postgres://drift@db/drift?password=CANARY&sslmode=require",
        "postgres://drift@db/drift?PASSWORD=CANARY",
        "postgres://drift@db/drift?Password=CANARY",
        "postgres://drift@db/drift?sslpassword=CANARY",
        "postgres://drift@db/drift?SSLPassword=CANARY&sslmode=verify-full",
        "postgres://drift@db/drift?oauth_client_secret=CANARY",
        "postgres://drift@db/drift?password=abc#CANARY",
        "postgres://drift@db/drift?options=-c%20password%3DCANARY",
        "postgres://drift@db/drift?options=-c+search_path%3Dx+-cpassword%3DCANARY",
        "postgres://drift@db/drift?options=--my.password%3DCAN\\%20ARY%20-c%20a%3Db",
        "postgres://drift@db/drift?options[password]=CANARY",
        "postgres://drift@db/drift?options=-c%20PassWord%3DCANARY",
        "postgres://drift:CAN/ARY?x@db/drift",
        "postgres://drift:CANARY@[::1",
    ];

    #[test]
    fn no_form_of_a_secret_is_shown() {
        for url in FORMS {
            let shown = redact_url(url);
            for part in ["CANARY", "CAN", "ARY"] {
                assert!(!shown.contains(part), "{url} -> {shown}");
            }
            assert!(shown.contains("***"), "{url} -> {shown}");
            if let Err(e) = check(url) {
                assert!(!e.contains("CAN") && !e.contains("ARY"), "{url} -> {e}");
            }
        }
    }

    #[test]
    fn what_is_not_secret_is_shown_as_written() {
        assert_eq!(
            redact_url("postgres://drift@db/drift?sslmode=require"),
            "postgres://drift@db/drift?sslmode=require"
        );
        assert_eq!(
            redact_url("postgres://drift@db/drift?password=x&sslmode=require"),
            "postgres://drift@db/drift?password=***&sslmode=require"
        );
        assert_eq!(redact_options("-c search_path=a -c password=b"), "-c search_path=a -c password=***");
        assert_eq!(redact_options("-cstatement_timeout=5s"), "-cstatement_timeout=5s");
        assert_eq!(redact_options("--x.token=a\\ b -c y=z"), "--x.token=*** -c y=z");
    }

    #[test]
    fn secret_keys_the_driver_does_not_read_and_fragments_are_refused() {
        for url in [
            "postgres://d@db/x?PASSWORD=a",
            "postgres://d@db/x?Password=a",
            "postgres://d@db/x?sslpassword=a",
            "postgres://d@db/x?oauth_client_secret=a",
            "postgres://d@db/x?password=a#b",
        ] {
            assert!(check(url).is_err(), "{url}");
        }
        for url in [
            "postgres://d:p@db/x",
            "postgres://d@db/x?password=a",
            "postgres://d@db/x?options=-c%20password%3Da",
            "postgres://d@db/x?options[password]=a&sslmode=disable",
            "postgres://d@db/x?connect_timeout=3",
        ] {
            assert_eq!(check(url), Ok(()), "{url}");
        }
        let e = check("postgres://d@db/x?SSLPassword=CANARY").unwrap_err();
        assert!(e.contains("`SSLPassword`") && !e.contains("CANARY"), "{e}");
    }

    #[test]
    fn the_driver_gets_only_the_keys_it_reads() {
        let (url, dropped) = driver_url("postgres://d@db/x?sslmode=disable&connect_timeout=CANARY&options=-c%20a%3Db");
        assert_eq!(dropped, ["connect_timeout"]);
        assert!(!url.contains("CANARY") && url.contains("sslmode=disable") && url.contains("options="), "{url}");
        let (url, dropped) = driver_url("postgres://d@db/x?weird=1");
        assert_eq!((url.as_ref(), dropped.len()), ("postgres://d@db/x", 1));
        let (url, dropped) = driver_url("postgres://d:p@db/x?sslmode=require");
        assert_eq!((url.as_ref(), dropped.len()), ("postgres://d:p@db/x?sslmode=require", 0));
    }
}
