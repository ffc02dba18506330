{{/*
Shared pieces. Object names are fixed (tessera-scheduler, tessera-webhook, ...): Tessera is one per
cluster, and the names match deploy/ so the chart and the kustomize tree describe the same objects.
*/}}

{{/* Selector labels of a component; immutable once installed, so nothing else goes in here. */}}
{{- define "tessera.selectorLabels" -}}
app.kubernetes.io/name: tessera
app.kubernetes.io/component: {{ . }}
{{- end }}

{{/*
metadata.labels of an object: dict "root" $, optionally "component" C and "extraLabels" MAP. The
selector labels win over commonLabels and extraLabels, then helm's own, then extraLabels.
*/}}
{{- define "tessera.labels" -}}
{{- $own := dict "app.kubernetes.io/instance" .root.Release.Name "app.kubernetes.io/managed-by" .root.Release.Service
      "app.kubernetes.io/version" .root.Chart.AppVersion
      "helm.sh/chart" (printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_") }}
{{- with .component }}
{{- $own = merge (include "tessera.selectorLabels" . | fromYaml) $own }}
{{- end }}
{{- toYaml (merge (dict) $own (.extraLabels | default dict) (.root.Values.commonLabels | default dict)) }}
{{- end }}

{{/*
The metadata block: dict "root" $ "name" NAME, and optionally "component" C, "namespaced" true
(in "namespace" NS, default the release namespace), "extraLabels" MAP.
*/}}
{{- define "tessera.metadata" -}}
metadata:
  name: {{ .name }}
  {{- if .namespaced }}
  namespace: {{ .namespace | default .root.Release.Namespace }}
  {{- end }}
  labels:
    {{- include "tessera.labels" . | nindent 4 }}
  {{- with .root.Values.commonAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}

{{/* Pod template metadata: dict "root" $ "component" C "values" COMPONENT-VALUES "annotations" MAP. */}}
{{- define "tessera.podMetadata" -}}
metadata:
  labels:
    {{- $selector := include "tessera.selectorLabels" .component | fromYaml }}
    {{- toYaml (merge $selector (.values.podLabels | default dict) (.root.Values.commonLabels | default dict)) | nindent 4 }}
  {{- $annotations := merge (dict) (.annotations | default dict) (.values.podAnnotations | default dict) }}
  {{- with $annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}

{{/* An image reference: dict "image" IMAGE-VALUES "root" $. */}}
{{- define "tessera.image" -}}
{{ .image.repository }}:{{ .image.tag | default .root.Chart.AppVersion }}
{{- end }}

{{/* Scheduling of a pod: nodeSelector, tolerations, affinity, priorityClassName, pull secrets. */}}
{{- define "tessera.podPlacement" -}}
{{- with .values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The hardened container securityContext every container of the chart runs with. */}}
{{- define "tessera.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities: {drop: [ALL]}
{{- end }}

{{/* Non-root pods: the image's numeric user 65532. */}}
{{- define "tessera.podSecurity" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile: {type: RuntimeDefault}
{{- end }}

{{/* The scheduler's configuration file: the values' config with the scheduler name. */}}
{{- define "tessera.schedulerConfig" -}}
{{- $config := deepCopy .Values.scheduler.config -}}
{{- $_ := set $config "schedulerName" .Values.schedulerName -}}
{{- toYaml $config -}}
{{- end }}

{{/*
"true" when the chart installs tessera monitor: monitor.enabled when set (true or false), else
whenever the isolation backend is hard (it exports the pods' regions; with interposer.source hostPath
it also prepares the folder they live in).
*/}}
{{- define "tessera.monitorEnabled" -}}
{{- if kindIs "bool" .Values.monitor.enabled }}{{ .Values.monitor.enabled }}{{ else }}{{ eq .Values.isolation "hard" }}{{ end }}
{{- end }}
