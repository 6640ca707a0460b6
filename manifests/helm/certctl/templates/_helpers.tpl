{{/*
Names, labels, hook annotations, the value checks and the certctl command line.
*/}}

{{- define "certctl.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* <release>-certctl, or the release name when it already contains the chart name. */}}
{{- define "certctl.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "certctl.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Cluster-scoped names carry the release namespace: release names are unique per namespace
only, and two releases called "hook" in two namespaces must not share a ClusterRole.
*/}}
{{- define "certctl.clusterScopedName" -}}
{{- printf "%s-%s" (include "certctl.fullname" .) .Release.Namespace | trunc 253 | trimSuffix "-" -}}
{{- end -}}

{{/* Namespace of the webhook's Service and of the Secret. */}}
{{- define "certctl.webhookNamespace" -}}
{{- default .Release.Namespace .Values.webhook.namespace -}}
{{- end -}}

{{- define "certctl.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "certctl.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Name of the hook Job of a phase: call with (dict "root" $ "phase" "secret|inject"). */}}
{{- define "certctl.jobName" -}}
{{- printf "%s-%s" (include "certctl.fullname" .root) .phase | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "certctl.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Labels: call with (dict "root" $ "component" "...") */}}
{{- define "certctl.selectorLabels" -}}
app.kubernetes.io/name: {{ include "certctl.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "certctl.labels" -}}
{{- $root := .root -}}
helm.sh/chart: {{ include "certctl.chart" $root }}
{{ include "certctl.selectorLabels" $root }}
app.kubernetes.io/version: {{ $root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $root.Release.Service }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/*
Hook annotations of the ServiceAccount and the RBAC objects.

The Jobs are hooks, so their ServiceAccount and RBAC must be hooks too: ordinary release
objects are only created after the pre-install hooks have run. They are hooks of all four
events, with a lower weight than the Jobs, and `before-hook-creation,hook-succeeded`:

  pre-install/pre-upgrade    RBAC created (weight -10) -> Job --phase secret (weight 0)
                             -> all succeeded: Job and RBAC deleted
  (release objects: none; the webhook belongs to its own chart)
  post-install/post-upgrade  RBAC created again -> Job --phase inject
                             -> all succeeded: Job and RBAC deleted

Helm deletes `hook-succeeded` objects only after every hook of the phase has succeeded,
so the RBAC outlives the Job that uses it, and it is back before the next phase's Job
starts. Between and after the phases no grant exists at all: the rights to write the
Secret and the webhook configurations live only while certctl runs. `before-hook-creation`
removes what a failed run left behind (a failed Job is kept for `kubectl logs`). Hooks are
not release objects, so `helm uninstall` has nothing of this chart's RBAC to forget.

The alternative, `before-hook-creation` alone, would also work but leaves the ServiceAccount
and a ClusterRole that may patch webhook configurations in the cluster forever, outside the
release (uninstall does not delete hooks).
*/}}
{{- define "certctl.rbacHookAnnotations" -}}
helm.sh/hook: pre-install,pre-upgrade,post-install,post-upgrade
helm.sh/hook-weight: "-10"
helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
{{- end -}}

{{/*
The value at a dotted path of .Values ("secretName", "targets.crds") as JSON {"value": ...},
for templates that read a path from data: (include "certctl.valueAt" (dict "root" $ "path"
"targets.crds") | fromJson).value. A path the chart does not have fails the render, so a typo
in permissions.yaml cannot silently drop a rule.
*/}}
{{- define "certctl.valueAt" -}}
{{- $value := .root.Values -}}
{{- range splitList "." .path -}}
{{- if not (and (kindIs "map" $value) (hasKey $value .)) -}}
{{- fail (printf "certctl: permissions.yaml refers to the value %s, which the chart does not have" $.path) -}}
{{- end -}}
{{- $value = index $value . -}}
{{- end -}}
{{- toJson (dict "value" $value) -}}
{{- end -}}

{{/*
The RBAC rules of one scope for the chart's mode, rendered from the permission table
permissions.yaml (see its header): call with (dict "root" $ "scope" "namespace|cluster").
A rule limited to named objects gets resourceNames from the value it names and is left out
when that value names nothing: an RBAC rule with empty resourceNames would cover every
object. A rule with `when` exists only while that value is set. Each rule carries its reason
and each verb's as comments.
*/}}
{{- define "certctl.rbacRules" -}}
{{- $table := .root.Files.Get "permissions.yaml" | fromYaml -}}
{{- if hasKey $table "Error" -}}
{{- fail (printf "certctl: permissions.yaml: %s" $table.Error) -}}
{{- end -}}
{{- $mode := index $table.modes .root.Values.mode -}}
{{- range $rule := $mode.rules -}}
{{- if eq $rule.scope $.scope -}}
{{- $names := list -}}
{{- if $rule.resourceNames -}}
{{- $names = (include "certctl.valueAt" (dict "root" $.root "path" $rule.resourceNames) | fromJson).value -}}
{{- if kindIs "string" $names -}}
{{- $names = list $names -}}
{{- end -}}
{{- end -}}
{{- $enabled := true -}}
{{- if $rule.when -}}
{{- $enabled = (include "certctl.valueAt" (dict "root" $.root "path" $rule.when) | fromJson).value -}}
{{- end -}}
{{- if and $enabled (or (not $rule.resourceNames) $names) }}
# {{ printf "%s: %s" $rule.name $rule.why | wrap 86 | replace "\n" "\n#   " }}
{{- $verbs := keys $rule.verbs | sortAlpha }}
{{- range $verb := $verbs }}
#   {{ printf "%s: %s" $verb (index $rule.verbs $verb) | wrap 84 | replace "\n" "\n#     " }}
{{- end }}
- apiGroups: {{ toJson $rule.apiGroups }}
  resources: {{ toJson $rule.resources }}
  {{- with $names }}
  resourceNames: {{ toJson . }}
  {{- end }}
  verbs: {{ toJson $verbs }}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Seconds in a duration string ("1y30d" -> 34128000), in certctl's units: s, m, h, d (24h)
and y (365d), each number with its unit, combinable. values.schema.json has checked the
syntax and bounded every number to 10 digits, so the sum cannot overflow.
*/}}
{{- define "certctl.durationSeconds" -}}
{{- $unitSeconds := dict "s" 1 "m" 60 "h" 3600 "d" 86400 "y" 31536000 -}}
{{- $total := 0 -}}
{{- range regexFindAll "[0-9]+[smhdy]" . -1 -}}
{{- $unit := regexFind "[smhdy]$" . -}}
{{- $total = add $total (mul (trimSuffix $unit . | atoi) (index $unitSeconds $unit)) -}}
{{- end -}}
{{- $total -}}
{{- end -}}

{{/*
The first duration value that certctl would refuse with a usage error, which in a hook Job
would only show as a failed install: longer than 100y (certctl's maximum for every
duration), a renewBefore of zero, or a validity not longer than renewBefore (every run would
renew). Empty when all are fine; a value left out means certctl's default and is skipped.
*/}}
{{- define "certctl.durationProblem" -}}
{{- $maxSeconds := 3153600000 -}}{{- /* 100y */ -}}
{{- $c := .Values.certificate -}}
{{- $durations := dict
      "certificate.caValidity" $c.caValidity
      "certificate.certValidity" $c.certValidity
      "certificate.renewBefore" $c.renewBefore
      "job.waitForTargets" .Values.job.waitForTargets -}}
{{- $seconds := dict -}}
{{- $problems := list -}}
{{- range $path, $value := $durations -}}
{{- if $value -}}
{{- $s := include "certctl.durationSeconds" $value | atoi -}}
{{- $_ := set $seconds $path $s -}}
{{- if gt $s $maxSeconds -}}
{{- $problems = append $problems (printf "certctl: %s is %s, longer than the maximum of 100y" $path $value) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $renew := index $seconds "certificate.renewBefore" -}}
{{- if and (hasKey $seconds "certificate.renewBefore") (eq $renew 0) -}}
{{- $problems = append $problems (printf "certctl: certificate.renewBefore is %s; it must be longer than zero" $c.renewBefore) -}}
{{- end -}}
{{- range $path := list "certificate.caValidity" "certificate.certValidity" -}}
{{- if and (hasKey $seconds $path) (hasKey $seconds "certificate.renewBefore") (le (index $seconds $path) $renew) -}}
{{- $problems = append $problems (printf "certctl: %s (%s) must be longer than certificate.renewBefore (%s), or every upgrade would renew the certificates" $path (index $durations $path) $c.renewBefore) -}}
{{- end -}}
{{- end -}}
{{- with $problems -}}
{{- first . -}}
{{- end -}}
{{- end -}}

{{/*
The first problem with the values, as a message naming the value to set; empty when there
is none. templates/validate.yaml turns it into a failure.
*/}}
{{- define "certctl.problem" -}}
{{- $t := .Values.targets -}}
{{- $durationProblem := include "certctl.durationProblem" . -}}
{{- if eq .Values.mode "sidecar" -}}
certctl: mode "sidecar" (certctl run) is not available in this chart version yet; use mode: job
{{- else if ne .Values.mode "job" -}}
certctl: unknown mode {{ .Values.mode | quote }}; use mode: job
{{- else if not .Values.webhook.service -}}
certctl: webhook.service is required: the name of the webhook's Service, whose DNS names the server certificate covers (--set webhook.service=NAME)
{{- else if not (or $t.validatingWebhooks $t.mutatingWebhooks $t.crds $t.apiServices $t.webhookSelector) -}}
certctl: at least one target is required to receive the CA bundle: set targets.validatingWebhooks, targets.mutatingWebhooks, targets.crds, targets.apiServices or targets.webhookSelector
{{- else if and (not .Values.serviceAccount.create) (not .Values.serviceAccount.name) -}}
certctl: serviceAccount.name is required when serviceAccount.create is false (an existing ServiceAccount for the hook Jobs)
{{- else if $durationProblem -}}
{{- $durationProblem -}}
{{- end -}}
{{- end -}}

{{/*
The certctl command line of a hook Job: call with (dict "root" $ "phase" "secret|inject").
Both phases get the same Secret and certificate flags: the inject phase validates the
Secret against them before it trusts its ca.crt. Only the inject phase gets the targets:
the secret phase runs before the webhook's own objects exist and must not look for them.
Every list value becomes one flag per item.
*/}}
{{- define "certctl.jobArgs" -}}
{{- $v := .root.Values -}}
- job
- --phase
- {{ .phase }}
- -n
- {{ include "certctl.webhookNamespace" .root | quote }}
- --secret
- {{ $v.secretName | quote }}
- --service
- {{ $v.webhook.service | quote }}
{{- range $v.certificate.extraDnsNames }}
- --dns-name
- {{ . | quote }}
{{- end }}
{{- range $v.certificate.ipAddresses }}
- --ip
- {{ . | quote }}
{{- end }}
{{- with $v.certificate.clusterDomain }}
- --cluster-domain
- {{ . | quote }}
{{- end }}
{{- with $v.certificate.keyType }}
- --key-type
- {{ . | quote }}
{{- end }}
{{- with $v.certificate.caValidity }}
- --ca-validity
- {{ . | quote }}
{{- end }}
{{- with $v.certificate.certValidity }}
- --cert-validity
- {{ . | quote }}
{{- end }}
{{- with $v.certificate.renewBefore }}
- --renew-before
- {{ . | quote }}
{{- end }}
{{- with $v.certificate.caName }}
- --ca-name
- {{ . | quote }}
{{- end }}
{{- with $v.certificate.caOrganization }}
- --ca-organization
- {{ . | quote }}
{{- end }}
{{- if $v.adopt }}
- --adopt
{{- end }}
{{- if eq .phase "inject" }}
{{- range $v.targets.validatingWebhooks }}
- --validating-webhook
- {{ . | quote }}
{{- end }}
{{- range $v.targets.mutatingWebhooks }}
- --mutating-webhook
- {{ . | quote }}
{{- end }}
{{- range $v.targets.crds }}
- --crd
- {{ . | quote }}
{{- end }}
{{- range $v.targets.apiServices }}
- --apiservice
- {{ . | quote }}
{{- end }}
{{- with $v.targets.webhookSelector }}
- --webhook-selector
- {{ . | quote }}
{{- end }}
{{- with $v.job.waitForTargets }}
- --wait-for-targets
- {{ . | quote }}
{{- end }}
{{- end }}
{{- with $v.logLevel }}
- --log-level
- {{ . | quote }}
{{- end }}
{{- with $v.logFormat }}
- --log-format
- {{ . | quote }}
{{- end }}
{{- end -}}

{{/* A hook Job: call with (dict "root" $ "phase" "secret|inject" "hook" "..." "weight" "0"). */}}
{{- define "certctl.job" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
{{- $component := printf "%s-job" .phase -}}
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ include "certctl.jobName" . }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "certctl.labels" (dict "root" $root "component" $component) | nindent 4 }}
  annotations:
    helm.sh/hook: {{ .hook }}
    helm.sh/hook-weight: {{ .weight | quote }}
    # A succeeded Job goes away with its phase; a failed one stays for `kubectl logs`
    # until the next install/upgrade replaces it.
    helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
spec:
  backoffLimit: {{ $v.job.backoffLimit }}
  activeDeadlineSeconds: {{ $v.job.activeDeadlineSeconds }}
  template:
    metadata:
      labels:
        {{- include "certctl.labels" (dict "root" $root "component" $component) | nindent 8 }}
        {{- with $v.job.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with $v.job.podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      # Retries are new pods (backoffLimit), so a failed attempt keeps its log.
      restartPolicy: Never
      serviceAccountName: {{ include "certctl.serviceAccountName" $root }}
      # certctl talks to the API server with this token; it must be mounted.
      automountServiceAccountToken: true
      {{- with $v.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.job.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      {{- with $v.job.podSecurityContext }}
      securityContext:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.job.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.job.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.job.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: certctl
          image: {{ include "certctl.image" $root | quote }}
          imagePullPolicy: {{ $v.image.pullPolicy }}
          args:
            {{- include "certctl.jobArgs" (dict "root" $root "phase" .phase) | nindent 12 }}
          {{- with $v.job.securityContext }}
          securityContext:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- with $v.job.resources }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
{{- end -}}
