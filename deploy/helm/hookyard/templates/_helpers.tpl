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
{{- required "postgres.existingSecret or secrets.existingSecret is required" (.Values.postgres.existingSecret | default .Values.secrets.existingSecret) -}}
{{- end -}}

{{/* The Secret keys a component reads: secrets.keys.<values key>. The
migrate Job reads none of them. dict root key */}}
{{- define "hookyard.secretKeys" -}}
{{- $keys := list -}}
{{- if ne .key "migrate" -}}
{{- $keys = index .root.Values.secrets.keys .key | default list -}}
{{- end -}}
{{- toYaml $keys -}}
{{- end -}}

{{/* Environment of a hookyard container. Secrets only as _FILE paths, and
only those its component reads. The ops and metrics ports bind to the pod
IP; the receiver's webhook port to every interface (a mesh sidecar may
forward to loopback). dict root key */}}
{{- define "hookyard.env" -}}
{{- $root := .root -}}
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
- name: KAFKA_BROKERS
  value: {{ required "kafka.brokers is required" $root.Values.kafka.brokers | quote }}
- name: HTTP_ADDR
  value: "0.0.0.0:8080"
- name: OPS_ADDR
  value: "$(POD_IP):8081"
- name: METRICS_ADDR
  value: "$(POD_IP):9100"
- name: LOG_LEVEL
  value: {{ $root.Values.logLevel | quote }}
- name: DATABASE_URL_FILE
  value: /var/run/secrets/hookyard/postgres/DATABASE_URL
{{- range include "hookyard.secretKeys" . | fromYamlArray }}
- name: {{ . }}_FILE
  value: /var/run/secrets/hookyard/app/{{ . }}
{{- end }}
{{- range $k, $v := $root.Values.env }}
{{- if regexMatch "(?i)(SECRET|TOKEN|PASSWORD|API_KEY|DATABASE_URL)" $k }}
{{- fail (printf "env.%s looks like a secret: put it in the Secret named by secrets.existingSecret and list it in secrets.keys" $k) }}
{{- end }}
- name: {{ $k }}
  value: {{ $v | quote }}
{{- end }}
{{- if $root.Values.config }}
- name: HOOKYARD_CONFIG
  value: /etc/hookyard-override/hookyard.yaml
{{- end }}
{{- end -}}

{{/* dict root key */}}
{{- define "hookyard.volumeMounts" -}}
{{- if include "hookyard.secretKeys" . | fromYamlArray }}
- name: app-secrets
  mountPath: /var/run/secrets/hookyard/app
  readOnly: true
{{- end }}
- name: postgres-secret
  mountPath: /var/run/secrets/hookyard/postgres
  readOnly: true
{{- if .root.Values.config }}
- name: config
  mountPath: /etc/hookyard-override
  readOnly: true
{{- end }}
{{- end -}}

{{/* Only the keys the component reads are projected into its pods: the
others are not on its filesystem at all. The migrate Job connects with the
schema owner's URL (postgres.ownerKey), the services with the data role's
(postgres.key). dict root key */}}
{{- define "hookyard.volumes" -}}
{{- $root := .root -}}
{{- $keys := include "hookyard.secretKeys" . | fromYamlArray -}}
{{- if $keys }}
- name: app-secrets
  secret:
    secretName: {{ required "secrets.existingSecret is required" $root.Values.secrets.existingSecret }}
    items:
      {{- range $keys }}
      - key: {{ . }}
        path: {{ . }}
      {{- end }}
{{- end }}
- name: postgres-secret
  secret:
    secretName: {{ include "hookyard.postgresSecret" $root }}
    items:
      - key: {{ ternary $root.Values.postgres.ownerKey $root.Values.postgres.key (eq .key "migrate") }}
        path: DATABASE_URL
{{- if $root.Values.config }}
- name: config
  configMap:
    name: {{ include "hookyard.fullname" $root }}-config
{{- end }}
{{- end -}}

{{/* Pod annotations: a config change rolls the pods. */}}
{{- define "hookyard.podAnnotations" -}}
checksum/config: {{ .Values.config | sha256sum }}
{{- end -}}
