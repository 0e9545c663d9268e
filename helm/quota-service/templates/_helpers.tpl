{{/* Names and labels, as `helm create` makes them. */}}
{{- define "quota-service.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "quota-service.fullname" -}}
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

{{- define "quota-service.selectorLabels" -}}
app.kubernetes.io/name: {{ include "quota-service.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "quota-service.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "quota-service.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "quota-service.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "quota-service.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "quota-service.policiesConfigMap" -}}
{{- default (printf "%s-policies" (include "quota-service.fullname" .)) .Values.policies.existingConfigMap }}
{{- end }}

{{/*
terminationGracePeriodSeconds: the preStop sleep, then the service's own drain
(QUOTA_SHUTDOWN_GRACE_MS rounded up to whole seconds), then a margin for closing Redis
and exiting. Derived from the same value the container gets, so the kubelet never
SIGKILLs a pod that is still draining within its configured grace.
*/}}
{{- define "quota-service.terminationGracePeriodSeconds" -}}
{{- add .Values.lifecycle.preStopSleepSeconds (div (add .Values.config.shutdownGraceMs 999) 1000) .Values.lifecycle.terminationExtraSeconds }}
{{- end }}

{{/*
QUOTA_WORKERS, the service processes of a pod (docs/deploy.md): config.workers when
set; else one per core of the CPU limit (the Downward API rounds limits.cpu up to
whole cores) when there is a CPU limit and Redis; else 1. Without a CPU limit the
Downward API would give the node's allocatable CPUs, a worker count the memory limit
was not sized for; without Redis the embedded store is per process, so one.
workersFromCpuLimit is "true" when the CPU limit decides; workers is the number otherwise.
*/}}
{{- define "quota-service.workersFromCpuLimit" -}}
{{- $limits := .Values.resources.limits | default dict }}
{{- if and (not .Values.config.workers) (ne .Values.redis.mode "none") $limits.cpu }}true{{ end }}
{{- end }}

{{- define "quota-service.workers" -}}
{{- .Values.config.workers | default 1 | int }}
{{- end }}

{{/*
The port the probes ask grpc.health.v1 on: the gRPC port, or with TLS on it the
plaintext health-only port (QUOTA_HEALTH_ADDR), since the kubelet's gRPC probe
cannot speak TLS. A number, never a port name: the gRPC probe takes numbers only.
*/}}
{{- define "quota-service.probePort" -}}
{{- if .Values.tls.enabled }}{{ .Values.health.port }}{{ else }}{{ .Values.grpc.port }}{{ end }}
{{- end }}

{{/* The chart's own Secret holds the Redis connection string and/or the callers file, when they are not taken from existing Secrets. */}}
{{- define "quota-service.secretName" -}}
{{- printf "%s-secrets" (include "quota-service.fullname" .) }}
{{- end }}

{{- define "quota-service.redisInChartSecret" -}}
{{- if and (ne .Values.redis.mode "none") (not .Values.redis.existingSecret) }}true{{ end }}
{{- end }}

{{- define "quota-service.callersInChartSecret" -}}
{{- if and .Values.auth.enabled (not .Values.auth.existingSecret) }}true{{ end }}
{{- end }}

{{/*
The Redis connection string in the form the service reads (src/config/env.ts):
single: redis[s]://[user:password@]host:port/db for QUOTA_REDIS_URL;
cluster: comma-separated host:port seeds, or redis[s]:// URLs when TLS or a password
is needed, for QUOTA_REDIS_CLUSTER. User and password are URL-escaped (the service
decodes them); the service takes the password only inside this string.
*/}}
{{- define "quota-service.redisUserinfo" -}}
{{- if .Values.redis.password }}
{{- printf "%s:%s@" (urlquery .Values.redis.username) (urlquery .Values.redis.password) }}
{{- end }}
{{- end }}

{{- define "quota-service.redisConnection" -}}
{{- $scheme := ternary "rediss" "redis" .Values.redis.tls.enabled }}
{{- $userinfo := include "quota-service.redisUserinfo" . }}
{{- if eq .Values.redis.mode "single" }}
{{- printf "%s://%s%s:%d/%d" $scheme $userinfo .Values.redis.host (int .Values.redis.port) (int .Values.redis.db) }}
{{- else if eq .Values.redis.mode "cluster" }}
{{- $seeds := list }}
{{- range .Values.redis.seeds }}
{{- if or $.Values.redis.tls.enabled $userinfo }}
{{- $seeds = append $seeds (printf "%s://%s%s" $scheme $userinfo .) }}
{{- else }}
{{- $seeds = append $seeds . }}
{{- end }}
{{- end }}
{{- join "," $seeds }}
{{- end }}
{{- end }}
