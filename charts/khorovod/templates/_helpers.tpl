{{- define "khorovod.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "khorovod.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "khorovod.labels" -}}
app.kubernetes.io/name: {{ include "khorovod.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: operator
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "khorovod.selectorLabels" -}}
app.kubernetes.io/name: {{ include "khorovod.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "khorovod.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "khorovod.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The operator's permissions: exactly the verbs it uses (see docs/install.md). */}}
{{- define "khorovod.rules" -}}
- apiGroups: [khorovod.dev]
  resources: [horovodjobs]
  verbs: [get, list, watch, delete]
- apiGroups: [khorovod.dev]
  resources: [horovodjobs/status]
  verbs: [update]
- apiGroups: [khorovod.dev]
  resources: [horovodjobs/finalizers]
  verbs: [update]
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, delete]
- apiGroups: [""]
  resources: [services]
  verbs: [get, list, watch, create]
- apiGroups: [""]
  resources: [secrets]
  verbs: [create]
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{- if .Values.operator.disruptionBudgets }}
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [create, patch]
{{- end }}
{{- if .Values.operator.gangScheduling }}
- apiGroups: [scheduling.x-k8s.io]
  resources: [podgroups]
  verbs: [create]
{{- end }}
{{- if .Values.operator.kueue }}
- apiGroups: [kueue.x-k8s.io]
  resources: [workloads]
  verbs: [get, list, watch, create]
- apiGroups: [kueue.x-k8s.io]
  resources: [workloads/status]
  verbs: [update]
# Cluster-scoped: read only through the ClusterRole (rbac.namespaced=false).
- apiGroups: [kueue.x-k8s.io]
  resources: [resourceflavors]
  verbs: [get]
{{- end }}
{{- end -}}
