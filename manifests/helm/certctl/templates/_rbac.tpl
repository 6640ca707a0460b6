{{/*
certctl's least-privilege RBAC for the mode in .Values.mode: a Role and RoleBinding in the
Secret's namespace, a Role and RoleBinding in `default` for Events about cluster-scoped
targets, a ClusterRole and ClusterRoleBinding for the targets. Call with the chart's root
context (`.Subcharts.certctl` from a parent chart). Part of the chart's public interface.
*/}}
{{- define "certctl.rbac" -}}
{{- $job := eq .Values.mode "job" }}
{{- $ns := include "certctl.webhookNamespace" . }}
{{- $roleName := include "certctl.fullname" . }}
{{- if ne $ns .Release.Namespace }}
{{- /* In a foreign namespace the release namespace makes the name unique. */}}
{{- $roleName = include "certctl.clusterScopedName" . }}
{{- end }}
{{- $saNamespace := include "certctl.serviceAccountNamespace" . }}
{{- $defaultRules := include "certctl.rbacRules" (dict "root" . "scope" "default") | trim }}
{{- if $job }}
# Least privilege for `certctl job`: the rules come from the chart's permissions.yaml, which
# lists each verb with the code path that needs it. Nothing is a wildcard, and every rule
# that can name its objects does. All four objects are hooks that exist only while a hook
# phase runs (see certctl.rbacHookAnnotations in _helpers.tpl).
{{- else }}
# Least privilege for `certctl run`: the rules come from the chart's permissions.yaml, which
# lists each verb with the code path that needs it. Nothing is a wildcard, and every rule
# that can name its objects does. They live as long as the webhook's Deployment.
{{- end }}
#
# In the Secret's namespace: the one Secret.
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $roleName }}
  namespace: {{ $ns }}
  labels:
    {{- include "certctl.labels" (dict "root" . "component" "rbac") | nindent 4 }}
  {{- if $job }}
  annotations:
    {{- include "certctl.rbacHookAnnotations" . | nindent 4 }}
  {{- end }}
rules:
  {{- include "certctl.rbacRules" (dict "root" . "scope" "namespace") | trim | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $roleName }}
  namespace: {{ $ns }}
  labels:
    {{- include "certctl.labels" (dict "root" . "component" "rbac") | nindent 4 }}
  {{- if $job }}
  annotations:
    {{- include "certctl.rbacHookAnnotations" . | nindent 4 }}
  {{- end }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $roleName }}
subjects:
  - kind: ServiceAccount
    name: {{ include "certctl.serviceAccountName" . }}
    namespace: {{ $saNamespace }}
---
{{- if $defaultRules }}
# In the namespace default: Events about cluster-scoped objects (the targets) go there.
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ include "certctl.defaultNamespaceRoleName" . }}
  namespace: default
  labels:
    {{- include "certctl.labels" (dict "root" . "component" "rbac") | nindent 4 }}
  {{- if $job }}
  annotations:
    {{- include "certctl.rbacHookAnnotations" . | nindent 4 }}
  {{- end }}
rules:
  {{- $defaultRules | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ include "certctl.defaultNamespaceRoleName" . }}
  namespace: default
  labels:
    {{- include "certctl.labels" (dict "root" . "component" "rbac") | nindent 4 }}
  {{- if $job }}
  annotations:
    {{- include "certctl.rbacHookAnnotations" . | nindent 4 }}
  {{- end }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ include "certctl.defaultNamespaceRoleName" . }}
subjects:
  - kind: ServiceAccount
    name: {{ include "certctl.serviceAccountName" . }}
    namespace: {{ $saNamespace }}
---
{{- end }}
# Cluster-scoped targets: read them and write their caBundle. A rule per target kind that
# has names (resourceNames from targets.*), and one over all webhook configurations only
# when targets.webhookSelector is set.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ include "certctl.clusterScopedName" . }}
  labels:
    {{- include "certctl.labels" (dict "root" . "component" "rbac") | nindent 4 }}
  {{- if $job }}
  annotations:
    {{- include "certctl.rbacHookAnnotations" . | nindent 4 }}
  {{- end }}
rules:
  {{- include "certctl.rbacRules" (dict "root" . "scope" "cluster") | trim | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ include "certctl.clusterScopedName" . }}
  labels:
    {{- include "certctl.labels" (dict "root" . "component" "rbac") | nindent 4 }}
  {{- if $job }}
  annotations:
    {{- include "certctl.rbacHookAnnotations" . | nindent 4 }}
  {{- end }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ include "certctl.clusterScopedName" . }}
subjects:
  - kind: ServiceAccount
    name: {{ include "certctl.serviceAccountName" . }}
    namespace: {{ $saNamespace }}
{{- end -}}

{{/*
certctl's ServiceAccount: the webhook pods' identity (mode sidecar) or the hook Jobs' (mode
job). Call with the chart's root context. Part of the chart's public interface.
*/}}
{{- define "certctl.serviceAccount" -}}
{{- if eq .Values.mode "job" }}
# The hook Jobs' own identity. A hook like the RBAC (see certctl.rbacHookAnnotations in
# _helpers.tpl): it exists only while a hook phase runs.
{{- else }}
# The webhook pods' identity: its token is mounted into certctl's container only.
{{- end }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "certctl.serviceAccountName" . }}
  namespace: {{ include "certctl.serviceAccountNamespace" . }}
  labels:
    {{- include "certctl.labels" (dict "root" . "component" "rbac") | nindent 4 }}
  {{- if or (eq .Values.mode "job") .Values.serviceAccount.annotations }}
  annotations:
    {{- if eq .Values.mode "job" }}
    {{- include "certctl.rbacHookAnnotations" . | nindent 4 }}
    {{- end }}
    {{- with .Values.serviceAccount.annotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- end }}
{{- end -}}

{{/*
Both hook Jobs of mode job: `certctl job --phase secret` before install and upgrade,
`--phase inject` after. Call with the chart's root context. Part of the chart's public
interface.
*/}}
{{- define "certctl.hookJobs" -}}
{{ include "certctl.job" (dict "root" . "phase" "secret" "hook" "pre-install,pre-upgrade" "weight" "0") }}
---
{{ include "certctl.job" (dict "root" . "phase" "inject" "hook" "post-install,post-upgrade" "weight" "0") }}
{{- end -}}
