//! What the three sources share: the last snapshot per revision, names, URL redaction.

use std::sync::{Arc, Mutex, Weak};

use drift_model::DesiredSnapshot;

/// A URL as it may be logged, reported and stored: read through a URL parser, without its user
/// information (`user:password@`), with the value of every query parameter and the fragment
/// replaced by `***` (a token in `?token=...` is as secret as a password). A URL the parser
/// refuses keeps only its scheme; an scp-like
/// `git@host:path` or a local path has no secret and is shown as it is.
pub(crate) fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else { return url.to_owned() };
    let cleared = url::Url::parse(url).ok().and_then(|mut u| {
        // `file://` has no user information to remove (and refuses an empty one).
        let user = u.username().is_empty() || u.set_username("").is_ok();
        let password = u.password().is_none() || u.set_password(None).is_ok();
        (user && password).then_some(u)
    });
    match cleared {
        Some(mut u) => {
            if u.query().is_some() {
                let names: Vec<String> = u.query_pairs().map(|(k, _)| k.into_owned()).collect();
                let query = names.iter().map(|k| format!("{k}=***")).collect::<Vec<_>>().join("&");
                u.set_query(Some(&query));
            }
            if u.fragment().is_some() {
                u.set_fragment(Some("***"));
            }
            u.to_string()
        }
        // Unparseable, or with user information that cannot be removed: where the host ends is
        // unknown (a password with a `/` looks like a host and a path), so only the scheme.
        _ => format!("{}://*** (not a valid URL)", &url[..scheme_end]),
    }
}

/// The secret parts of a URL (password, query values, fragment), raw and percent-decoded, that
/// foreign error messages (gix, reqwest) may quote.
pub(crate) fn url_secrets(url: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut push = |s: &str| {
        if !s.is_empty() && !out.iter().any(|o| o == s) {
            out.push(s.to_owned());
        }
    };
    if let Ok(u) = url::Url::parse(url) {
        if let Some(p) = u.password() {
            push(p);
            push(&percent_decode(p));
        }
        for (_, v) in u.query_pairs() {
            push(&v);
        }
        if let Some(q) = u.query() {
            for part in q.split('&') {
                push(part.split_once('=').map_or("", |(_, v)| v));
            }
        }
        if let Some(f) = u.fragment() {
            push(f);
        }
    } else if let Some((_, rest)) = url.split_once("://") {
        // What a parser cannot read may still carry a password (with a `/` or a `?` in it) and
        // a query: the user information up to the last `@`, its password, the pieces of that
        // password a message may quote apart, and everything after the host.
        let (userinfo, after) = match rest.rfind('@') {
            Some(at) => (&rest[..at], &rest[at + 1..]),
            None => ("", rest),
        };
        push(userinfo);
        if let Some((_, password)) = userinfo.split_once(':') {
            push(password);
            for sep in ['/', '?', '#'] {
                for piece in password.split(sep).filter(|p| p.len() >= 3) {
                    push(piece);
                }
            }
        }
        push(&after[after.find(['/', '?', '#']).unwrap_or(after.len())..]);
    }
    // Longest first, so that a value containing another is replaced whole.
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out
}

fn percent_decode(s: &str) -> String {
    url::form_urlencoded::parse(format!("x={s}").as_bytes()).next().map(|(_, v)| v.into_owned()).unwrap_or_default()
}

/// `text` (an error message) with the URL's raw form replaced by its redacted form and every
/// secret part of it replaced by `***`, except where that part is only a piece of what the
/// redacted URL shows anyway (the host, the port, the path): a query value `1` does not make
/// the host `127.0.0.1` into `***27.0.0.***`. A part shorter than four characters counts only
/// as a word of its own (not next to a letter, a digit or a dot).
pub(crate) fn redact_in(text: &str, url: &str) -> String {
    let shown = redact_url(url);
    let mut out = text.replace(url, &shown);
    let mut keep = vec![shown];
    if let Ok(u) = url::Url::parse(url) {
        if let Some(host) = u.host_str() {
            keep.push(host.to_owned());
            if let Some(port) = u.port() {
                keep.push(format!("{host}:{port}"));
            }
        }
        if u.path().len() > 1 {
            keep.push(u.path().to_owned());
        }
    }
    for secret in url_secrets(url) {
        out = replace_outside(&out, &secret, &keep);
    }
    out
}

/// `text` with each occurrence of `secret` replaced by `***`, but for one inside an occurrence
/// of a `keep` string, or a short one (under four characters) inside a word.
fn replace_outside(text: &str, secret: &str, keep: &[String]) -> String {
    let kept: Vec<(usize, usize)> = keep
        .iter()
        .filter(|k| !k.is_empty())
        .flat_map(|k| text.match_indices(k.as_str()).map(|(i, m)| (i, i + m.len())))
        .collect();
    let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '.');
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (i, m) in text.match_indices(secret) {
        let end = i + m.len();
        let inside_kept = kept.iter().any(|&(a, b)| a <= i && end <= b);
        let inside_word =
            secret.chars().count() < 4 && (word(text[..i].chars().next_back()) || word(text[end..].chars().next()));
        if inside_kept || inside_word {
            continue;
        }
        out.push_str(&text[at..i]);
        out.push_str("***");
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

/// The snapshot of the last revision read, keyed by revision: the same commit twice is not
/// read or rendered twice. It keeps the objects compact ([`drift_model::CompactResource`]: JSON
/// text, about a twentieth of a tree) and hands out a snapshot of its own to each caller.
#[derive(Debug)]
pub(crate) struct LastSnapshot(Mutex<Option<(String, Arc<KeptSnapshot>)>>, bool);

/// A snapshot as [`LastSnapshot`] keeps it.
#[derive(Debug)]
pub(crate) struct KeptSnapshot {
    repository: String,
    revision: Option<String>,
    resources: Vec<drift_model::CompactResource>,
    /// The tree of each object last handed out, while some caller still holds it: a caller at
    /// the same time (a pass while the watch starts, two passes) shares it instead of expanding
    /// a copy of its own. A `Weak` keeps only the `Arc`'s header (48 bytes), not the tree, and
    /// a tree behind a live `Weak` is never changed: `Arc::make_mut` copies a shared tree and
    /// detaches the `Weak` from an unshared one.
    trees: Mutex<Vec<Weak<serde_json::Value>>>,
    warnings: Vec<drift_model::SourceWarning>,
}

impl KeptSnapshot {
    fn of(s: &DesiredSnapshot) -> Self {
        KeptSnapshot {
            repository: s.repository.clone(),
            revision: s.revision.clone(),
            resources: s.resources.iter().map(drift_model::CompactResource::new).collect(),
            trees: Mutex::new(s.resources.iter().map(|r| Arc::downgrade(&r.object)).collect()),
            warnings: s.warnings.clone(),
        }
    }

    fn expand(&self) -> DesiredSnapshot {
        let mut trees = self.trees.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let resources = self
            .resources
            .iter()
            .zip(trees.iter_mut())
            .map(|(compact, tree)| match tree.upgrade() {
                Some(object) => drift_model::Resource {
                    key: compact.key.clone(),
                    api_version: compact.api_version.clone(),
                    object,
                    provenance: compact.provenance.clone(),
                },
                None => {
                    let r = compact.expand();
                    *tree = Arc::downgrade(&r.object);
                    r
                }
            })
            .collect();
        DesiredSnapshot {
            repository: self.repository.clone(),
            revision: self.revision.clone(),
            resources,
            warnings: self.warnings.clone(),
        }
    }
}

impl LastSnapshot {
    /// A slot that keeps the last snapshot when `keep`, else forgets it (the caller then holds
    /// the only copy and may take it without cloning).
    pub fn new(keep: bool) -> Self {
        LastSnapshot(Mutex::new(None), keep)
    }
    pub fn get(&self, revision: &str) -> Option<Arc<DesiredSnapshot>> {
        let kept = {
            let guard = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            guard.as_ref().filter(|(r, _)| r == revision).map(|(_, s)| Arc::clone(s))?
        };
        Some(Arc::new(kept.expand()))
    }
    pub fn revision(&self) -> Option<String> {
        let guard = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        guard.as_ref().map(|(r, _)| r.clone())
    }
    /// Keeps `snapshot` as the one of `revision` (when the slot keeps any) if
    /// `depends_on_revision_only`: a snapshot that read the cluster (Flux's value sources that
    /// are not in Git) is not kept, so the next fetch reads it again.
    pub fn set(
        &self,
        revision: String,
        snapshot: DesiredSnapshot,
        depends_on_revision_only: bool,
    ) -> Arc<DesiredSnapshot> {
        if self.1 && depends_on_revision_only {
            let kept = Arc::new(KeptSnapshot::of(&snapshot));
            *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some((revision, kept));
        }
        Arc::new(snapshot)
    }
}

/// A source that talks HTTP(S) through gix (reqwest with `rustls-no-provider`) needs the
/// process-level rustls crypto provider, which the program installs (only a binary chooses it;
/// two providers in one binary make kube-rs panic). Without one, reqwest would panic on the
/// first fetch: say so when the source is built instead.
pub(crate) fn require_crypto_provider(url: &str) -> drift_model::Result<()> {
    let http = url.starts_with("http://") || url.starts_with("https://");
    if http && rustls::crypto::CryptoProvider::get_default().is_none() {
        return Err(drift_model::Error::config(format!(
            "git source {}: no rustls crypto provider is installed; the program must install one \
             before it builds an HTTP(S) git source, for example \
             `rustls::crypto::ring::default_provider().install_default()`",
            redact_url(url)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot() -> DesiredSnapshot {
        let object = |name: &str| {
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "apps"}, "data": {"k": name}})
        };
        DesiredSnapshot {
            repository: "repo".into(),
            revision: Some("abc".into()),
            resources: ["a", "b"].into_iter().map(|n| drift_model::Resource::from_object(object(n)).unwrap()).collect(),
            warnings: Vec::new(),
        }
    }

    /// Callers of the same revision at the same time share the trees; a change one makes is its
    /// own; once nobody holds them, the next caller gets them again from the compact form.
    #[test]
    fn callers_at_the_same_time_share_the_trees_and_a_change_stays_their_own() {
        let last = LastSnapshot::new(true);
        let first = last.set("abc".into(), snapshot(), true);
        let second = last.get("abc").unwrap();
        assert_eq!(*second, *first);
        assert!(first.resources.iter().zip(&second.resources).all(|(x, y)| Arc::ptr_eq(&x.object, &y.object)));

        // A caller changes its copy (as applying a namespace does): the others do not see it.
        let mut mine = (*second).clone();
        Arc::make_mut(&mut mine.resources[0].object)["data"]["k"] = "changed".into();
        let third = last.get("abc").unwrap();
        assert_eq!(third.resources[0].object["data"]["k"], "a");
        assert_eq!(*third, *first);

        // Nobody holds the trees any more: expanded again, equal.
        let want = (*first).clone();
        drop((first, second, third, mine));
        let again = last.get("abc").unwrap();
        assert_eq!(*again, want);
        // ... and shared with the next caller while held.
        let more = last.get("abc").unwrap();
        assert!(again.resources.iter().zip(&more.resources).all(|(x, y)| Arc::ptr_eq(&x.object, &y.object)));
    }

    #[test]
    fn credentials_are_removed_from_urls() {
        assert_eq!(redact_url("https://x-access-token:ghp_abc@github.com/o/r.git"), "https://github.com/o/r.git");
        assert_eq!(
            redact_url("https://h.example/o/r.git?token=CANARY&x=1#frag"),
            "https://h.example/o/r.git?token=***&x=***#***"
        );
        // A password with an unencoded `/` or `?` is not a valid URL: nothing of it is shown.
        let bad = "https://u:pa/ss?w@h.example/o/r.git";
        let shown = redact_url(bad);
        assert!(!shown.contains("pa") && !shown.contains("ss?w"), "{shown}");
        let message = format!(
            "fetch of {0} failed: url: \"{0}/info/refs\", token CANARY",
            "https://h.example/r.git?token=CANARY"
        );
        let clean = redact_in(&message, "https://h.example/r.git?token=CANARY");
        assert!(!clean.contains("CANARY"), "{clean}");
        assert!(clean.contains("https://h.example/r.git?token=***"), "{clean}");
        let clean = redact_in("error at ss?w@h.example", bad);
        assert!(!clean.contains("ss?w"), "{clean}");
        assert_eq!(redact_url("https://github.com/o/r.git"), "https://github.com/o/r.git");
        assert_eq!(redact_url("git@github.com:o/r.git"), "git@github.com:o/r.git");
    }

    /// Regression (issue 37): a query value that is also a piece of the host (`?a=1` and
    /// `127.0.0.1`) made the host `***27.0.0.***` in every error; the secret itself is still gone
    /// wherever it stands on its own.
    #[test]
    fn redaction_in_messages_keeps_the_host_port_and_path() {
        let url = "https://127.0.0.1:1/o/r1.git?a=1";
        let message = format!("fetch of {url} failed: connecting to 127.0.0.1:1: refused; GET /o/r1.git?a=1 gave 1");
        let clean = redact_in(&message, url);
        assert_eq!(
            clean,
            "fetch of https://127.0.0.1:1/o/r1.git?a=*** failed: connecting to 127.0.0.1:1: refused; GET /o/r1.git?a=*** gave ***"
        );
        let url = "https://u:CANARY@git.example:8443/o/r.git?token=T0KEN&x=8443";
        let message = "https://git.example:8443/o/r.git?token=T0KEN&x=8443: auth CANARY refused at git.example:8443 (token T0KEN)";
        let clean = redact_in(message, url);
        assert!(!clean.contains("CANARY") && !clean.contains("T0KEN"), "{clean}");
        assert!(clean.contains("git.example:8443") && clean.contains("/o/r.git"), "{clean}");
        // A secret that holds the host is still hidden whole.
        let url = "https://h.example/r.git?token=xh.examplex";
        assert_eq!(redact_in("token xh.examplex at h.example", url), "token *** at h.example");
    }
}
