{{/*
Mode controller: `certctl controller`, one Deployment for every webhook of the cluster that
asks by annotation (docs/controller.md). Its RBAC comes from permissions.yaml's `controller`
rules like the other modes', with two scopes of its own: `watched` (the namespaces of
controller.namespaces, or all of them) and `release` (the Lease).
*/}}

{{/* Labels that select the controller's pods. */}}
{{- define "certctl.controllerSelectorLabels" -}}
{{ include "certctl.selectorLabels" . }}
app.kubernetes.io/component: controller
{{- end -}}

{{/* Whether the chart renders the controller's PodDisruptionBudget: "true" or "". */}}
{{- define "certctl.controllerPodDisruptionBudget" -}}
{{- $c := .Values.controller -}}
{{- $pdb := $c.podDisruptionBudget -}}
{{- $on := gt (int $c.replicas) 1 -}}
{{- if and (hasKey $pdb "enabled") (not (kindIs "invalid" $pdb.enabled)) -}}
{{- $on = $pdb.enabled -}}
{{- end -}}
{{- if $on -}}true{{- end -}}
{{- end -}}

{{/* The `certctl controller` command line (see certctl.secretArgs for the layout). */}}
{{- define "certctl.controllerArgs" -}}
{{- $c := .Values.controller -}}
{{- $cert := .Values.certificate -}}
- controller
{{- range $c.namespaces }}
- --namespace
- {{ . | quote }}
{{- end }}
{{- with $c.namespaceSelector }}
- --namespace-selector
- {{ . | quote }}
{{- end }}
{{- if $c.certManagerAnnotations }}
- --cert-manager-annotations
{{- end }}
- --workers
- {{ $c.workers | quote }}
- --resync
- {{ $c.resync | quote }}
- --leader-elect
- --lease-name
- {{ $c.leaseName | quote }}
- --health-addr
- {{ printf ":%d" (int $c.healthPort) | quote }}
- --metrics-addr
- {{ printf ":%d" (int $c.metricsPort) | quote }}
{{- range $flag, $value := dict "--key-type" $cert.keyType "--ca-validity" $cert.caValidity "--cert-validity" $cert.certValidity "--renew-before" $cert.renewBefore "--ca-overlap" $cert.caOverlap "--cluster-domain" $cert.clusterDomain "--ca-organization" $cert.caOrganization }}
{{- with $value }}
- {{ $flag }}
- {{ . | quote }}
{{- end }}
{{- end }}
{{- include "certctl.logArgs" . }}
{{- end -}}

{{/*
The controller's RBAC: a ClusterRole for the targets (and, watching every namespace, for
Services, Secrets, EndpointSlices and Events too), a ClusterRole of the watched rules bound
in each namespace of controller.namespaces, a Role in `default` for Events about the targets
when that namespace is not watched, and a Role in the release namespace for the Lease.
*/}}
{{- define "certctl.controllerRbac" -}}
{{- $namespaces := .Values.controller.namespaces -}}
{{- $name := include "certctl.clusterScopedName" . -}}
{{- $watchedName := printf "%s-watched" $name | trunc 253 | trimSuffix "-" -}}
{{- $account := dict "kind" "ServiceAccount" "name" (include "certctl.serviceAccountName" .) "namespace" .Release.Namespace -}}
{{- $watched := include "certctl.rbacRules" (dict "root" . "scope" "watched") | trim -}}
# Least privilege for `certctl controller`: the rules come from the chart's permissions.yaml,
# which lists each verb with the code path that needs it. Nothing is a wildcard. The
# annotations choose the objects at run time, so no rule can name them.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ $name }}
  labels:
    {{- include "certctl.labels" (dict "root" . "component" "rbac") | nindent 4 }}
rules:
  {{- include "certctl.rbacRules" (dict "root" . "scope" "cluster") | trim | nindent 2 }}
  {{- if not $namespaces }}
  {{- $watched | nindent 2 }}
  {{- end }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ $name }}
  labels:
    {{- include "certctl.labels" (dict "root" . "component" "rbac") | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $name }}
subjects:
  - {{- toYaml $account | nindent 4 }}
{{- if $namespaces }}
---
# The rules in the watched namespaces, bound in each of them.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ $watchedName }}
  labels:
    {{- include "certctl.labels" (dict "root" . "component" "rbac") | nindent 4 }}
rules:
  {{- $watched | nindent 2 }}
{{- range $namespaces }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $name }}
  namespace: {{ . }}
  labels:
    {{- include "certctl.labels" (dict "root" $ "component" "rbac") | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $watchedName }}
subjects:
  - {{- toYaml $account | nindent 4 }}
{{- end }}
{{- if not (has "default" $namespaces) }}
---
# In the namespace default: Events about cluster-scoped objects (the targets) go there.
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ include "certctl.defaultNamespaceRoleName" . }}
  namespace: default
  labels:
    {{- include "certctl.labels" (dict "root" . "component" "rbac") | nindent 4 }}
rules:
  {{- include "certctl.rbacRules" (dict "root" . "scope" "default") | trim | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ include "certctl.defaultNamespaceRoleName" . }}
  namespace: default
  labels:
    {{- include "certctl.labels" (dict "root" . "component" "rbac") | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ include "certctl.defaultNamespaceRoleName" . }}
subjects:
  - {{- toYaml $account | nindent 4 }}
{{- end }}
{{- end }}
---
# In the release namespace: the leader election's Lease.
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ include "certctl.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "certctl.labels" (dict "root" . "component" "rbac") | nindent 4 }}
rules:
  {{- include "certctl.rbacRules" (dict "root" . "scope" "release") | trim | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ include "certctl.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "certctl.labels" (dict "root" . "component" "rbac") | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ include "certctl.fullname" . }}
subjects:
  - {{- toYaml $account | nindent 4 }}
{{- end -}}
