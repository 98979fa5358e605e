{{/*
Names, labels, Secret names, the checks that values.schema.json cannot express with a clear
message, and the detector's drift.yaml.
*/}}

{{- define "drift.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "drift.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "drift.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "drift.labels" -}}
helm.sh/chart: {{ include "drift.chart" . }}
app.kubernetes.io/name: {{ include "drift.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: drift-detector
{{- end }}

{{/* Selector of the detector's pods. */}}
{{- define "drift.selectorLabels" -}}
app.kubernetes.io/name: {{ include "drift.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: detector
{{- end }}

{{/* Selector of the bundled PostgreSQL's pod. */}}
{{- define "drift.postgresql.selectorLabels" -}}
app.kubernetes.io/name: {{ include "drift.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: postgresql
{{- end }}

{{- define "drift.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "drift.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "drift.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "drift.postgresql.fullname" -}}
{{- printf "%s-postgresql" (include "drift.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Secret names: the existing one named in the values, or the one the chart creates. */}}
{{- define "drift.writeTokenSecret" -}}
{{- default (printf "%s-api-token" (include "drift.fullname" .)) .Values.api.writeToken.existingSecret }}
{{- end }}

{{- define "drift.readTokenSecret" -}}
{{- default (printf "%s-api-read-token" (include "drift.fullname" .)) .Values.api.readToken.existingSecret }}
{{- end }}

{{- define "drift.postgresql.secret" -}}
{{- default (include "drift.postgresql.fullname" .) .Values.postgresql.auth.existingSecret }}
{{- end }}

{{/* The environment variable of a named API token: DRIFT_API_TOKEN_ and the name in capitals. */}}
{{- define "drift.namedTokenEnv" -}}
{{- printf "DRIFT_API_TOKEN_%s" (. | upper | replace "-" "_") }}
{{- end }}

{{/*
A random value for a Secret the chart creates, base64: the value already in the cluster when
there is one (so an upgrade keeps a token and a database password), else 40 random characters.
Call with (dict "ctx" $ "name" SECRET "key" KEY).
*/}}
{{- define "drift.randomSecretValue" -}}
{{- $existing := lookup "v1" "Secret" .ctx.Release.Namespace .name }}
{{- if and $existing $existing.data (hasKey $existing.data .key) }}
{{- index $existing.data .key }}
{{- else }}
{{- randAlphaNum 40 | b64enc }}
{{- end }}
{{- end }}

{{/*
What values.schema.json cannot say in a sentence: every combination of values that cannot run.
Included by the Deployment, so `helm template` and `helm install` stop with the message.
*/}}
{{- define "drift.validate" -}}
{{- $v := .Values }}
{{- if and (gt (int $v.replicaCount) 1) $v.detector.clusters (not $v.leaderElection.enabled) }}
{{- fail "detector.clusters with more than one replica: the replicas share the clusters through leaderElection.enabled=true" }}
{{- end }}
{{- if and (gt (int $v.replicaCount) 1) (not $v.leaderElection.enabled) }}
{{- fail (printf "replicaCount is %d: more than one replica needs leaderElection.enabled=true, or every replica scans" (int $v.replicaCount)) }}
{{- end }}
{{- if and $v.leaderElection.enabled (eq $v.storage.type "sqlite") }}
{{- fail "leaderElection.enabled needs PostgreSQL storage (storage.type postgresql or bundled): the replicas share one store, and SQLite on a volume belongs to one pod" }}
{{- end }}
{{- if and (eq $v.storage.type "postgresql") (not $v.storage.postgresql.existingSecret) }}
{{- fail "storage.type is postgresql: set storage.postgresql.existingSecret to the Secret holding the database URL (key storage.postgresql.key)" }}
{{- end }}
{{- if and (ne $v.api.service.type "NodePort") $v.api.service.nodePort }}
{{- fail (printf "api.service.nodePort is %v but api.service.type is %s: set the type to NodePort" $v.api.service.nodePort $v.api.service.type) }}
{{- end }}
{{- if and (ne $v.postgresql.service.type "NodePort") $v.postgresql.service.nodePort }}
{{- fail (printf "postgresql.service.nodePort is %v but postgresql.service.type is %s: set the type to NodePort" $v.postgresql.service.nodePort $v.postgresql.service.type) }}
{{- end }}
{{- if and $v.podDisruptionBudget.enabled (ge (int $v.podDisruptionBudget.minAvailable) (int $v.replicaCount)) }}
{{- fail (printf "podDisruptionBudget.minAvailable is %d with replicaCount %d: no pod could ever be evicted, so node drains would hang; lower minAvailable or add replicas" (int $v.podDisruptionBudget.minAvailable) (int $v.replicaCount)) }}
{{- end }}
{{- $clusters := dict }}
{{- range $v.detector.clusters }}
{{- if hasKey $clusters .name }}
{{- fail (printf "detector.clusters: the cluster %s is given twice" .name) }}
{{- end }}
{{- $_ := set $clusters .name true }}
{{- if and (not .in_cluster) (not .secret) }}
{{- fail (printf "detector.clusters: cluster %s needs in_cluster: true or a secret (a pod has no kubeconfig file)" .name) }}
{{- end }}
{{- end }}
{{- $names := dict }}
{{- range $v.api.tokens }}
{{- if hasKey $names .name }}
{{- fail (printf "api.tokens: the name %s is given twice" .name) }}
{{- end }}
{{- $_ := set $names .name true }}
{{- end }}
{{- end }}

{{/* The store part of drift.yaml. */}}
{{- define "drift.config.store" -}}
{{- $s := .Values.storage }}
{{- if eq $s.type "sqlite" }}
store: sqlite:///var/lib/drift/drift.db
{{- if $s.retentionDays }}
retention_days: {{ int $s.retentionDays }}
{{- end }}
{{- else if eq $s.type "postgresql" }}
database_env: DRIFT_DATABASE_URL
{{- if $s.retentionDays }}
retention_days: {{ int $s.retentionDays }}
{{- end }}
{{- else }}
{{- $pg := .Values.postgresql }}
store:
  type: postgres
  url: {{ printf "postgres://%s@%s:%d/%s" $pg.username (include "drift.postgresql.fullname" .) (int $pg.service.port) $pg.database | toJson }}
  password_env: DRIFT_DB_PASSWORD
  {{- if $s.retentionDays }}
  retention_days: {{ int $s.retentionDays }}
  {{- end }}
{{- end }}
{{- end }}

{{/* The detector's drift.yaml (docs/configuration.md). */}}
{{- define "drift.config" -}}
{{- $d := .Values.detector -}}
# Rendered by the Helm chart from its values (detector.*, api.*, storage.*, leaderElection.*).
{{- if $d.clusters }}
clusters:
{{- range $d.clusters }}
  - name: {{ .name | toJson }}
    {{- with omit . "name" }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end }}
{{- else }}
cluster: {{ $d.cluster | toJson }}
{{- end }}
interval: {{ $d.interval | toJson }}
watch: {{ $d.watch }}
default_namespace: {{ $d.defaultNamespace | toJson }}
{{- if $d.orphans }}
orphans:
  enabled: true
{{- end }}
{{- with $d.policies }}
policies:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- include "drift.config.store" . | trim | nindent 0 }}
api:
  listen: {{ printf "0.0.0.0:%d" (int .Values.api.port) | toJson }}
  {{- with .Values.api.allowedHosts }}
  allowed_hosts: {{ toJson . }}
  {{- end }}
  token_env: DRIFT_API_TOKEN
  {{- if .Values.api.readToken.enabled }}
  read_token_env: DRIFT_API_READ_TOKEN
  {{- end }}
  {{- with .Values.api.tokens }}
  tokens:
    {{- range . }}
    - name: {{ .name | toJson }}
      token_env: {{ include "drift.namedTokenEnv" .name }}
    {{- end }}
  {{- end }}
repositories:
{{- range $d.repositories }}
{{- $repo := merge (omit (deepCopy .) "name") (dict "cache_dir" "/var/lib/drift/cache") }}
  - name: {{ .name | toJson }}
    {{- toYaml $repo | nindent 4 }}
{{- end }}
{{- with $d.live }}
live:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $d.ignore }}
ignore:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $d.severity }}
severity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $d.engine }}
engine:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $d.notify }}
notify:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $d.notifications }}
notifications:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $d.remediation }}
remediation:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if not (kindIs "invalid" $d.heal) }}
heal:
  {{- toYaml $d.heal | nindent 2 }}
{{- end }}
{{- with $d.accept }}
accept:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if not (kindIs "invalid" $d.classify) }}
classify:
  {{- toYaml $d.classify | nindent 2 }}
{{- end }}
{{- if not (kindIs "invalid" $d.audit) }}
audit:
  {{- toYaml $d.audit | nindent 2 }}
{{- end }}
{{- with $d.alerts }}
alerts:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if .Values.secretHash.existingSecret }}
secret_hash:
  key_env: DRIFT_SECRET_HASH_KEY
{{- end }}
{{- if .Values.leaderElection.enabled }}
{{- $le := .Values.leaderElection }}
leader_election:
  enabled: true
  lease: {{ default (include "drift.fullname" .) $le.lease | toJson }}
  namespace: {{ .Release.Namespace | toJson }}
  lease_duration: {{ $le.leaseDuration | toJson }}
  renew_deadline: {{ $le.renewDeadline | toJson }}
  retry_period: {{ $le.retryPeriod | toJson }}
{{- end }}
{{- end }}
