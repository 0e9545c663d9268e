{{/*
Settings that only work together with another value. Each incomplete one fails the
render (helm install, upgrade, template and lint) with a message naming the value to
set; all of them are listed at once. Included from deployment.yaml, which every
release renders. (values.schema.json checks types and ranges; a conditional there
would be reported by helm as a bare "'allOf' failed".)
*/}}
{{- define "quota-service.validate" -}}
{{- $errors := list }}
{{- if and (eq .Values.redis.mode "single") (not .Values.redis.existingSecret) (not .Values.redis.host) }}
{{- $errors = append $errors "redis.host is required with redis.mode single: set it to your Redis Service, e.g. --set redis.host=redis-master.redis.svc (or redis.existingSecret to a Secret holding the whole redis:// URL; redis.mode=none runs without Redis, for trials only)" }}
{{- end }}
{{- if and (eq .Values.redis.mode "cluster") (not .Values.redis.existingSecret) (not .Values.redis.seeds) }}
{{- $errors = append $errors "redis.seeds is required with redis.mode cluster: list seed nodes as host:port, e.g. --set redis.seeds={redis-cluster-0.redis-cluster-headless.redis.svc:6379} (or redis.existingSecret to a Secret holding them)" }}
{{- end }}
{{- if and (not .Values.redis.existingSecret) (not .Values.redis.tls.enabled) }}
{{- if .Values.redis.tls.caSecret }}
{{- $errors = append $errors "redis.tls.caSecret needs TLS to Redis: set redis.tls.enabled=true (the service refuses a CA next to a plain redis:// connection), or leave redis.tls.caSecret empty" }}
{{- end }}
{{- if .Values.redis.tls.clientCertSecret }}
{{- $errors = append $errors "redis.tls.clientCertSecret needs TLS to Redis: set redis.tls.enabled=true (the service refuses a client certificate next to a plain redis:// connection), or leave redis.tls.clientCertSecret empty" }}
{{- end }}
{{- end }}
{{- if and .Values.auth.enabled (not .Values.auth.existingSecret) (not .Values.auth.callers) }}
{{- $errors = append $errors "auth.enabled needs the callers file: set auth.callers to its text, or auth.existingSecret to a Secret holding it (under the key auth.existingSecretKey, callers.yaml by default)" }}
{{- end }}
{{- if and .Values.tls.enabled (not .Values.tls.secretName) }}
{{- $errors = append $errors "tls.enabled needs tls.secretName: set it to a kubernetes.io/tls Secret with tls.crt and tls.key, e.g. --set tls.secretName=quota-service-tls" }}
{{- end }}
{{- if and (eq .Values.redis.mode "none") (gt (int .Values.config.workers) 1) }}
{{- $errors = append $errors "config.workers above 1 needs Redis: the embedded store (redis.mode none) is per process, so each worker would keep its own counts; set redis.mode and its address, or config.workers=1" }}
{{- end }}
{{- if $errors }}
{{- fail (printf "incomplete values:\n- %s" (join "\n- " $errors)) }}
{{- end }}
{{- end }}
