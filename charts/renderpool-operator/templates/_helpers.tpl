{{/* Release-scoped name, at most 63 characters. */}}
{{- define "renderpool-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "renderpool-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "renderpool-operator.labels" -}}
{{ include "renderpool-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The operator image; the `helm test` hook runs it too (its `probe` command). */}}
{{- define "renderpool-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{- define "renderpool-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "renderpool-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- /* What the reconciler uses, verb by verb: it lists and watches RenderPools and writes their
       status by server-side apply (patch); it server-side applies (create + patch), watches and,
       for a Gotenberg pool or autoscaling turned off, deletes the children (the autoscaler is a
       HorizontalPodAutoscaler); it records Events. No get: every read comes from its watch
       caches. */}}
{{- define "renderpool-operator.rules" -}}
- apiGroups: [renderpool.dev]
  resources: [renderpools]
  verbs: [list, watch]
- apiGroups: [renderpool.dev]
  resources: [renderpools/status]
  verbs: [patch]
- apiGroups: [apps]
  resources: [deployments]
  verbs: [list, watch, create, patch, delete]
# Read only, for status: what each ReplicaSet's pods run, and pods that cannot be scheduled or
# started during a rollout.
- apiGroups: [apps]
  resources: [replicasets]
  verbs: [list, watch]
- apiGroups: [""]
  resources: [pods]
  verbs: [list, watch]
- apiGroups: [""]
  resources: [services, configmaps]
  verbs: [list, watch, create, patch, delete]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [list, watch, create, patch, delete]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [list, watch, create, patch, delete]
- apiGroups: [autoscaling]
  resources: [horizontalpodautoscalers]
  verbs: [list, watch, create, patch, delete]
# Job pools' autoscalers (KEDA); listed by name each pass, never watched, so the operator runs
# on clusters without KEDA.
- apiGroups: [keda.sh]
  resources: [scaledobjects]
  verbs: [list, create, patch, delete]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- end -}}

{{- /* One alerting rule of the PrometheusRule: name, expr, severity, summary and description
       from the caller; its `for`, the extra alert labels and the runbook link (the section
       named like the alert) from .rule (the prometheusRule values). */}}
{{- define "renderpool-operator.alert" -}}
- alert: {{ .name }}
  expr: |-
    {{- .expr | trim | nindent 4 }}
  for: {{ required (printf "prometheusRule.for.%s is required" .name) (index .rule.for .name) }}
  labels:
    {{- toYaml (merge (dict "severity" .severity) .rule.alertLabels) | nindent 4 }}
  annotations:
    {{- toYaml (dict "summary" .summary "description" .description "runbook_url" (printf "%s#%s" .rule.runbookUrl (lower .name))) | nindent 4 }}
{{- end -}}
