//! [`K8sSource`]: the live state of a cluster read with kube-rs: discovery of the kinds in scope,
//! paginated lists of exactly the (kind, namespace) pairs asked, bounded concurrency, retries,
//! and coverage for every pair.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use drift_model::source::{LiveCapabilities, LiveEventStream, LiveSource};
use drift_model::{Coverage, CoverageStatus, GroupKind, LiveSnapshot, Provenance, Resource, ResourceKey, Scope};
use futures::StreamExt as _;
use kube::api::{ApiResource, DynamicObject, ListParams};
use serde::Deserialize;
use serde_json::Value;

use crate::config::K8sConfig;
use crate::error::{K8sError, error_chain};

/// What discovery says about a kind: where it is served and whether it is namespaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindInfo {
    /// API group (empty for core).
    pub group: String,
    /// The version the server prefers for the group.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural resource name (`deployments`).
    pub plural: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
}

impl KindInfo {
    pub(crate) fn api_resource(&self) -> ApiResource {
        ApiResource {
            group: self.group.clone(),
            version: self.version.clone(),
            api_version: self.api_version(),
            kind: self.kind.clone(),
            plural: self.plural.clone(),
        }
    }

    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }

    /// The collection URL for a namespace (`None`: every namespace, or a cluster-scoped kind).
    pub(crate) fn url(&self, namespace: Option<&str>) -> String {
        <DynamicObject as kube::Resource>::url_path(&self.api_resource(), namespace.filter(|_| self.namespaced))
    }
}

/// The discovery outcome of each kind: its [`KindInfo`] or the coverage status every pair of
/// the kind gets (not served, forbidden, failed).
pub type Discovered = BTreeMap<GroupKind, Result<KindInfo, CoverageStatus>>;

/// A live source on a Kubernetes API server.
///
/// It reads only the (kind, namespace) pairs of the scope it is given, keeps objects exactly as
/// the API server returns them (managedFields included), and reports the coverage of every pair.
pub struct K8sSource {
    pub(crate) client: kube::Client,
    pub(crate) cluster: String,
    /// The API server's URL, when connected through a configuration (not [`K8sSource::from_client`]).
    pub(crate) server: Option<String>,
    pub(crate) config: K8sConfig,
    /// Kinds discovered so far, for [`K8sSource::predict`].
    pub(crate) kinds: Mutex<BTreeMap<GroupKind, KindInfo>>,
    /// Counts the live objects read, for a progress line.
    pub(crate) progress: drift_model::progress::Progress,
    /// The bearer token of credentials held in memory, replaceable ([`K8sSource::rotate`]).
    pub(crate) token: Option<crate::client::BearerToken>,
    /// What those credentials are besides their token (a fingerprint): a Secret read again
    /// that differs in more than the token needs a restart.
    pub(crate) shape: Option<u64>,
}

/// What [`K8sSource::rotate`] did with credentials read again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rotation {
    /// The same credentials.
    Unchanged,
    /// Only the bearer token changed: the next requests carry the new one.
    TokenReplaced,
    /// More than the token changed (the server, its CA, a client certificate, the kind of
    /// credentials): the source keeps the credentials it has; a restart takes the new ones.
    NeedsRestart,
}

/// The context's user's static bearer token of a kubeconfig.
fn selected_token(kubeconfig: &kube::config::Kubeconfig, context: Option<&str>) -> Option<String> {
    use secrecy::ExposeSecret as _;
    let context = context.or(kubeconfig.current_context.as_deref())?;
    let user = kubeconfig.contexts.iter().find(|c| c.name == context)?.context.as_ref()?.user.as_deref()?;
    let auth = kubeconfig.auth_infos.iter().find(|a| a.name == user)?.auth_info.as_ref()?;
    auth.token.as_ref().map(|t| t.expose_secret().to_owned())
}

/// A fingerprint of a kubeconfig and context without its bearer tokens (compared within this
/// process only; never shown); `None` if it cannot be written out (then nothing is rotated).
fn shape_of(kubeconfig: &kube::config::Kubeconfig, context: Option<&str>) -> Option<u64> {
    use std::hash::{Hash as _, Hasher as _};
    let mut bare = kubeconfig.clone();
    for a in &mut bare.auth_infos {
        if let Some(auth) = &mut a.auth_info {
            auth.token = None;
        }
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(&bare).ok()?.hash(&mut h);
    context.hash(&mut h);
    Some(h.finish())
}

impl std::fmt::Debug for K8sSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("K8sSource")
            .field("cluster", &self.cluster)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Default, Deserialize)]
struct RawListMeta {
    #[serde(default, rename = "continue")]
    continue_token: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct RawList {
    #[serde(default)]
    metadata: RawListMeta,
    #[serde(default)]
    items: Vec<Value>,
}

impl K8sSource {
    /// Connects with a configuration: the in-cluster service account, or a kubeconfig (the
    /// configured file or the default one) and context. No request is made yet. The program
    /// has installed its rustls crypto provider before (see the crate documentation).
    pub async fn connect(config: K8sConfig) -> drift_model::Result<Self> {
        config.validate()?;
        if config.snapshot.is_some() {
            return Err(K8sError::Config(
                "the configuration names snapshot files, not a cluster (see live_source_from_config)".to_owned(),
            )
            .into());
        }
        let (kube_config, default_name) = if config.in_cluster {
            let c = kube::Config::incluster()
                .map_err(|e| K8sError::Config(format!("in-cluster service account: {}", error_chain(&e))))?;
            (c, "in-cluster".to_owned())
        } else {
            let kubeconfig = match &config.kubeconfig {
                Some(path) => kube::config::Kubeconfig::read_from(path)
                    .map_err(|e| K8sError::Config(format!("{}: {}", path.display(), error_chain(&e))))?,
                None => kube::config::Kubeconfig::read()
                    .map_err(|e| K8sError::Config(format!("default kubeconfig: {}", error_chain(&e))))?,
            };
            let name = config
                .context
                .clone()
                .or_else(|| kubeconfig.current_context.clone())
                .unwrap_or_else(|| "default".to_owned());
            let options = kube::config::KubeConfigOptions { context: config.context.clone(), ..Default::default() };
            let c = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|e| K8sError::Config(format!("context {name}: {}", error_chain(&e))))?;
            (c, name)
        };
        Self::with_kube_config(kube_config, default_name, config, None)
    }

    /// Connects with the credentials of a kubeconfig held in memory (read from a Secret,
    /// [`crate::credentials`]) and its `context` (default: its current context); the reading
    /// settings come from `config`, whose `kubeconfig`, `context` and `in_cluster` are not used.
    /// No request is made yet.
    pub async fn connect_kubeconfig(
        kubeconfig: kube::config::Kubeconfig,
        context: Option<String>,
        config: K8sConfig,
    ) -> drift_model::Result<Self> {
        config.validate()?;
        let name =
            context.clone().or_else(|| kubeconfig.current_context.clone()).unwrap_or_else(|| "default".to_owned());
        let shape = shape_of(&kubeconfig, context.as_deref());
        let token = selected_token(&kubeconfig, context.as_deref());
        let options = kube::config::KubeConfigOptions { context, ..Default::default() };
        let mut c = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(|e| K8sError::Config(format!("context {name}: {}", error_chain(&e))))?;
        // A static bearer token is sent from a cell that a rotated Secret's next token replaces
        // (not through a proxy: kube's own stack is used then, with the token as it is).
        let cell = match (token, c.proxy_url.is_none() && c.auth_info.token.is_some()) {
            (Some(t), true) => crate::client::BearerToken::new(&t),
            _ => None,
        };
        if cell.is_some() {
            c.auth_info.token = None;
        }
        let mut source = Self::with_kube_config(c, name, config, cell.clone())?;
        source.token = cell;
        source.shape = shape;
        Ok(source)
    }

    /// Takes the credentials of `kubeconfig` and `context` read again (a credentials Secret, as
    /// [`K8sSource::connect_kubeconfig`] took them): when only the bearer token changed, the
    /// next requests carry the new one (a watch already open goes on with the connection it has);
    /// anything else changed is [`Rotation::NeedsRestart`] and the source keeps what it has.
    /// A source connected otherwise (a kubeconfig file, in-cluster: kube reads their token
    /// files again by itself) always says `NeedsRestart`.
    pub fn rotate(&self, kubeconfig: &kube::config::Kubeconfig, context: Option<&str>) -> Rotation {
        if self.shape.is_none() || self.shape != shape_of(kubeconfig, context) {
            return Rotation::NeedsRestart;
        }
        match (&self.token, selected_token(kubeconfig, context)) {
            (None, None) => Rotation::Unchanged,
            (Some(cell), Some(token)) => match crate::client::BearerToken::new(&token) {
                Some(new) if new.same(cell) => Rotation::Unchanged,
                Some(_) if cell.replace(&token) => Rotation::TokenReplaced,
                _ => Rotation::NeedsRestart,
            },
            _ => Rotation::NeedsRestart,
        }
    }

    fn with_kube_config(
        kube_config: kube::Config,
        default_name: String,
        config: K8sConfig,
        token: Option<crate::client::BearerToken>,
    ) -> drift_model::Result<Self> {
        // One retry policy, ours (bounded, honouring Retry-After, per attempt timeout): kube's
        // own retry layer would retry 429/503 again under each of our attempts, so an API server
        // outage took minutes to report instead of seconds.
        let mut kube_config = kube_config;
        kube_config.default_retry = false;
        let server = kube_config.cluster_url.to_string();
        let client = crate::client::build(kube_config, token)
            .map_err(|e| K8sError::Config(format!("cannot build a client: {}", error_chain(&e))))?;
        let cluster = config.cluster.clone().unwrap_or(default_name);
        Ok(K8sSource { server: Some(server), ..K8sSource::from_client(client, cluster, config) })
    }

    /// A source on an existing client.
    pub fn from_client(client: kube::Client, cluster: impl Into<String>, config: K8sConfig) -> Self {
        K8sSource {
            client,
            cluster: cluster.into(),
            server: None,
            config,
            kinds: Mutex::new(BTreeMap::new()),
            progress: drift_model::progress::Progress::default(),
            token: None,
            shape: None,
        }
    }

    /// The kube client.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// The API server's URL (`None` for a source made with [`K8sSource::from_client`]).
    pub fn server_url(&self) -> Option<&str> {
        self.server.as_deref()
    }

    /// The same source, counting the live objects it reads into `progress`.
    pub fn with_progress(mut self, progress: drift_model::progress::Progress) -> Self {
        self.progress = progress;
        self
    }

    /// The configuration.
    pub fn config(&self) -> &K8sConfig {
        &self.config
    }

    /// Runs `op` with a timeout per attempt, retrying what may succeed later (429, 5xx, transport
    /// failures) with a doubling pause, or the server's `Retry-After`.
    pub(crate) async fn with_retries<T, F, Fut>(&self, mut op: F) -> Result<T, K8sError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, K8sError>>,
    {
        let mut attempt = 0u32;
        loop {
            let result = match tokio::time::timeout(self.config.request_timeout, op()).await {
                Ok(r) => r,
                Err(_) => Err(K8sError::Transport {
                    verb: "request",
                    what: String::new(),
                    message: format!("timed out after {:?}", self.config.request_timeout),
                }),
            };
            match result {
                Ok(v) => return Ok(v),
                Err(e) if e.is_retryable() && attempt < self.config.retries => {
                    let pause = match e.retry_after() {
                        Some(s) => Duration::from_secs(u64::from(s)).min(self.config.max_retry_after),
                        None => {
                            self.config.retry_backoff.saturating_mul(1 << attempt.min(16)).min(Duration::from_secs(30))
                        }
                    };
                    tracing::debug!(cluster = %self.cluster, error = %e, attempt, ?pause, "retrying");
                    attempt += 1;
                    tokio::time::sleep(pause).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Discovers the kinds of a scope: one discovery per API group, in parallel.
    pub async fn discover<'a>(&self, kinds: impl IntoIterator<Item = &'a GroupKind>) -> Discovered {
        let mut by_group: BTreeMap<String, Vec<GroupKind>> = BTreeMap::new();
        for gk in kinds {
            by_group.entry(gk.group.clone()).or_default().push(gk.clone());
        }
        let results: Vec<Discovered> = futures::stream::iter(by_group)
            .map(|(group, gks): (String, Vec<GroupKind>)| async move {
                let group = group.as_str();
                let found = self
                    .with_retries(|| async {
                        kube::discovery::group(&self.client, group).await.map_err(|e| match e {
                            kube::Error::Discovery(d) => K8sError::Api {
                                verb: "discovery",
                                what: format!("API group {group:?}"),
                                code: 404,
                                reason: "NotFound".into(),
                                message: d.to_string(),
                                retry_after: None,
                            },
                            other => K8sError::from_kube("discovery", format!("API group {group:?}"), other),
                        })
                    })
                    .await;
                let mut out = Discovered::new();
                for gk in gks {
                    let entry = match &found {
                        Ok(api_group) => match api_group.recommended_kind(&gk.kind) {
                            Some((ar, caps)) => Ok(KindInfo {
                                group: ar.group,
                                version: ar.version,
                                kind: ar.kind,
                                plural: ar.plural,
                                namespaced: caps.scope == kube::discovery::Scope::Namespaced,
                            }),
                            None => Err(CoverageStatus::NotServed {
                                message: format!("the cluster serves no kind {gk} (is its CRD installed?)"),
                            }),
                        },
                        Err(e) => Err(e.coverage()),
                    };
                    out.insert(gk, entry);
                }
                out
            })
            .buffer_unordered(self.config.concurrency)
            .collect()
            .await;
        let discovered: Discovered = results.into_iter().flatten().collect();
        let mut cache = crate::lock(&self.kinds);
        for (gk, info) in &discovered {
            if let Ok(info) = info {
                cache.insert(gk.clone(), info.clone());
            }
        }
        discovered
    }

    /// Lists one (kind, namespace) page by page, restarting once if a continue token expires.
    /// Lists one (kind, namespace) whole, page by page, keeping the items `keep` accepts.
    async fn list_pair(
        &self,
        info: &KindInfo,
        namespace: Option<&str>,
        keep: &(dyn Fn(&Value) -> bool + Sync),
    ) -> Result<Vec<Value>, K8sError> {
        let url = info.url(namespace);
        let what = match namespace {
            Some(ns) => format!("{} in {ns}", GroupKind::new(&info.group, &info.kind)),
            None => GroupKind::new(&info.group, &info.kind).to_string(),
        };
        let mut restarts = 0;
        'list: loop {
            let mut items = Vec::new();
            let mut token: Option<String> = None;
            loop {
                let mut lp = ListParams::default().limit(self.config.page_size);
                if let Some(t) = &token {
                    lp = lp.continue_token(t);
                }
                let page: Result<RawList, K8sError> = self
                    .with_retries(|| async {
                        let req = kube::core::Request::new(&url).list(&lp).map_err(|e| K8sError::Transport {
                            verb: "list",
                            what: what.clone(),
                            message: e.to_string(),
                        })?;
                        self.client.request::<RawList>(req).await.map_err(|e| K8sError::from_kube("list", &what, e))
                    })
                    .await;
                let page = match page {
                    Err(e) if e.code() == Some(410) && token.is_some() && restarts < 2 => {
                        // The continue token expired (compaction): start the list again.
                        restarts += 1;
                        continue 'list;
                    }
                    other => other?,
                };
                items.extend(page.items.into_iter().filter(|item| keep(item)));
                match page.metadata.continue_token.filter(|t| !t.is_empty()) {
                    Some(t) => token = Some(t),
                    None => return Ok(items),
                }
            }
        }
    }

    /// Turns a listed item into a resource: list items may omit apiVersion and kind (the real
    /// API server does), which identify the object and are filled in; nothing else is touched.
    pub(crate) fn to_resource(&self, info: &KindInfo, mut item: Value) -> Result<Resource, K8sError> {
        if let Some(o) = item.as_object_mut() {
            if o.get("apiVersion").and_then(Value::as_str).is_none_or(str::is_empty) {
                o.insert("apiVersion".into(), Value::String(info.api_version()));
            }
            if o.get("kind").and_then(Value::as_str).is_none_or(str::is_empty) {
                o.insert("kind".into(), Value::String(info.kind.clone()));
            }
        }
        let r = Resource::from_object(item).map_err(|e| K8sError::Decode {
            verb: "list",
            what: GroupKind::new(&info.group, &info.kind).to_string(),
            message: e.to_string(),
        })?;
        Ok(r.with_provenance(Provenance { cluster: Some(self.cluster.clone()), ..Provenance::default() }))
    }

    async fn read_pair(
        &self,
        gk: &GroupKind,
        namespace: Option<&str>,
        info: &Result<KindInfo, CoverageStatus>,
        scope: &Scope,
    ) -> (Vec<Resource>, CoverageStatus) {
        let info = match info {
            Ok(i) => i,
            Err(status) => return (Vec::new(), status.clone()),
        };
        if !info.namespaced && namespace.is_some() {
            return (
                Vec::new(),
                CoverageStatus::NotServed {
                    message: format!(
                        "{gk} is cluster-scoped: it has no namespace {} (declare it cluster-scoped)",
                        namespace.unwrap_or_default()
                    ),
                },
            );
        }
        // Objects the caller will not compare are dropped page by page (see `Scope::only`).
        let keep = |item: &Value| {
            let meta = &item["metadata"];
            let name = meta["name"].as_str().unwrap_or_default();
            let ns = meta["namespace"].as_str().or(namespace);
            // An object without a name cannot be identified: keep it, so that it fails the pair.
            name.is_empty() || scope.wants(&ResourceKey::new(&gk.group, &gk.kind, ns, name))
        };
        match self.list_pair(info, namespace, &keep).await {
            Ok(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    match self.to_resource(info, item) {
                        Ok(r) => out.push(r),
                        // An object we cannot identify makes the pair incomplete: it may be the
                        // one Git names.
                        Err(e) => return (Vec::new(), CoverageStatus::Failed { message: e.to_string() }),
                    }
                }
                (out, CoverageStatus::Complete)
            }
            Err(e) => {
                tracing::warn!(cluster = %self.cluster, kind = %gk, namespace = ?namespace, error = %e, "live read failed");
                (Vec::new(), e.coverage())
            }
        }
    }
}

impl K8sSource {
    /// Reads every (kind, namespace) of a scope, `concurrency` at a time, and hands each one to
    /// `each` as soon as it is read whole (or failed), with its coverage.
    async fn read_pairs(
        &self,
        scope: &Scope,
        mut each: impl FnMut(&GroupKind, Option<&str>, Vec<Resource>, CoverageStatus) + Send,
    ) {
        let discovered = self.discover(scope.entries.keys()).await;
        let pairs: Vec<(GroupKind, Option<String>)> =
            scope.pairs().map(|(gk, ns)| (gk.clone(), ns.map(str::to_owned))).collect();
        let mut reads = std::pin::pin!(
            futures::stream::iter(pairs)
                .map(|(gk, ns): (GroupKind, Option<String>)| {
                    let info = discovered
                        .get(&gk)
                        .cloned()
                        .unwrap_or_else(|| Err(CoverageStatus::Failed { message: format!("{gk} was not discovered") }));
                    async move {
                        let (resources, status) = self.read_pair(&gk, ns.as_deref(), &info, scope).await;
                        self.progress.live_read(resources.len() as u64);
                        (gk, ns, resources, status)
                    }
                })
                .buffer_unordered(self.config.concurrency)
        );
        while let Some((gk, ns, resources, status)) = reads.next().await {
            each(&gk, ns.as_deref(), resources, status);
        }
    }
}

#[async_trait]
impl LiveSource for K8sSource {
    fn cluster(&self) -> &str {
        &self.cluster
    }

    fn capabilities(&self) -> LiveCapabilities {
        LiveCapabilities { watch: true, discovery: true }
    }

    async fn cluster_scoped(&self, kinds: &[GroupKind]) -> Vec<GroupKind> {
        self.discover(kinds.iter())
            .await
            .into_iter()
            .filter_map(|(gk, info)| info.ok().filter(|i| !i.namespaced).map(|_| gk))
            .collect()
    }

    async fn fetch(&self, scope: &Scope) -> drift_model::Result<LiveSnapshot> {
        let mut coverage = Coverage::default();
        let mut resources = Vec::new();
        self.read_pairs(scope, |gk, ns, rs, status| {
            coverage.set(gk, ns, status);
            resources.extend(rs);
        })
        .await;
        resources.sort_by(|a, b| a.key.cmp(&b.key));
        resources.dedup_by(|a, b| a.key == b.key);
        Ok(LiveSnapshot { cluster: self.cluster.clone(), resources, coverage })
    }

    /// Each (kind, namespace) is handed over as soon as it is read whole: at most
    /// `concurrency` pairs are held at once, not the whole live state.
    async fn fetch_parts(&self, scope: &Scope, part: &mut (dyn FnMut(LiveSnapshot) + Send)) -> drift_model::Result<()> {
        self.read_pairs(scope, |gk, ns, resources, status| {
            let mut coverage = Coverage::default();
            coverage.set(gk, ns, status);
            part(LiveSnapshot { cluster: self.cluster.clone(), resources, coverage });
        })
        .await;
        Ok(())
    }

    async fn watch(&self, scope: &Scope) -> drift_model::Result<LiveEventStream> {
        Ok(Box::pin(self.start_watch(scope).await))
    }
}
