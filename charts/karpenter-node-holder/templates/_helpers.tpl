{{/* The name: `node-holder`, like the kustomize base, unless overridden. */}}
{{- define "node-holder.name" -}}
{{- default "node-holder" .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Object names: the release name if it already contains the name (`helm install node-holder`
gives the kustomize base's names), else <release>-<name>.
*/}}
{{- define "node-holder.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := include "node-holder.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "node-holder.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels: the same two the kustomize base puts on everything. */}}
{{- define "node-holder.selectorLabels" -}}
app.kubernetes.io/name: {{ include "node-holder.name" . }}
app.kubernetes.io/part-of: karpenter-node-holder
{{- end }}

{{- define "node-holder.labels" -}}
{{ include "node-holder.selectorLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ include "node-holder.tag" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ include "node-holder.chart" . }}
{{- end }}

{{- define "node-holder.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "node-holder.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name: name an existing ServiceAccount when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "node-holder.tag" -}}
{{- if kindIs "map" .Values.image }}
{{- default .Chart.AppVersion .Values.image.tag }}
{{- else }}
{{- .Chart.AppVersion }}
{{- end }}
{{- end }}

{{/* repository:tag, or repository@digest when a digest is given. */}}
{{- define "node-holder.image" -}}
{{- if not (kindIs "map" .Values.image) }}
{{- fail (printf "image: the original chart's image string %q is now a map: set image.repository and image.tag (or image.digest) instead" (toString .Values.image)) }}
{{- end }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (include "node-holder.tag" .) }}
{{- end }}
{{- end }}

{{/*
The settings ConfigMap's data: one entry per setting, named after the environment variable the
CLI reads, in the kustomize base's order, then `settings` sorted by name. Every pod (the runs,
the uninstall hook, the helm test, a `kubectl run` one-off command) reads it with `envFrom`, and
the admission policy takes it as its parameter: one place for the settings. The schema keeps the
two sets apart, so no name repeats.
*/}}
{{- define "node-holder.settingsData" -}}
{{- $v := .Values }}
{{- $data := list
  (list "HOLD_DURATION" $v.holdDuration)
  (list "HOLD_ANNOTATION" $v.holdAnnotation)
  (list "HOLD_SCOPE" $v.holdScope)
  (list "HOLD_GROUP_LABEL" $v.holdGroupLabel)
  (list "HOLD_TRIGGER_SELECTOR" $v.holdTriggerSelector)
  (list "HOLD_NODE_SELECTOR" $v.holdNodeSelector)
  (list "HOLD_MAX_DURATION" $v.holdMaxDuration)
  (list "NODE_HOLDER_MECHANISM" $v.mechanism)
  (list "NODE_HOLDER_DRY_RUN" $v.dryRun)
  (list "NODE_HOLDER_EVENTS" $v.events)
  (list "NODE_HOLDER_TIMEOUT" $v.timeout)
  (list "NODE_HOLDER_LOG_FORMAT" $v.logFormat)
  (list "NODE_HOLDER_OUTPUT" $v.output) }}
{{- range $data }}
{{ index . 0 }}: {{ include "node-holder.text" (index . 1) | quote }}
{{- end }}
{{- range $name, $value := $v.settings }}
{{ $name }}: {{ include "node-holder.text" $value | quote }}
{{- end }}
{{- end }}

{{- define "node-holder.settingsName" -}}
{{- printf "%s-settings" (include "node-holder.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The containers' environment: the settings ConfigMap, whole. */}}
{{- define "node-holder.envFrom" -}}
envFrom:
  - configMapRef:
      name: {{ include "node-holder.settingsName" . }}
{{- end }}

{{/* true or false, as the CLI reads a boolean setting's text (`dryRun: "yes"` is true). */}}
{{- define "node-holder.isTrue" -}}
{{- has (lower (trim (include "node-holder.text" .))) (list "true" "yes" "on" "1") }}
{{- end }}

{{/* A value as the CLI reads it: null is empty, whole numbers as integers (20, not 2e+01; -0 as 0). */}}
{{- define "node-holder.text" -}}
{{- if kindIs "invalid" . }}
{{- else if kindIs "float64" . }}
{{- if eq . (floor .) }}{{ int64 . }}{{ else }}{{ toString . }}{{ end }}
{{- else }}
{{- toString . }}
{{- end }}
{{- end }}

{{/* The pod spec parts the CronJob's pod, the uninstall hook and the helm test share. */}}
{{- define "node-holder.podPlacement" -}}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.podSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "node-holder.hookName" -}}
{{- printf "%s-uninstall" (include "node-holder.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The budget mechanism's RBAC rule (rbac.yaml, the uninstall hook): NodePools, when used. */}}
{{- define "node-holder.nodepoolRule" -}}
{{- if ne (include "node-holder.text" .Values.mechanism | trim | lower) "annotation" }}
- apiGroups: ["karpenter.sh"]
  resources: ["nodepools"]
  verbs: ["get", "list", "patch"]
{{- end }}
{{- end }}
