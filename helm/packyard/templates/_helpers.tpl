{{/* ---------------------------------------------------------------------------------------
Names and labels
--------------------------------------------------------------------------------------- */}}

{{- define "packyard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* <release>-packyard, or the release name alone when it already contains the chart name. */}}
{{- define "packyard.fullname" -}}
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

{{- define "packyard.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "packyard.labels" -}}
helm.sh/chart: {{ include "packyard.chart" . }}
{{ include "packyard.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: packyard
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "packyard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "packyard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels of one component; call with (dict "ctx" $ "component" "api"). */}}
{{- define "packyard.componentLabels" -}}
{{ include "packyard.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "packyard.componentSelectorLabels" -}}
{{ include "packyard.selectorLabels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "packyard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "packyard.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "packyard.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "packyard.secretName" -}}
{{- include "packyard.fullname" . }}
{{- end }}

{{- define "packyard.configMapName" -}}
{{- printf "%s-config" (include "packyard.fullname" .) }}
{{- end }}

{{- define "packyard.claimName" -}}
{{- default (printf "%s-data" (include "packyard.fullname" .)) .Values.persistence.existingClaim }}
{{- end }}

{{/* ---------------------------------------------------------------------------------------
Mode
--------------------------------------------------------------------------------------- */}}

{{/* "true" when Packyard runs on SQLite: no database URL given, or a sqlite: URL. */}}
{{- define "packyard.sqlite" -}}
{{- if and (not .Values.database.url) (not .Values.database.existingSecret) }}true
{{- else if hasPrefix "sqlite:" .Values.database.url }}true
{{- end }}
{{- end }}

{{/* "true" when more than one Packyard pod can run at once. */}}
{{- define "packyard.multiPod" -}}
{{- if or .Values.worker.enabled .Values.api.autoscaling.enabled (gt (int .Values.api.replicaCount) 1) }}true{{- end }}
{{- end }}

{{/* Fails the render, with a message naming the values, on combinations that cannot work. */}}
{{- define "packyard.validate" -}}
{{- $sqlite := include "packyard.sqlite" . }}
{{- $multi := include "packyard.multiPod" . }}
{{- if and $sqlite $multi }}
{{- fail "SQLite (no database.url / database.existingSecret) supports exactly one pod: set api.replicaCount=1, api.autoscaling.enabled=false and worker.enabled=false, or configure PostgreSQL/MySQL." }}
{{- end }}
{{- if and $sqlite (not .Values.persistence.enabled) }}
{{- fail "SQLite keeps the database on the state volume: set persistence.enabled=true (or configure PostgreSQL/MySQL)." }}
{{- end }}
{{- if and $multi .Values.persistence.enabled (not (has "ReadWriteMany" .Values.persistence.accessModes)) }}
{{- fail "More than one pod would mount the persistence volume, which is not ReadWriteMany: set persistence.enabled=false (with config.blobs.kind=s3) or persistence.accessModes=[ReadWriteMany]." }}
{{- end }}
{{- if and $multi (eq .Values.config.blobs.kind "file") (not .Values.persistence.enabled) }}
{{- fail "File blobs on an emptyDir are not shared between pods: use config.blobs.kind=s3, or a ReadWriteMany volume (persistence.enabled=true, accessModes=[ReadWriteMany])." }}
{{- end }}
{{- if and (eq .Values.config.blobs.kind "s3") (not .Values.config.blobs.s3.bucket) }}
{{- fail "config.blobs.kind=s3 needs config.blobs.s3.bucket." }}
{{- end }}
{{- if and (eq .Values.config.blobs.kind "file") (not (hasPrefix "/var/lib/packyard/" .Values.config.blobs.path)) }}
{{- fail "config.blobs.path must be under /var/lib/packyard/ (the only writable volume)." }}
{{- end }}
{{- end }}

{{/* ---------------------------------------------------------------------------------------
packyard.toml
--------------------------------------------------------------------------------------- */}}

{{/* The effective configuration map: config < extraConfig < keys the chart owns. */}}
{{- define "packyard.configMap" -}}
{{- $cfg := deepCopy .Values.config }}
{{- include "packyard.deepSet" (dict "dst" $cfg "src" (deepCopy .Values.extraConfig)) }}
{{- range $section := list "server" "database" "worker" }}
{{- if not (hasKey $cfg $section) }}
{{- $_ := set $cfg $section dict }}
{{- end }}
{{- end }}
{{- $_ := set $cfg.server "bind" (printf "0.0.0.0:%d" (int .Values.containerPorts.http)) }}
{{- $_ = set $cfg.server "management_bind" (printf "0.0.0.0:%d" (int .Values.containerPorts.management)) }}
{{- $_ = set $cfg.server "data_dir" "/var/lib/packyard" }}
{{- $_ = set $cfg.database "migrate_on_start" false }}
{{- $_ = set $cfg.worker "embedded" (not .Values.worker.enabled) }}
{{- if and (include "packyard.sqlite" .) (not .Values.database.url) }}
{{- $_ = set $cfg.database "url" "sqlite:///var/lib/packyard/packyard.db" }}
{{- else }}
{{- $_ = unset $cfg.database "url" }}
{{- end }}
{{- include "packyard.prune" $cfg }}
{{- toJson $cfg }}
{{- end }}

{{/* Removes, in place, nulls and empty strings, then tables left empty: Packyard's optional
keys (blobs.s3.endpoint, ...) are absent from the file rather than empty. */}}
{{- define "packyard.prune" -}}
{{- $table := . }}
{{- range $key, $value := $table }}
{{- if kindIs "map" $value }}
{{- include "packyard.prune" $value }}
{{- end }}
{{- if or (kindIs "invalid" $value) (and (kindIs "string" $value) (eq $value "")) (and (kindIs "map" $value) (empty $value)) }}
{{- $_ := unset $table $key }}
{{- end }}
{{- end }}
{{- end }}

{{/* Deep-merges .src into .dst in place. Unlike mergeOverwrite it also applies false and 0. */}}
{{- define "packyard.deepSet" -}}
{{- range $key, $value := .src }}
{{- if and (kindIs "map" $value) (kindIs "map" (get $.dst $key)) }}
{{- include "packyard.deepSet" (dict "dst" (get $.dst $key) "src" $value) }}
{{- else }}
{{- $_ := set $.dst $key $value }}
{{- end }}
{{- end }}
{{- end }}

{{/* Renders a map as TOML: the scalars of a table first, then its sub-tables as [a.b]. */}}
{{- define "packyard.toml" -}}
{{- include "packyard.toml.table" (dict "path" "" "table" .) }}
{{- end }}

{{- define "packyard.toml.table" -}}
{{- $path := .path }}
{{- $table := .table }}
{{- range $key := keys $table | sortAlpha }}
{{- $value := index $table $key }}
{{- if not (kindIs "map" $value) }}
{{ include "packyard.toml.key" $key }} = {{ include "packyard.toml.value" $value }}
{{- end }}
{{- end }}
{{- range $key := keys $table | sortAlpha }}
{{- $value := index $table $key }}
{{- if kindIs "map" $value }}
{{- $sub := ternary (include "packyard.toml.key" $key) (printf "%s.%s" $path (include "packyard.toml.key" $key)) (eq $path "") }}

[{{ $sub }}]
{{- include "packyard.toml.table" (dict "path" $sub "table" $value) }}
{{- end }}
{{- end }}
{{- end }}

{{- define "packyard.toml.key" -}}
{{- if regexMatch "^[A-Za-z0-9_-]+$" . }}{{ . }}{{ else }}{{ toJson . }}{{ end }}
{{- end }}

{{/* Values from YAML arrive as float64: integral ones are printed as TOML integers. */}}
{{- define "packyard.toml.value" -}}
{{- if kindIs "string" . }}{{ toJson . }}
{{- else if kindIs "bool" . }}{{ . }}
{{- else if kindIs "float64" . }}{{ if eq (floor .) . }}{{ int64 . }}{{ else }}{{ . }}{{ end }}
{{- else if kindIs "slice" . }}[{{ range $i, $e := . }}{{ if $i }}, {{ end }}{{ include "packyard.toml.value" $e }}{{ end }}]
{{- else }}{{ . }}
{{- end }}
{{- end }}

{{/* ---------------------------------------------------------------------------------------
Pod building blocks
--------------------------------------------------------------------------------------- */}}

{{/* A secretKeyRef env entry; call with (dict "name" "PACKYARD_X" "secret" "s" "key" "k"). */}}
{{- define "packyard.secretEnv" -}}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ .secret | quote }}
      key: {{ .key | quote }}
{{- end }}

{{/* Environment shared by every Packyard container: the config path and the secrets. */}}
{{- define "packyard.env" -}}
{{- $chartSecret := include "packyard.secretName" . -}}
- name: PACKYARD_CONFIG
  value: /etc/packyard/packyard.toml
{{- if .Values.database.existingSecret }}
{{ include "packyard.secretEnv" (dict "name" "PACKYARD_DATABASE__URL" "secret" .Values.database.existingSecret "key" .Values.database.existingSecretKey) }}
{{- else if .Values.database.url }}
{{ include "packyard.secretEnv" (dict "name" "PACKYARD_DATABASE__URL" "secret" $chartSecret "key" "database-url") }}
{{- end }}
{{- $securitySecret := default $chartSecret .Values.security.existingSecret }}
{{- $secretKey := ternary .Values.security.secretKey "security-secret" (ne .Values.security.existingSecret "") }}
{{- $adminKey := ternary .Values.security.adminPasswordKey "admin-password" (ne .Values.security.existingSecret "") }}
{{ include "packyard.secretEnv" (dict "name" "PACKYARD_SECURITY__SECRET" "secret" $securitySecret "key" $secretKey) }}
{{ include "packyard.secretEnv" (dict "name" "PACKYARD_SECURITY__ADMIN_PASSWORD" "secret" $securitySecret "key" $adminKey) }}
{{- if .Values.s3.existingSecret }}
{{ include "packyard.secretEnv" (dict "name" "PACKYARD_BLOBS__S3__ACCESS_KEY_ID" "secret" .Values.s3.existingSecret "key" .Values.s3.accessKeyIdKey) }}
{{ include "packyard.secretEnv" (dict "name" "PACKYARD_BLOBS__S3__SECRET_ACCESS_KEY" "secret" .Values.s3.existingSecret "key" .Values.s3.secretAccessKeyKey) }}
{{- else if and .Values.s3.accessKeyId .Values.s3.secretAccessKey }}
{{ include "packyard.secretEnv" (dict "name" "PACKYARD_BLOBS__S3__ACCESS_KEY_ID" "secret" $chartSecret "key" "s3-access-key-id") }}
{{ include "packyard.secretEnv" (dict "name" "PACKYARD_BLOBS__S3__SECRET_ACCESS_KEY" "secret" $chartSecret "key" "s3-secret-access-key") }}
{{- end }}
{{- if .Values.redis.existingSecret }}
{{ include "packyard.secretEnv" (dict "name" "PACKYARD_CACHE__REDIS_URL" "secret" .Values.redis.existingSecret "key" .Values.redis.existingSecretKey) }}
{{- else if .Values.redis.url }}
{{ include "packyard.secretEnv" (dict "name" "PACKYARD_CACHE__REDIS_URL" "secret" $chartSecret "key" "redis-url") }}
{{- end }}
{{- if .Values.rabbitmq.existingSecret }}
{{ include "packyard.secretEnv" (dict "name" "PACKYARD_EVENTS__AMQP_URL" "secret" .Values.rabbitmq.existingSecret "key" .Values.rabbitmq.existingSecretKey) }}
{{- else if .Values.rabbitmq.url }}
{{ include "packyard.secretEnv" (dict "name" "PACKYARD_EVENTS__AMQP_URL" "secret" $chartSecret "key" "amqp-url") }}
{{- end }}
{{- end }}

{{/* The init container of every api and worker pod: `packyard-api migrate` before the process
starts (which runs with database.migrate_on_start=false and would wait for the schema). Each pod
is then ready on its own: nothing outside it (a post-install hook Job) has to run first, which
`helm install --wait` could not allow, as it waits for the pods before it runs such hooks. The
command takes the database's migration lock: pods starting together apply the migrations once and
the others find the schema current; on an upgrade the first new pod applies them while the old
ones keep serving (each migration keeps the previous release working). */}}
{{- define "packyard.migrateInit" -}}
- name: migrate
  image: {{ include "packyard.image" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  command: ["/usr/local/bin/packyard-api"]
  args: ["migrate"]
  env:
    {{- include "packyard.env" . | nindent 4 }}
  securityContext:
    {{- toYaml .Values.securityContext | nindent 4 }}
  resources:
    {{- toYaml .Values.migrations.resources | nindent 4 }}
  volumeMounts:
    {{- include "packyard.volumeMounts" . | nindent 4 }}
{{- end }}

{{/* Does the chart need its own Secret? */}}
{{- define "packyard.createSecret" -}}
{{- $db := and .Values.database.url (not .Values.database.existingSecret) }}
{{- $security := not .Values.security.existingSecret }}
{{- $s3 := and .Values.s3.accessKeyId .Values.s3.secretAccessKey (not .Values.s3.existingSecret) }}
{{- $redis := and .Values.redis.url (not .Values.redis.existingSecret) }}
{{- $amqp := and .Values.rabbitmq.url (not .Values.rabbitmq.existingSecret) }}
{{- if or $db $security $s3 $redis $amqp }}true{{- end }}
{{- end }}

{{/* Volume mounts of every Packyard container. */}}
{{- define "packyard.volumeMounts" -}}
- name: config
  mountPath: /etc/packyard
  readOnly: true
- name: data
  mountPath: /var/lib/packyard
- name: tmp
  mountPath: /tmp
{{- end }}

{{/* Volumes; call with (dict "ctx" $ "persistent" bool "configMap" name). */}}
{{- define "packyard.volumes" -}}
- name: config
  configMap:
    name: {{ .configMap }}
- name: data
{{- if .persistent }}
  persistentVolumeClaim:
    claimName: {{ include "packyard.claimName" .ctx }}
{{- else }}
  emptyDir: {}
{{- end }}
- name: tmp
  emptyDir: {}
{{- end }}

{{- define "packyard.probes" -}}
startupProbe:
  httpGet:
    path: /healthz
    port: management
  periodSeconds: {{ .Values.probes.startup.periodSeconds }}
  timeoutSeconds: {{ .Values.probes.startup.timeoutSeconds }}
  failureThreshold: {{ .Values.probes.startup.failureThreshold }}
readinessProbe:
  httpGet:
    path: /readyz
    port: management
  periodSeconds: {{ .Values.probes.readiness.periodSeconds }}
  timeoutSeconds: {{ .Values.probes.readiness.timeoutSeconds }}
  failureThreshold: {{ .Values.probes.readiness.failureThreshold }}
livenessProbe:
  httpGet:
    path: /healthz
    port: management
  periodSeconds: {{ .Values.probes.liveness.periodSeconds }}
  timeoutSeconds: {{ .Values.probes.liveness.timeoutSeconds }}
  failureThreshold: {{ .Values.probes.liveness.failureThreshold }}
{{- end }}

{{/* server.shutdown_timeout_secs (after extraConfig) plus 10 seconds to exit. */}}
{{- define "packyard.terminationGracePeriod" -}}
{{- $cfg := include "packyard.configMap" . | fromJson }}
{{- add (int $cfg.server.shutdown_timeout_secs) 10 }}
{{- end }}

{{/* Pod annotations that roll the pods when the configuration or the chart Secret changes. */}}
{{- define "packyard.checksums" -}}
checksum/config: {{ include "packyard.configMap" . | sha256sum }}
{{- if include "packyard.createSecret" . }}
checksum/secret: {{ include (print $.Template.BasePath "/secret.yaml") . | sha256sum }}
{{- end }}
{{- end }}

{{/* Scheduling for a component; call with (dict "ctx" $ "component" "api" "values" .Values.api). */}}
{{- define "packyard.scheduling" -}}
{{- $v := .values }}
{{- with $v.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if $v.affinity }}
affinity:
  {{- toYaml $v.affinity | nindent 2 }}
{{- else if eq $v.podAntiAffinity "hard" }}
affinity:
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "packyard.componentSelectorLabels" . | nindent 12 }}
{{- else if eq $v.podAntiAffinity "soft" }}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- include "packyard.componentSelectorLabels" . | nindent 14 }}
{{- end }}
{{- if $v.topologySpreadConstraints }}
{{- $constraints := list }}
{{- range $v.topologySpreadConstraints }}
{{- $c := deepCopy . }}
{{- if not (hasKey $c "labelSelector") }}
{{- $_ := set $c "labelSelector" (dict "matchLabels" (include "packyard.componentSelectorLabels" $ | fromYaml)) }}
{{- end }}
{{- $constraints = append $constraints $c }}
{{- end }}
topologySpreadConstraints:
  {{- toYaml $constraints | nindent 2 }}
{{- end }}
{{- end }}
