//! The one place that builds adapters: the store, the desired sources, the live
//! source and the engine from the configuration, and hands them to `drift-runtime`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use drift_core::act::Outlet;
use drift_core::hash_key::HashKeyStore;
use drift_core::normalize::SecretHasher;
use drift_core::progress::Progress;
use drift_core::remedy::{ChangeProposer, ClusterWriter};
use drift_core::{DesiredSource, LiveSource};
use drift_kube::K8sConfig;
use drift_runtime::{DetectorBuilder, ScanSettings, Store};
use drift_sops::SopsKeys;

use crate::config::{ClusterEntry, Config, StoreConfig};

/// Opens the store (migrations run on open unless its settings say otherwise).
pub async fn open_store(config: &StoreConfig) -> Result<Store> {
    Ok(open_store_keys(config).await?.0)
}

/// Opens the store and the keeper of its Secret hash key (the same store).
pub async fn open_store_keys(config: &StoreConfig) -> Result<(Store, Arc<dyn HashKeyStore>)> {
    let shown = config.display();
    Ok(match config {
        StoreConfig::Postgres(c) => {
            let store = Arc::new(
                drift_postgres::PostgresStore::from_config(c).await.with_context(|| format!("opening {shown}"))?,
            );
            (Store::acting(store.clone()).with_identities(store.clone()), store)
        }
        StoreConfig::Sqlite(c) => {
            let store =
                Arc::new(drift_sqlite::SqliteStore::from_config(c).await.with_context(|| format!("opening {shown}"))?);
            (Store::acting(store.clone()).with_identities(store.clone()), store)
        }
    })
}

/// Opens the store of `config` and the Secret hasher of its key ([`crate::hash_key::resolve`]):
/// what every command that compares and records drifts starts with.
pub async fn open_scanning_store(config: &Config) -> Result<(Store, SecretHasher)> {
    let (store, keys) = open_store_keys(&config.store_config()?).await?;
    let (hasher, _) = crate::hash_key::resolve(&config.secret_hash, keys.as_ref()).await?;
    Ok((store, hasher))
}

/// The desired sources, one per repository. A long-running caller (`drift serve`) keeps the
/// parsed state between fetches; a one-shot caller (`drift scan`) does not, which saves two
/// copies of every desired object.
/// Each opens the SOPS-encrypted files it reads with `sops` when it holds keys, and reads the
/// ConfigMaps and Secrets that Flux objects name and that are not in Git from `cluster` (as
/// the controllers do) when it is a Kubernetes API server.
pub fn desired_sources(
    config: &Config,
    long_running: bool,
    progress: &Progress,
    sops: &SopsKeys,
    cluster: &Cluster,
) -> Result<Vec<Arc<dyn DesiredSource>>> {
    config
        .repositories
        .iter()
        .map(|r| {
            drift_git::source_with(
                r.source_config_for(long_running),
                progress.clone(),
                sops_opener(sops),
                cluster.lookup(),
            )
            .with_context(|| format!("repository `{}`", r.name))
        })
        .collect()
}

/// The age identities that open SOPS-encrypted files, found where sops finds them
/// (`SOPS_AGE_KEY`, `SOPS_AGE_KEY_FILE`, `SOPS_AGE_KEY_CMD`, the user's `sops/age/keys.txt`);
/// empty when there is none. An error names the variable and the line,
/// never a key.
pub fn sops_keys() -> Result<SopsKeys> {
    let keys = SopsKeys::from_env()?;
    if !keys.is_empty() {
        tracing::info!(recipients = ?keys.recipients(), "SOPS-encrypted files are opened in memory with the age identities of the environment");
    }
    Ok(keys)
}

/// The opener of SOPS-encrypted files, when there are keys.
pub fn sops_opener(keys: &SopsKeys) -> Option<Arc<dyn drift_core::sops::SopsOpener>> {
    (!keys.is_empty()).then(|| Arc::new(keys.clone()) as Arc<dyn drift_core::sops::SopsOpener>)
}

/// The recipients a scan names in the note of an object left encrypted (`None`: no key given).
pub fn sops_recipients(keys: &SopsKeys) -> Option<Arc<[String]>> {
    (!keys.is_empty()).then(|| keys.recipients())
}

fn expand_home(path: &Path) -> PathBuf {
    match (path.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) => Path::new(&home).join(rest),
        _ => path.to_owned(),
    }
}

/// The Kubernetes settings as the sources use them: `~` expanded, and the pod's service account
/// when nothing names a cluster and the process runs in a pod.
pub fn kubernetes(mut config: K8sConfig) -> K8sConfig {
    config.kubeconfig = config.kubeconfig.as_deref().map(expand_home);
    config.in_cluster = config.in_cluster
        || (config.kubeconfig.is_none()
            && config.context.is_none()
            && config.snapshot.is_none()
            && std::env::var_os("KUBERNETES_SERVICE_HOST").is_some());
    config
}

/// A connection to the cluster the settings name (`drift diff --cluster`).
pub async fn cluster(config: K8sConfig) -> Result<drift_kube::K8sSource> {
    Ok(drift_kube::K8sSource::connect(kubernetes(config)).await?)
}

/// The configured cluster, reached once per command: one kube client that the live source, the
/// writer of reverts and the leader Lease share; or the snapshot files of `live.snapshot`, which
/// are read and never written.
#[derive(Debug, Clone)]
pub enum Cluster {
    /// A Kubernetes API server, through one client; with the `name` of the Argo CD cluster
    /// Secret its credentials came from, if any (what Argo CD Applications call it).
    Kube(Arc<drift_kube::K8sSource>, Option<String>),
    /// Snapshot files.
    Snapshot(Arc<dyn LiveSource>),
}

impl Cluster {
    /// The cluster of `live:` (no request is made yet), counting the objects it reads into
    /// `progress`.
    /// With `clusters:`, the first of them.
    pub async fn open(config: &Config, progress: &Progress) -> Result<Cluster> {
        if let Some(first) = config.clusters.first() {
            return Cluster::open_entry(config, first, &mut Home::default(), progress).await;
        }
        let live = K8sConfig { cluster: Some(config.cluster.clone()), ..kubernetes(config.live.clone()) };
        if live.snapshot.is_some() {
            return Ok(Cluster::Snapshot(drift_kube::live_source_from_config(live).await?));
        }
        let source = drift_kube::K8sSource::connect(live).await?.with_progress(progress.clone());
        Ok(Cluster::Kube(Arc::new(source), None))
    }

    /// One cluster of `clusters:`, through its kubeconfig and context, the pod's service
    /// account, or its credentials Secret (read from a file, or from the home cluster through
    /// `home`, connected the first time it is needed). The reading settings are `live:`'s.
    async fn open_entry(
        config: &Config,
        entry: &ClusterEntry,
        home: &mut Home,
        progress: &Progress,
    ) -> Result<Cluster> {
        let reading = K8sConfig {
            cluster: Some(entry.name.clone()),
            kubeconfig: None,
            context: None,
            in_cluster: false,
            snapshot: None,
            ..config.live.clone()
        };
        let mut argo_name = None;
        let source = match &entry.secret {
            None => {
                let live = K8sConfig {
                    kubeconfig: entry.kubeconfig.as_deref().map(expand_home),
                    context: entry.context.clone(),
                    in_cluster: entry.in_cluster,
                    ..reading
                };
                drift_kube::K8sSource::connect(live).await.with_context(|| format!("cluster `{}`", entry.name))?
            }
            Some(secret) => {
                let (credentials, what) = read_credentials(&config.live, &entry.name, secret, home).await?;
                tracing::info!(cluster = %entry.name, secret = %what, format = ?credentials.format, "cluster credentials read from a Secret");
                argo_name = credentials.name.clone();
                drift_kube::K8sSource::connect_kubeconfig(credentials.kubeconfig, entry.context.clone(), reading)
                    .await
                    .with_context(|| format!("cluster `{}` ({what})", entry.name))?
            }
        };
        Ok(Cluster::Kube(Arc::new(source.with_progress(progress.clone())), argo_name))
    }

    /// The live source.
    pub fn live(&self) -> Arc<dyn LiveSource> {
        match self {
            Cluster::Kube(k, _) => k.clone(),
            Cluster::Snapshot(s) => s.clone(),
        }
    }

    /// The cluster as the desired sources read single objects from it (Flux's value sources
    /// that are not in Git); none for snapshot files. Must be called within the runtime.
    pub fn lookup(&self) -> Option<Arc<dyn drift_core::drift_model::lookup::ObjectLookup>> {
        match self {
            Cluster::Kube(k, _) => {
                Some(Arc::new(drift_kube::ClusterLookup::new(k.clone(), tokio::runtime::Handle::current())))
            }
            Cluster::Snapshot(_) => None,
        }
    }

    /// The writer of reverts: the same client; none for snapshot files.
    pub fn writer(&self) -> Option<Arc<dyn ClusterWriter>> {
        match self {
            Cluster::Kube(k, _) => Some(k.clone()),
            Cluster::Snapshot(_) => None,
        }
    }
}

/// The namespace of the pod (`$POD_NAMESPACE`), else `default`: where credentials Secrets and
/// Leases of the home cluster are by default.
pub fn pod_namespace() -> String {
    std::env::var("POD_NAMESPACE").ok().filter(|n| !n.is_empty()).unwrap_or_else(|| "default".to_owned())
}

/// The home cluster (the one `live:` reaches: where the detector runs), connected once when a
/// credentials Secret is read from it or a Lease kept in it.
#[derive(Debug, Default)]
pub struct Home(Option<Arc<drift_kube::K8sSource>>);

impl Home {
    /// The home cluster (connected the first time).
    pub async fn source(&mut self, config: &Config) -> Result<Arc<drift_kube::K8sSource>> {
        self.source_of(&config.live).await
    }

    /// The home cluster of the settings `live` (connected the first time).
    async fn source_of(&mut self, live: &K8sConfig) -> Result<Arc<drift_kube::K8sSource>> {
        if let Some(c) = &self.0 {
            return Ok(c.clone());
        }
        let source = Arc::new(
            drift_kube::K8sSource::connect(kubernetes(live.clone()))
                .await
                .context("the home cluster (`live:`), where credentials Secrets and Leases are")?,
        );
        self.0 = Some(source.clone());
        Ok(source)
    }
}

/// The credentials of cluster `cluster` in its credentials Secret (a file, or a Secret of the
/// home cluster of `live`), with how the Secret is named in messages (never a value).
async fn read_credentials(
    live: &K8sConfig,
    cluster: &str,
    secret: &drift_kube::credentials::SecretRef,
    home: &mut Home,
) -> Result<(drift_kube::credentials::Credentials, String)> {
    let namespace = secret.namespace.clone().unwrap_or_else(pod_namespace);
    let what = secret.describe(&namespace);
    let value = match (&secret.file, &secret.name) {
        (Some(file), _) => drift_kube::credentials::secret_from_file(&expand_home(file))?,
        (None, Some(name)) => {
            let home = home.source_of(live).await?;
            drift_kube::credentials::secret_from_cluster(home.client(), &namespace, name).await?
        }
        (None, None) => anyhow::bail!("cluster `{cluster}`: `secret` names no file and no Secret"),
    };
    let credentials = drift_kube::credentials::credentials_from_secret(&value, &what)
        .with_context(|| format!("cluster `{cluster}`"))?;
    Ok((credentials, what))
}

/// For a long-running detector, each cluster reached through a credentials Secret has it read
/// again every `secret.refresh`: a rotated bearer token (`argocd cluster rotate-auth`, a new
/// service account token) is taken by the running client ([`drift_kube::K8sSource::rotate`]);
/// a Secret that changed in more than its token is logged once as needing a restart; one that
/// cannot be read keeps the credentials in hand (logged when the reason changes). The tasks end
/// with the process.
pub fn keep_credentials(config: &Config, opened: &[(String, Cluster)]) {
    for (name, cluster) in opened {
        let (Some(entry), Cluster::Kube(source, _)) = (config.clusters.iter().find(|e| &e.name == name), cluster)
        else {
            continue;
        };
        let Some(secret) = entry.secret.clone().filter(|s| !s.refresh.is_zero()) else { continue };
        let (live, name, context, source) = (config.live.clone(), name.clone(), entry.context.clone(), source.clone());
        tokio::spawn(async move {
            let mut home = Home::default();
            let (mut restart_said, mut failure) = (false, None::<String>);
            loop {
                tokio::time::sleep(secret.refresh).await;
                match read_credentials(&live, &name, &secret, &mut home).await {
                    Ok((credentials, what)) => {
                        failure = None;
                        match source.rotate(&credentials.kubeconfig, context.as_deref()) {
                            drift_kube::Rotation::Unchanged => {}
                            drift_kube::Rotation::TokenReplaced => tracing::info!(
                                cluster = %name, secret = %what,
                                "the cluster's token was rotated in its credentials Secret: the new one is used"
                            ),
                            drift_kube::Rotation::NeedsRestart if !restart_said => {
                                restart_said = true;
                                tracing::warn!(
                                    cluster = %name, secret = %what,
                                    "the cluster's credentials Secret changed in more than its bearer token (server, CA, certificate or kind of credentials): the credentials in hand are kept until drift restarts"
                                );
                            }
                            _ => {}
                        }
                    }
                    Err(e) => {
                        let message = format!("{e:#}");
                        if failure.as_deref() != Some(message.as_str()) {
                            tracing::warn!(cluster = %name, error = %message, "the cluster's credentials Secret could not be read again; the credentials in hand are kept");
                            failure = Some(message);
                        }
                    }
                }
            }
        });
    }
}

/// Every cluster of the configuration with its name: `cluster` alone (`first`, already open),
/// or each of `clusters`, the first being `first`. A cluster that cannot be connected to (bad
/// credentials, a Secret that is not there) is an error naming it; one that is down is not
/// (its scans say so).
pub async fn open_clusters(config: &Config, first: &Cluster, progress: &Progress) -> Result<Vec<(String, Cluster)>> {
    let mut all = vec![(config.cluster.clone(), first.clone())];
    let mut home = Home::default();
    for entry in config.clusters.iter().skip(1) {
        all.push((entry.name.clone(), Cluster::open_entry(config, entry, &mut home, progress).await?));
    }
    Ok(all)
}

/// The clusters as Argo CD Applications' destinations name them: each one's name, the `name`
/// of its Argo CD cluster Secret, its API server URL, and whether it is the home cluster (what
/// `https://kubernetes.default.svc` and `in-cluster` mean): the one of `in_cluster: true`, else
/// the one whose API server is `live:`'s.
/// A cluster that could not be opened (`drift fix --accept` without its credentials) gets the
/// API server its kubeconfig context names, read without a request (docs/sources.md).
async fn target_clusters(config: &Config, opened: &[(&str, Option<&Cluster>)]) -> Vec<drift_git::TargetCluster> {
    let server = |c: Option<&Cluster>, entry: Option<&ClusterEntry>| match c {
        Some(Cluster::Kube(k, _)) => k.server_url().map(str::to_owned),
        Some(Cluster::Snapshot(_)) | None => entry.and_then(offline_server),
    };
    let home_server = if config.clusters.iter().any(|c| c.in_cluster) {
        None
    } else {
        // No request is made: the URL of `live:`'s configuration.
        match drift_kube::K8sSource::connect(kubernetes(config.live.clone())).await {
            Ok(home) => home.server_url().map(drift_git::normalize_server),
            Err(e) => {
                let live = kubernetes(config.live.clone());
                let read = if live.in_cluster {
                    None
                } else {
                    kubeconfig_server(live.kubeconfig.as_deref(), live.context.as_deref())
                };
                if read.is_none() {
                    tracing::debug!(error = %e, "the home cluster's API server is not known; `https://kubernetes.default.svc` names no cluster");
                }
                read.as_deref().map(drift_git::normalize_server)
            }
        }
    };
    opened
        .iter()
        .map(|&(name, c)| {
            let entry = config.clusters.iter().find(|e| e.name == name);
            let server = server(c, entry);
            let home = entry.is_some_and(|e| e.in_cluster)
                || (home_server.is_some() && server.as_deref().map(drift_git::normalize_server) == home_server);
            drift_git::TargetCluster {
                name: name.to_owned(),
                aliases: match c {
                    Some(Cluster::Kube(_, Some(argo))) if argo != name => vec![argo.clone()],
                    _ => Vec::new(),
                },
                server,
                home,
            }
        })
        .collect()
}

/// The API server of a cluster entry reached through a kubeconfig, read from the file without
/// a request and without its credentials; `None` for the other ways (a Secret is read from the
/// home cluster or holds credentials; the service account needs the pod).
fn offline_server(entry: &ClusterEntry) -> Option<String> {
    if entry.in_cluster || entry.secret.is_some() {
        return None;
    }
    kubeconfig_server(entry.kubeconfig.as_deref().map(expand_home).as_deref(), entry.context.as_deref())
}

/// The `server` of the cluster of a kubeconfig's context (`None`: its current context): of
/// `path`, else of the files of `$KUBECONFIG` (the first that has the context), else of
/// `~/.kube/config`. Only names are read: nothing of the credentials.
fn kubeconfig_server(path: Option<&Path>, context: Option<&str>) -> Option<String> {
    let files: Vec<PathBuf> = match path {
        Some(p) => vec![p.to_owned()],
        None => match std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
            Some(list) => std::env::split_paths(&list).collect(),
            None => vec![expand_home(Path::new("~/.kube/config"))],
        },
    };
    let parsed: Vec<serde_json::Value> = files
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .filter_map(|text| serde_saphyr::from_str(&text).ok())
        .collect();
    let current = || parsed.iter().find_map(|k| k.get("current-context")?.as_str().filter(|c| !c.is_empty()));
    let context = context.or_else(current)?;
    let named = |k: &serde_json::Value, list: &str, name: &str| -> Option<serde_json::Value> {
        k.get(list)?.as_array()?.iter().find(|e| e.get("name").and_then(|n| n.as_str()) == Some(name)).cloned()
    };
    let cluster = parsed
        .iter()
        .find_map(|k| named(k, "contexts", context)?.pointer("/context/cluster")?.as_str().map(str::to_owned))?;
    parsed.iter().find_map(|k| named(k, "clusters", &cluster)?.pointer("/cluster/server")?.as_str().map(str::to_owned))
}

/// A repository's source for a cluster after the first, with a cache folder of its own
/// (`CACHE/clusters/NAME`): each cluster reads the repository through its own source (with that
/// cluster's lookups), and the sources of several clusters fetch at once, so they never share
/// one clone. The first cluster keeps the repository's folder (a configuration that grows from
/// `cluster:` to `clusters:` keeps its clone).
fn own_cache(mut source: drift_git::SourceConfig, cluster: &str, first: bool) -> drift_git::SourceConfig {
    if first {
        return source;
    }
    // drift-git's default folders, as it documents them.
    let default = |kind: &str| {
        std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").filter(|v| !v.is_empty()).map(|h| PathBuf::from(h).join(".cache")))
            .unwrap_or_else(std::env::temp_dir)
            .join("drift")
            .join(kind)
    };
    match &mut source {
        drift_git::SourceConfig::Git(g) => {
            g.cache_dir = Some(g.cache_dir.take().unwrap_or_else(|| default("git")).join("clusters").join(cluster));
        }
        drift_git::SourceConfig::Github(g) => {
            g.cache_dir = Some(g.cache_dir.take().unwrap_or_else(|| default("github")).join("clusters").join(cluster));
        }
        drift_git::SourceConfig::Folder(_) => {}
    }
    source
}

/// The namespace rules of every scan.
pub fn scan_settings(config: &Config, progress: &Progress, sops: &SopsKeys) -> ScanSettings {
    ScanSettings {
        sops_recipients: sops_recipients(sops),
        progress: progress.clone(),
        default_namespace: config.default_namespace.clone(),
        orphans: config.orphans.enabled,
        policy: config.policy(),
        cluster_scoped: config.built.cluster_scoped.clone(),
    }
}

/// The notifiers of `notify:`, each with its delivery policy. Their secrets must be in the
/// environment now: a missing one is an error that names the variable (never a value).
pub fn notifiers(config: &Config) -> Result<Vec<Arc<dyn Outlet>>> {
    drift_notify::validate(&config.notify, &drift_notify::process_env).context("`notify`")?;
    config
        .notify
        .iter()
        .map(|n| {
            drift_notify::outlet(n, config.notifications.link.clone())
                .with_context(|| format!("notifier `{}`", n.name()))
        })
        .collect()
}

/// A detector of this configuration with its store, sources, engine and notifiers, on
/// `cluster`; the caller adds the API token (serve) and builds it. Its passes count what they
/// read and compare into `progress`.
pub async fn detector(
    config: &Config,
    store: Store,
    hasher: SecretHasher,
    cluster: &Cluster,
    long_running: bool,
    progress: &Progress,
) -> Result<DetectorBuilder> {
    let sops = sops_keys()?;
    let builder = if config.clusters.is_empty() {
        base(config, store, hasher, Some((cluster, desired_sources(config, long_running, progress, &sops, cluster)?)))
    } else {
        // Each cluster with the repositories that target it, each read with that cluster's
        // lookups (Flux's value sources are read from the cluster the objects go to).
        let mut builder = base(config, store, hasher, None);
        let opened = open_clusters(config, cluster, progress).await?;
        if long_running {
            keep_credentials(config, &opened);
        }
        let all = target_clusters(config, &opened.iter().map(|(n, c)| (n.as_str(), Some(c))).collect::<Vec<_>>()).await;
        for (i, (name, c)) in opened.into_iter().enumerate() {
            let (mut desired, mut proposers) = (Vec::new(), Vec::new());
            for r in config.repositories.iter().filter(|r| r.targets(&name)) {
                // Argo CD Applications are compared with the cluster their destination names
                // only (docs/sources.md, "Several clusters"); an accept of this cluster's drift
                // edits the repository as this cluster's source reads it.
                let targeted: Vec<String> =
                    config.clusters.iter().map(|c| c.name.clone()).filter(|c| r.targets(c)).collect();
                let targets = Arc::new(drift_git::ClusterTargets {
                    clusters: all.clone(),
                    this: name.clone(),
                    report: targeted.first() == Some(&name),
                    targeted,
                });
                desired.push(
                    drift_git::source_for_cluster(
                        own_cache(r.source_config_for(long_running), &name, i == 0),
                        progress.clone(),
                        sops_opener(&sops),
                        c.lookup(),
                        Some(targets.clone()),
                    )
                    .with_context(|| format!("repository `{}`", r.name))?,
                );
                proposers.extend(proposer(config, r, Some(targets))?);
            }
            builder =
                builder.cluster(drift_runtime::ClusterParts { live: c.live(), desired, writer: c.writer(), proposers });
        }
        builder
    };
    let mut builder = builder
        .settings(scan_settings(config, progress, &sops))
        .interval(config.interval)
        .watch(config.watch)
        .notify_tick(config.notifications.tick)
        .notify_lease(config.notifications.lease);
    if let Some(policy) = &config.heal {
        builder = builder.heal(policy.clone());
    }
    if long_running && let Some(policy) = &config.accept.auto {
        builder = builder.auto_accept(policy.clone());
    }
    if long_running && let Some(policy) = &config.accept.propose {
        builder = builder.propose(policy.clone());
    }
    if let Some(settings) = config.classify {
        builder = builder.classify(settings);
    }
    if long_running && let Some(audit) = &config.audit {
        builder = builder.audit(audit.clone());
    }
    builder = builder.alerts(config.alerts.settings());
    // With several clusters each cluster has its own (above); these serve one cluster.
    for r in config.repositories.iter().filter(|_| config.clusters.is_empty()) {
        if let Some(proposer) = proposer(config, r, None)? {
            builder = builder.proposer(proposer);
        }
    }
    for outlet in notifiers(config)? {
        builder = builder.notifier(outlet);
    }
    Ok(builder)
}

/// What every detector of this configuration has: the store, the engine with the store's Secret
/// hasher and the remediation settings, and the live side of `cluster` (and its writer of
/// reverts) with the desired sources given, when there is one cluster.
fn base(
    config: &Config,
    store: Store,
    hasher: SecretHasher,
    cluster: Option<(&Cluster, Vec<Arc<dyn DesiredSource>>)>,
) -> DetectorBuilder {
    let mut builder = drift_runtime::Detector::builder()
        .engine(config.built.engine.clone().with_secret_hasher(hasher))
        .store(store)
        .allow_secret_reverts(config.remediation.allow_secrets)
        .action_timeout(config.remediation.timeout)
        .link(config.notifications.link.as_ref().map(|u| u.as_str().trim_end_matches('/').to_owned()));
    if let Some((cluster, desired)) = cluster {
        builder = builder.desired_all(desired).live(cluster.live());
        if let Some(writer) = cluster.writer() {
            builder = builder.cluster_writer(writer);
        }
    }
    builder
}

/// The proposer of accepted changes of a repository with a remote (git or GitHub), as a
/// branch or a pull request; a local folder has none.
/// The proposer of accepted changes of repository `r`; with `targets`, for that one cluster of
/// several (it reads the repository as that cluster's source does).
fn proposer(
    config: &Config,
    r: &crate::config::RepositoryConfig,
    targets: Option<Arc<drift_git::ClusterTargets>>,
) -> Result<Option<Arc<dyn ChangeProposer>>> {
    let source = r.source_config_for(false);
    if matches!(source, drift_git::SourceConfig::Folder(_)) {
        return Ok(None);
    }
    let author = (config.remediation.author_name.clone(), config.remediation.author_email.clone());
    let mut proposer = drift_git::GitProposer::new(r.name.clone(), source, author)
        .with_context(|| format!("repository `{}`", r.name))?;
    if let Some(targets) = targets {
        proposer = proposer.with_targets(targets);
    }
    Ok(Some(Arc::new(proposer)))
}

/// What `drift fix` acts with, and nothing more: the store, the one repository the drifts are
/// of (its desired source, and its proposer for an accept) and the cluster's one client (the
/// live read of an accept, the writer of a revert). No notifier is built, so none of their
/// secrets is needed. An accept runs without a cluster too: when none can be reached, it
/// proposes the values the last scan recorded.
/// It acts on `cluster`: `cluster:` with one cluster; with `clusters:`, one the configuration
/// names (a drift's cluster).
pub async fn remedies_on(
    config: &Config,
    store: Store,
    hasher: SecretHasher,
    repository: &str,
    cluster: &str,
    accept: bool,
) -> Result<drift_runtime::Detector> {
    Ok(remedies_targeted(config, store, hasher, repository, cluster, accept).await?.0)
}

/// [`remedies_on`], with the repository as that cluster reads it when there are several
/// ([`drift_git::plan_accept_for`] takes it): what `drift propose` plans its patches with.
pub async fn remedies_targeted(
    config: &Config,
    store: Store,
    hasher: SecretHasher,
    repository: &str,
    cluster: &str,
    accept: bool,
) -> Result<(drift_runtime::Detector, Option<Arc<drift_git::ClusterTargets>>)> {
    let r = config.repositories.iter().find(|r| r.name == repository).with_context(|| {
        format!("the drift is of repository {repository:?}, which this configuration does not name")
    })?;
    let sops = sops_keys()?;
    let progress = Progress::default();
    let name = cluster.to_owned();
    let opened = match config.clusters.iter().find(|c| c.name == cluster) {
        Some(entry) => Cluster::open_entry(config, entry, &mut Home::default(), &progress).await,
        None if !config.clusters.is_empty() => {
            anyhow::bail!("the drift is of cluster {cluster:?}, which this configuration's `clusters` does not name")
        }
        None => Cluster::open(config, &progress).await,
    };
    let (cluster, recorded) = match opened {
        Ok(cluster) => (cluster, false),
        // An accept needs the repository; the cluster only to read its values fresh. Without
        // one (no kubeconfig, no service account), the values the last scan recorded are
        // proposed, and the pull request says so.
        Err(e) if accept => {
            eprintln!("note: the cluster cannot be reached ({e:#}); proposing the values the last scan recorded");
            let name = if config.clusters.is_empty() { config.cluster.clone() } else { cluster.to_owned() };
            let unreachable = drift_core::memory::MemoryLiveSource::new(name, Vec::new());
            unreachable.set_down(Some(drift_core::Error::unavailable(format!("the cluster cannot be reached: {e:#}"))));
            (Cluster::Snapshot(Arc::new(unreachable)), true)
        }
        Err(e) => return Err(e),
    };
    let targets = targets_of(config, r, &name, &cluster).await;
    let source = drift_git::source_for_cluster(
        r.source_config_for(false),
        progress.clone(),
        sops_opener(&sops),
        cluster.lookup(),
        targets.clone(),
    )
    .with_context(|| format!("repository `{}`", r.name))?;
    let mut builder = base(config, store, hasher, Some((&cluster, vec![source])))
        .settings(scan_settings(config, &progress, &sops))
        .recorded_values(recorded);
    if accept && let Some(proposer) = proposer(config, r, targets.clone())? {
        builder = builder.proposer(proposer);
    }
    Ok((builder.build()?, targets))
}

/// With several clusters, the repository `r` as the scans of cluster `name` (opened as
/// `cluster`) read it: an Argo CD Application going to another cluster renders nothing there.
/// `None` with one cluster.
async fn targets_of(
    config: &Config,
    r: &crate::config::RepositoryConfig,
    name: &str,
    cluster: &Cluster,
) -> Option<Arc<drift_git::ClusterTargets>> {
    config.clusters.iter().find(|c| c.name == name)?;
    // The others are not opened: their URLs as their kubeconfig names them, with no request
    // (one named otherwise goes nowhere, which is not here either).
    let opened: Vec<(&str, Option<&Cluster>)> =
        config.clusters.iter().map(|e| (e.name.as_str(), (e.name == name).then_some(cluster))).collect();
    let clusters = target_clusters(config, &opened).await;
    let targeted = config.clusters.iter().map(|c| c.name.clone()).filter(|c| r.targets(c)).collect();
    Some(Arc::new(drift_git::ClusterTargets { clusters, this: name.to_owned(), targeted, report: false }))
}

/// This replica's identity among replicas: `$POD_NAME`, else the host name and process id.
fn replica_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "drift".to_owned());
    crate::config::LeaderElectionConfig::identity_from(std::env::var("POD_NAME").ok(), &host, std::process::id())
}

/// This replica's membership among the replicas that share the clusters: a Lease of the home
/// cluster of its own ([`drift_kube::KubeMembers`]).
#[derive(Debug)]
struct Members(drift_kube::KubeMembers);

#[async_trait::async_trait]
impl drift_runtime::Membership for Members {
    fn identity(&self) -> &str {
        self.0.identity()
    }
    async fn heartbeat(&self) -> drift_core::Result<Vec<String>> {
        self.0.heartbeat(chrono::Utc::now()).await
    }
    async fn leave(&self) -> drift_core::Result<()> {
        self.0.leave(chrono::Utc::now()).await
    }
}

/// The sharding of `clusters:` when `leader_election:` is on: the clusters spread over the
/// replicas alive, a Lease per cluster (`LEASE-CLUSTER`) and one per replica
/// (`LEASE-member-IDENTITY`, labelled) in the home cluster (`live:`), in the election's
/// namespace, with its timings (docs/kubernetes.md, "Sharding across replicas").
pub async fn sharding(config: &Config) -> Result<Option<drift_runtime::Sharding>> {
    let le = &config.leader_election;
    if !le.enabled || config.clusters.is_empty() {
        return Ok(None);
    }
    let namespace = le.namespace_from(std::env::var("POD_NAMESPACE").ok());
    let identity = replica_identity();
    let home = Home::default().source(config).await?;
    let duration = le.lease_duration;
    let locks = config
        .clusters
        .iter()
        .map(|c| {
            let lock = drift_kube::KubeLease::new(
                home.client().clone(),
                namespace.clone(),
                format!("{}-{}", le.lease, c.name),
                identity.clone(),
                duration,
            );
            (c.name.clone(), Arc::new(lock) as Arc<dyn drift_core::lease::LeaseLock>)
        })
        .collect();
    let members = drift_kube::KubeMembers::new(
        home.client().clone(),
        namespace.clone(),
        le.lease.clone(),
        identity.clone(),
        duration,
    );
    tracing::info!(%identity, %namespace, group = %le.lease, clusters = config.clusters.len(), "sharding on: this replica watches the clusters whose Lease it holds");
    Ok(Some(
        drift_runtime::Sharding::new(Arc::new(Members(members)), locks, le.timings()).context("`leader_election`")?,
    ))
}

/// The leader election of `leader_election:` when it is on: this replica (`$POD_NAME`, else
/// host and process id) as a candidate for the configured Lease, through the cluster's one
/// client.
pub fn elector(config: &Config, cluster: &Cluster) -> Result<Option<drift_runtime::Elector>> {
    let le = &config.leader_election;
    // With `clusters:`, replicas shard the clusters instead ([`sharding`]).
    if !le.enabled || !config.clusters.is_empty() {
        return Ok(None);
    }
    let namespace = le.namespace_from(std::env::var("POD_NAMESPACE").ok());
    let identity = replica_identity();
    let Cluster::Kube(source, _) = cluster else {
        anyhow::bail!("`leader_election` needs a cluster to keep its Lease in; `live.snapshot` files have none");
    };
    let lock =
        drift_kube::KubeLease::new(source.client().clone(), namespace, le.lease.clone(), identity, le.lease_duration);
    Ok(Some(drift_runtime::Elector::new(Arc::new(lock), le.timings()).context("`leader_election`")?))
}

/// Opens the store with its acting side (decisions, waivers, the audit trail, deliveries), for
/// `drift decide`, `drift audit` and `drift drifts get`: the read side and the acting side of
/// one store (both SQL stores keep decisions). Migrations run on open unless its settings say
/// otherwise.
pub async fn open_act_store(
    config: &StoreConfig,
) -> Result<(Arc<dyn drift_core::DriftStore>, Arc<dyn drift_core::act::ActStore>)> {
    fn both<S: drift_core::DriftStore + drift_core::act::ActStore + 'static>(
        store: S,
    ) -> (Arc<dyn drift_core::DriftStore>, Arc<dyn drift_core::act::ActStore>) {
        let store = Arc::new(store);
        (store.clone(), store)
    }
    let shown = config.display();
    Ok(match config {
        StoreConfig::Postgres(c) => {
            both(drift_postgres::PostgresStore::from_config(c).await.with_context(|| format!("opening {shown}"))?)
        }
        StoreConfig::Sqlite(c) => {
            both(drift_sqlite::SqliteStore::from_config(c).await.with_context(|| format!("opening {shown}"))?)
        }
    })
}
