{{/*
eskv.statefulset renders one component as a StatefulSet, its headless
governing Service and its PodDisruptionBudget. A StatefulSet so that each
replica keeps its name, which is its static Kafka group member id
(ESKV_*_ID = metadata.name: eskv-writer-0, eskv-projector-0, …), across
rescheduling: a restarted member takes its partitions back without a
rebalance or a session timeout.
Arguments (a dict): root, component, port, idEnv, args, env (YAML list
text), mounts, volumes, pdb (YAML text of the PDB's minAvailable or
maxUnavailable), and optionally scheme (the probes': HTTPS when the
component serves HTTPS, which also names the headless Service's port
https for the ServiceMonitor) and publishNotReady (the headless Service
publishes the pods' DNS names before they are ready: other writers
forward to a writer by its name while it catches up).
*/}}
{{- define "eskv.statefulset" -}}
{{- $root := .root -}}
{{- $ctx := dict "root" .root "component" .component -}}
{{- $name := include "eskv.name" $ctx -}}
{{- $v := index $root.Values .component -}}
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {{ $name }}
  labels:
    {{- include "eskv.labels" $ctx | nindent 4 }}
spec:
  serviceName: {{ $name }}-headless
  replicas: {{ $v.replicas }}
  podManagementPolicy: Parallel
  selector:
    matchLabels:
      {{- include "eskv.selectorLabels" $ctx | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "eskv.labels" $ctx | nindent 8 }}
      annotations:
        # Roll the pods when the shared settings change.
        checksum/config: {{ include (print $root.Template.BasePath "/configmap.yaml") $root | sha256sum }}
    spec:
      {{- with include "eskv.serviceAccountName" $root }}
      serviceAccountName: {{ . }}
      {{- end }}
      automountServiceAccountToken: {{ $root.Values.serviceAccount.automountServiceAccountToken }}
      terminationGracePeriodSeconds: 30
      securityContext:
        {{- include "eskv.podSecurityContext" $root | nindent 8 }}
      affinity:
        {{- include "eskv.affinity" $ctx | nindent 8 }}
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets: {{ toYaml . | nindent 8 }}
      {{- end }}
      {{- with $root.Values.nodeSelector }}
      nodeSelector: {{ toYaml . | nindent 8 }}
      {{- end }}
      {{- with $root.Values.tolerations }}
      tolerations: {{ toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: {{ .component }}
          image: {{ include "eskv.image" $ctx }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          {{- with .args }}
          args: {{ toJson . }}
          {{- end }}
          envFrom: [{configMapRef: {name: {{ include "eskv.fullname" $root }}}}]
          env:
            - name: {{ .idEnv }}
              valueFrom: {fieldRef: {fieldPath: metadata.name}}
            {{- with .env | trim }}{{ . | nindent 12 }}{{ end }}
            {{- with include "eskv.kafkaEnv" $root | trim }}{{ . | nindent 12 }}{{ end }}
            {{- with include "eskv.extraEnv" (dict "root" $root "component" .component "chartEnv" (printf "- {name: %s}\n%s\n%s" .idEnv (.env | trim) (include "eskv.kafkaEnv" $root | trim))) }}{{ . | nindent 12 }}{{ end }}
          ports: [{name: http, containerPort: {{ .port }}}]
          {{- include "eskv.probes" . | nindent 10 }}
          securityContext:
            {{- include "eskv.containerSecurityContext" $root | nindent 12 }}
          resources:
            {{- toYaml $v.resources | nindent 12 }}
          volumeMounts:
            - {name: tmp, mountPath: /tmp}
            {{- with .mounts | trim }}{{ . | nindent 12 }}{{ end }}
            {{- with include "eskv.kafkaMounts" $root | trim }}{{ . | nindent 12 }}{{ end }}
            {{- with concat $root.Values.extraVolumeMounts $v.extraVolumeMounts }}{{ toYaml . | nindent 12 }}{{ end }}
      volumes:
        - name: tmp
          emptyDir: {sizeLimit: 64Mi}
        {{- with .volumes | trim }}{{ . | nindent 8 }}{{ end }}
        {{- with include "eskv.kafkaVolumes" $root | trim }}{{ . | nindent 8 }}{{ end }}
        {{- with concat $root.Values.extraVolumes $v.extraVolumes }}{{ toYaml . | nindent 8 }}{{ end }}
---
# The StatefulSet's governing Service (stable pod DNS names; scrape target,
# which the ServiceMonitor finds by eskv.io/scrape).
apiVersion: v1
kind: Service
metadata:
  name: {{ $name }}-headless
  labels:
    {{- include "eskv.labels" $ctx | nindent 4 }}
    eskv.io/scrape: "true"
spec:
  clusterIP: None
  {{- if .publishNotReady }}
  publishNotReadyAddresses: true
  {{- end }}
  selector:
    {{- include "eskv.selectorLabels" $ctx | nindent 4 }}
  ports: [{name: {{ if eq (.scheme | default "") "HTTPS" }}https{{ else }}http{{ end }}, port: {{ .port }}, targetPort: http}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ $name }}
  labels:
    {{- include "eskv.labels" $ctx | nindent 4 }}
spec:
  {{- .pdb | nindent 2 }}
  selector:
    matchLabels:
      {{- include "eskv.selectorLabels" $ctx | nindent 6 }}
{{- if $root.Values.networkPolicy.enabled }}
---
# Ingress only on the component's port (API or metrics/health); egress
# open: Kafka, Postgres, ClickHouse and DNS are wherever you run them.
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ $name }}
  labels:
    {{- include "eskv.labels" $ctx | nindent 4 }}
spec:
  podSelector:
    matchLabels:
      {{- include "eskv.selectorLabels" $ctx | nindent 6 }}
  policyTypes: [Ingress, Egress]
  ingress:
    - ports: [{port: http, protocol: TCP}]
  egress:
    - {}
{{- end }}
{{- end -}}
