{{/*
Names. fullname is the release's prefix of every object (at most 63
characters less room for the longest suffix, "-nats-headless").
*/}}
{{- define "sudoku.name" -}}
{{- .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{- define "sudoku.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object; call with (dict "ctx" $ "component" "worker"). */}}
{{- define "sudoku.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
{{ include "sudoku.selectorLabels" . }}
{{- end -}}

{{/* The labels selectors match on: the release and the component. */}}
{{- define "sudoku.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sudoku.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "sudoku.image" -}}
{{- printf "%s:%s" .Values.image.repository .Values.image.tag -}}
{{- end -}}

{{/* The NATS URL every sudoku process uses. */}}
{{- define "sudoku.natsURL" -}}
{{- if .Values.nats.enabled -}}
{{- printf "nats://%s-nats:4222" (include "sudoku.fullname" .) -}}
{{- else -}}
{{- required "nats.external.url is needed when nats.enabled is false" .Values.nats.external.url -}}
{{- end -}}
{{- end -}}

{{/* The Redis addresses, as a list. */}}
{{- define "sudoku.redisAddrs" -}}
{{- if .Values.redis.enabled -}}
{{- list (printf "%s-redis:6379" (include "sudoku.fullname" .)) | toJson -}}
{{- else -}}
{{- if not .Values.redis.external.addrs -}}
{{- fail "redis.external.addrs is needed when redis.enabled is false" -}}
{{- end -}}
{{- .Values.redis.external.addrs | toJson -}}
{{- end -}}
{{- end -}}

{{/*
The sudoku configuration file: what the chart derives from its values,
under the operator's config (whose keys win).
*/}}
{{- define "sudoku.config" -}}
{{- $derived := dict
  "nats" (dict "url" (include "sudoku.natsURL" .))
  "redis" (dict "addrs" (include "sudoku.redisAddrs" . | fromJsonArray))
  "queue" (dict "replicas" (ternary (int .Values.nats.replicas) 1 .Values.nats.enabled))
  "worker" (dict "shutdown_timeout" (printf "%ds" (int .Values.worker.shutdownTimeoutSeconds)))
  "log" (dict "format" "json")
-}}
{{- mergeOverwrite $derived (deepCopy .Values.config) | toYaml -}}
{{- end -}}

{{/*
The environment and mounts of a sudoku container. Call with
(dict "ctx" $ "role" .Values.roles.worker); role is ignored unless roles
are on. Passwords are files from the role's Secret; the environment only
names them.
*/}}
{{- define "sudoku.env" -}}
- name: SUDOKU_CONFIG
  value: /etc/sudoku-chart/sudoku.yaml
{{- if .ctx.Values.roles.enabled }}
- name: SUDOKU_NATS_USER
  value: {{ .role.user | quote }}
- name: SUDOKU_NATS_PASSWORD_FILE
  value: /run/secrets/sudoku/nats_password
- name: SUDOKU_REDIS_USERNAME
  value: {{ .role.user | quote }}
- name: SUDOKU_REDIS_PASSWORD_FILE
  value: /run/secrets/sudoku/redis_password
{{- if and .ctx.Values.roles.proof (eq (get . "proof") "key") }}
- name: SUDOKU_PROOF_KEY
  value: /run/secrets/sudoku/proof_key.pem
{{- else if and .ctx.Values.roles.proof (eq (get . "proof") "trusted") }}
- name: SUDOKU_PROOF_TRUSTED
  value: /run/secrets/sudoku/proof_trusted.pem
{{- end }}
{{- end }}
{{- end -}}

{{- define "sudoku.volumeMounts" -}}
- name: config
  mountPath: /etc/sudoku-chart
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- if .ctx.Values.roles.enabled }}
- name: role
  mountPath: /run/secrets/sudoku
  readOnly: true
{{- end }}
{{- end -}}

{{- define "sudoku.volumes" -}}
- name: config
  configMap:
    name: {{ include "sudoku.fullname" .ctx }}-config
- name: tmp
  emptyDir: {}
{{- if .ctx.Values.roles.enabled }}
- name: role
  secret:
    secretName: {{ required "roles: each component needs a secret" .role.secret }}
    defaultMode: 0440
    items:
      - key: nats_password
        path: nats_password
      - key: redis_password
        path: redis_password
      {{- if and .ctx.Values.roles.proof (eq (get . "proof") "key") }}
      - key: proof_key.pem
        path: proof_key.pem
      {{- else if and .ctx.Values.roles.proof (eq (get . "proof") "trusted") }}
      - key: proof_trusted.pem
        path: proof_trusted.pem
      {{- end }}
{{- end }}
{{- end -}}

{{/* The pod security context of the sudoku image (distroless nonroot). */}}
{{- define "sudoku.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "sudoku.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/* A checksum of the configuration, so that pods roll when it changes. */}}
{{- define "sudoku.configChecksum" -}}
{{- include "sudoku.config" . | sha256sum -}}
{{- end -}}

{{/* The NATS servers' configuration file (nats.conf). */}}
{{- define "sudoku.natsConf" -}}
{{- $fullname := include "sudoku.fullname" . -}}
{{- $replicas := int .Values.nats.replicas -}}
# Each pod's name (an environment variable set from the pod).
server_name: $POD_NAME
listen: "0.0.0.0:4222"
# /healthz for the probes.
http_port: 8222
pid_file: "/var/run/nats/nats.pid"
max_payload: {{ .Values.nats.maxPayload }}
# On stop (preStop), clients move to the other servers over 30 s.
lame_duck_duration: "30s"
lame_duck_grace_period: "10s"
jetstream {
  store_dir: "/data"
  max_memory_store: {{ .Values.nats.jetstream.maxMemoryStore }}
  max_file_store: {{ .Values.nats.jetstream.maxFileStore }}
}
{{- if gt $replicas 1 }}
cluster {
  name: {{ .Values.nats.clusterName | quote }}
  listen: "0.0.0.0:6222"
  # Every server lists all of them; a server ignores the route to itself.
  routes: [
    {{- range $i := until $replicas }}
    "nats://{{ $fullname }}-nats-{{ $i }}.{{ $fullname }}-nats-headless:6222"
    {{- end }}
  ]
}
{{- end }}
{{- if .Values.roles.enabled }}
# The users of `sudoku roles init` (bcrypt hashes), from the Secret
# roles.serverSecret.
include "users/nats-users.conf"
{{- end }}
{{- end -}}
