{{/* Names: <release>-<component>; "eskv" as the release gives eskv-writer. */}}
{{- define "eskv.fullname" -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{- define "eskv.name" -}}
{{ include "eskv.fullname" .root }}-{{ .component }}
{{- end -}}

{{/* The pods' ServiceAccount: the chart's (serviceAccount.create), an
existing one (serviceAccount.name), or none named (the namespace's default). */}}
{{- define "eskv.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{ default (include "eskv.fullname" .) .Values.serviceAccount.name }}
{{- else -}}
{{ .Values.serviceAccount.name }}
{{- end -}}
{{- end -}}

{{- define "eskv.selectorLabels" -}}
app.kubernetes.io/name: {{ include "eskv.name" . }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{- define "eskv.labels" -}}
{{ include "eskv.selectorLabels" . }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: eskv
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{/* The component's image: registry/name, pinned by digest or tag (never latest). */}}
{{- define "eskv.image" -}}
{{- $img := .root.Values.image -}}
{{- $name := index $img .component -}}
{{- if $img.digest -}}
{{ $img.registry }}/{{ $name }}@{{ $img.digest }}
{{- else -}}
{{- if or (not $img.tag) (eq (toString $img.tag) "latest") -}}
{{- fail "image.tag must be a pinned release tag (or set image.digest): latest and empty are refused" -}}
{{- end -}}
{{ $img.registry }}/{{ $name }}:{{ $img.tag }}
{{- end -}}
{{- end -}}

{{/* Pod Security "restricted": non-root (distroless nonroot, 65532), no
privilege escalation, every capability dropped, RuntimeDefault seccomp,
read-only root filesystem (writable /tmp from an emptyDir). */}}
{{- define "eskv.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{- define "eskv.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
allowPrivilegeEscalation: false
privileged: false
readOnlyRootFilesystem: true
capabilities: {drop: [ALL]}
seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{/* Spread a component's pods over nodes: two writers on one node would
both go when it does. Preferred, so a small cluster still schedules. */}}
{{- define "eskv.affinity" -}}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "eskv.selectorLabels" . | nindent 12 }}
{{- end -}}

{{/* Kafka TLS and SASL settings (ESKV_KAFKA_*), shared by every component. */}}
{{- define "eskv.kafkaEnv" -}}
{{- $k := .Values.kafka -}}
{{- if $k.tls.enabled }}
- {name: ESKV_KAFKA_TLS, value: "true"}
{{- if $k.tls.serverName }}
- {name: ESKV_KAFKA_TLS_SERVER_NAME, value: {{ $k.tls.serverName | quote }}}
{{- end }}
{{- if $k.tls.secretName }}
- {name: ESKV_KAFKA_TLS_CA_FILE, value: /etc/eskv/kafka-tls/{{ $k.tls.caKey }}}
{{- if $k.tls.clientCert }}
- {name: ESKV_KAFKA_TLS_CERT_FILE, value: /etc/eskv/kafka-tls/{{ $k.tls.certKey }}}
- {name: ESKV_KAFKA_TLS_KEY_FILE, value: /etc/eskv/kafka-tls/{{ $k.tls.keyKey }}}
{{- end }}
{{- end }}
{{- end }}
{{- if $k.sasl.mechanism }}
{{- if not $k.sasl.secretName }}{{ fail "kafka.sasl.secretName is required with kafka.sasl.mechanism" }}{{ end }}
- {name: ESKV_KAFKA_SASL_MECHANISM, value: {{ $k.sasl.mechanism | quote }}}
- name: ESKV_KAFKA_SASL_USERNAME
  valueFrom: {secretKeyRef: {name: {{ $k.sasl.secretName }}, key: {{ $k.sasl.usernameKey }}}}
- {name: ESKV_KAFKA_SASL_PASSWORD_FILE, value: /etc/eskv/kafka-sasl/{{ $k.sasl.passwordKey }}}
{{- end }}
{{- end -}}

{{- define "eskv.kafkaMounts" -}}
{{- $k := .Values.kafka -}}
{{- if and $k.tls.enabled $k.tls.secretName }}
- {name: kafka-tls, mountPath: /etc/eskv/kafka-tls, readOnly: true}
{{- end }}
{{- if $k.sasl.mechanism }}
- {name: kafka-sasl, mountPath: /etc/eskv/kafka-sasl, readOnly: true}
{{- end }}
{{- end -}}

{{- define "eskv.kafkaVolumes" -}}
{{- $k := .Values.kafka -}}
{{- if and $k.tls.enabled $k.tls.secretName }}
- name: kafka-tls
  secret: {secretName: {{ $k.tls.secretName }}}
{{- end }}
{{- if $k.sasl.mechanism }}
- name: kafka-sasl
  secret:
    secretName: {{ $k.sasl.secretName }}
    items: [{key: {{ $k.sasl.passwordKey }}, path: {{ $k.sasl.passwordKey }}}]
{{- end }}
{{- end -}}

{{/* A component's extra environment: the global extraEnv, then its own, one
entry per name (its own wins: Kubernetes would take the last, kube-score
refuses duplicates). A name the chart sets itself (chartEnv, YAML list
text) is refused: its value is the way to change it. The ConfigMap's
settings (ESKV_BROKERS, ESKV_LOG_LEVEL, …) come through envFrom, which env
overrides. */}}
{{- define "eskv.extraEnv" -}}
{{- $v := index .root.Values .component -}}
{{- $byName := dict -}}
{{- $order := list -}}
{{- range concat .root.Values.extraEnv $v.extraEnv -}}
{{- if not (hasKey $byName .name) }}{{ $order = append $order .name }}{{ end -}}
{{- $_ := set $byName .name . -}}
{{- end -}}
{{- $component := .component -}}
{{- range fromYamlArray .chartEnv -}}
{{- if hasKey $byName .name -}}
{{- fail (printf "extraEnv (or %s.extraEnv) sets %s, which the chart sets for the %s: change it through the chart's value (docs/deploy.md)" $component .name $component) -}}
{{- end -}}
{{- end -}}
{{- $merged := list -}}
{{- range $order }}{{ $merged = append $merged (index $byName .) }}{{ end -}}
{{- with $merged }}{{ toYaml . }}{{ end -}}
{{- end -}}

{{/* Probes: liveness on /healthz (the process answers), readiness on
/readyz (it may take traffic: joined, caught up, dependencies up; for the
writer also no forward loop). The argument: the statefulset's dict, whose
scheme ("" or HTTPS: the writer with writer.tls.enabled) they use. */}}
{{- define "eskv.probes" -}}
{{- $scheme := "" -}}
{{- with .scheme }}{{ $scheme = printf ", scheme: %s" . }}{{ end -}}
readinessProbe:
  httpGet: {path: /readyz, port: http{{ $scheme }}}
  periodSeconds: 5
  failureThreshold: 2
livenessProbe:
  httpGet: {path: /healthz, port: http{{ $scheme }}}
  periodSeconds: 10
  failureThreshold: 6
startupProbe:
  httpGet: {path: /healthz, port: http{{ $scheme }}}
  periodSeconds: 2
  failureThreshold: 60
{{- end -}}
