{{/* Release-scoped name, at most 63 characters with the longest suffix. */}}
{{- define "hookyard.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "hookyard.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* The services: the subcommand each Deployment runs, its values key, the
port its probes ask and the port /metrics is served on. */}}
{{- define "hookyard.services" -}}
- {name: receiver, key: receiver, probePort: http, metricsPort: metrics}
- {name: outbox-relay, key: outboxRelay, probePort: metrics, metricsPort: metrics}
- {name: processor, key: processor, probePort: metrics, metricsPort: metrics}
- {name: reconciler, key: reconciler, probePort: metrics, metricsPort: metrics}
- {name: effects, key: effects, probePort: metrics, metricsPort: metrics}
- {name: api, key: api, probePort: ops, metricsPort: ops}
{{- end -}}

{{/* dict root component */}}
{{- define "hookyard.selectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* dict root component */}}
{{- define "hookyard.labels" -}}
{{ include "hookyard.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Values.image.tag | default .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{- define "hookyard.postgresSecret" -}}
{{- .Values.postgres.existingSecret | default .Values.secrets.existingSecret -}}
{{- end -}}

{{/* Environment of every hookyard container. Secrets only as _FILE paths. */}}
{{- define "hookyard.env" -}}
- name: KAFKA_BROKERS
  value: {{ required "kafka.brokers is required" .Values.kafka.brokers | quote }}
- name: HTTP_ADDR
  value: "0.0.0.0:8080"
- name: OPS_ADDR
  value: "0.0.0.0:8081"
- name: METRICS_ADDR
  value: "0.0.0.0:9100"
- name: LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
- name: DATABASE_URL_FILE
  value: /var/run/secrets/hookyard/postgres/DATABASE_URL
{{- range .Values.secrets.keys }}
- name: {{ . }}_FILE
  value: /var/run/secrets/hookyard/app/{{ . }}
{{- end }}
{{- range $k, $v := .Values.env }}
{{- if regexMatch "(?i)(SECRET|TOKEN|PASSWORD|API_KEY|DATABASE_URL)" $k }}
{{- fail (printf "env.%s looks like a secret: put it in the Secret named by secrets.existingSecret and list it in secrets.keys" $k) }}
{{- end }}
- name: {{ $k }}
  value: {{ $v | quote }}
{{- end }}
{{- if .Values.config }}
- name: HOOKYARD_CONFIG
  value: /etc/hookyard-override/hookyard.yaml
{{- end }}
{{- end -}}

{{- define "hookyard.volumeMounts" -}}
- name: app-secrets
  mountPath: /var/run/secrets/hookyard/app
  readOnly: true
- name: postgres-secret
  mountPath: /var/run/secrets/hookyard/postgres
  readOnly: true
{{- if .Values.config }}
- name: config
  mountPath: /etc/hookyard-override
  readOnly: true
{{- end }}
{{- end -}}

{{- define "hookyard.volumes" -}}
- name: app-secrets
  secret:
    secretName: {{ required "secrets.existingSecret is required" .Values.secrets.existingSecret }}
- name: postgres-secret
  secret:
    secretName: {{ include "hookyard.postgresSecret" . }}
    items:
      - key: {{ .Values.postgres.key }}
        path: DATABASE_URL
{{- if .Values.config }}
- name: config
  configMap:
    name: {{ include "hookyard.fullname" . }}-config
{{- end }}
{{- end -}}

{{/* Pod annotations: a config change rolls the pods. */}}
{{- define "hookyard.podAnnotations" -}}
checksum/config: {{ .Values.config | sha256sum }}
{{- end -}}
