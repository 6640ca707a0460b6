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

{{/*
The Role (and RoleBinding) in the namespace default, for Events about cluster-scoped objects:
the release namespace is in the name, as in certctl.clusterScopedName, since releases of
every namespace meet there.
*/}}
{{- define "certctl.defaultNamespaceRoleName" -}}
{{- printf "%s-events" (include "certctl.clusterScopedName" .) | trunc 253 | trimSuffix "-" -}}
{{- end -}}

{{/* Namespace of the webhook's Service and of the Secret. */}}
{{- define "certctl.webhookNamespace" -}}
{{- default .Release.Namespace .Values.webhook.namespace -}}
{{- end -}}

{{/*
Namespace of certctl's ServiceAccount: the release namespace for the hook Jobs, the
webhook's namespace for its pods (mode sidecar), which must be in their own namespace.
*/}}
{{- define "certctl.serviceAccountNamespace" -}}
{{- if eq .Values.mode "sidecar" -}}
{{- include "certctl.webhookNamespace" . -}}
{{- else -}}
{{- .Release.Namespace -}}
{{- end -}}
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

{{/* The image by digest when one is set (a release pins the index it published), else by
tag; a digest names exactly what was scanned and signed, a tag can be moved. */}}
{{- define "certctl.image" -}}
{{- with .Values.image.digest -}}
{{- printf "%s@%s" $.Values.image.repository . -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (toString (default .Chart.AppVersion .Values.image.tag)) -}}
{{- end -}}
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
Whether `certctl run` gets --leader-elect: sidecar.leaderElection, or when that is null
(left out), whether there is more than one replica. "true" or "".
*/}}
{{- define "certctl.leaderElection" -}}
{{- $s := .Values.sidecar -}}
{{- $on := false -}}
{{- if and (hasKey $s "leaderElection") (not (kindIs "invalid" $s.leaderElection)) -}}
{{- $on = $s.leaderElection -}}
{{- else -}}
{{- $on = gt (int $s.replicas) 1 -}}
{{- end -}}
{{- if $on -}}true{{- end -}}
{{- end -}}

{{/* The Lease of --leader-elect: sidecar.leaseName, default <secretName>-certctl. */}}
{{- define "certctl.leaseName" -}}
{{- default (printf "%s-certctl" .Values.secretName) .Values.sidecar.leaseName -}}
{{- end -}}

{{/*
.Values with the defaults that the templates compute filled in, as JSON: what
permissions.yaml's value paths are read from (sidecar.leaderElection as a boolean,
sidecar.leaseName as the Lease's name).
*/}}
{{- define "certctl.resolvedValues" -}}
{{- $values := deepCopy .Values -}}
{{- $_ := set $values.sidecar "leaderElection" (eq (include "certctl.leaderElection" .) "true") -}}
{{- $_ = set $values.sidecar "leaseName" (include "certctl.leaseName" .) -}}
{{- toJson $values -}}
{{- end -}}

{{/*
The value at a dotted path of the resolved values ("secretName", "targets.crds",
"sidecar.leaderElection"; see certctl.resolvedValues) as JSON {"value": ...}, for templates
that read a path from data: (include "certctl.valueAt" (dict "root" $ "path" "targets.crds")
| fromJson).value. A path the chart does not have fails the render, so a typo in
permissions.yaml cannot silently drop a rule.
*/}}
{{- define "certctl.valueAt" -}}
{{- $value := include "certctl.resolvedValues" .root | fromJson -}}
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
permissions.yaml (see its header): call with (dict "root" $ "scope" "namespace|default|cluster").
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
or a sidecar would only show as a failed install or a crash-looping pod: longer than 100y
(certctl's maximum for every duration), a renewBefore, resync or Lease time of zero, a
validity not longer than renewBefore (every run would renew), or the Lease's times out of
client-go's order. Empty when all are fine. A value left out means certctl's default: it is
skipped, except that the Lease's order is checked with the defaults in its place.
*/}}
{{- define "certctl.durationProblem" -}}
{{- $maxSeconds := 3153600000 -}}{{- /* 100y */ -}}
{{- $c := .Values.certificate -}}
{{- $durations := dict
      "certificate.caValidity" $c.caValidity
      "certificate.certValidity" $c.certValidity
      "certificate.renewBefore" $c.renewBefore
      "job.waitForTargets" .Values.job.waitForTargets
      "sidecar.resync" .Values.sidecar.resync
      "sidecar.leaseDuration" .Values.sidecar.leaseDuration
      "sidecar.leaseRenewDeadline" .Values.sidecar.leaseRenewDeadline
      "sidecar.leaseRetryPeriod" .Values.sidecar.leaseRetryPeriod
      "controller.resync" .Values.controller.resync -}}
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
{{- range $path := list "sidecar.resync" "controller.resync" "sidecar.leaseDuration" "sidecar.leaseRenewDeadline" "sidecar.leaseRetryPeriod" -}}
{{- if and (hasKey $seconds $path) (eq (index $seconds $path) 0) -}}
{{- $problems = append $problems (printf "certctl: %s is %s; it must be longer than zero" $path (index $durations $path)) -}}
{{- end -}}
{{- end -}}
{{- /* The Lease's times in client-go's order, a value left out counting as certctl's default. */ -}}
{{- $lease := get $seconds "sidecar.leaseDuration" | default 15 -}}
{{- $deadline := get $seconds "sidecar.leaseRenewDeadline" | default 10 -}}
{{- $retry := get $seconds "sidecar.leaseRetryPeriod" | default 2 -}}
{{- if ge $deadline $lease -}}
{{- $problems = append $problems (printf "certctl: sidecar.leaseRenewDeadline (%ds) must be less than sidecar.leaseDuration (%ds)" $deadline $lease) -}}
{{- else if le (mul $deadline 10) (mul $retry 12) -}}
{{- $problems = append $problems (printf "certctl: sidecar.leaseRenewDeadline (%ds) must be more than 1.2 times sidecar.leaseRetryPeriod (%ds)" $deadline $retry) -}}
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
{{- $s := .Values.sidecar -}}
{{- $sidecar := eq .Values.mode "sidecar" -}}
{{- $deployment := and $sidecar $s.createDeployment -}}
{{- $durationProblem := include "certctl.durationProblem" . -}}
{{- $monitoringProblem := include "certctl.monitoringProblem" . -}}
{{- $controller := eq .Values.mode "controller" -}}
{{- $c := .Values.controller -}}
{{- if not (has .Values.mode (list "sidecar" "job" "controller")) -}}
certctl: unknown mode {{ .Values.mode | quote }}; use mode: sidecar, mode: job or mode: controller
{{- else if not .Values.image.repository -}}
certctl: image.repository is required: no public certctl image exists yet. Build and push one (scripts/release.sh, then scripts/publish.sh) and install the chart it published, or give this one --set image.repository=REGISTRY/certctl,image.tag=VERSION; to try certctl on this machine without a registry, see docs/try-the-chart.md
{{- else if and $controller $c.namespaces $c.namespaceSelector -}}
certctl: controller.namespaces and controller.namespaceSelector are both set; give the namespaces by name or by selector, not both
{{- else if and $controller (eq (int $c.healthPort) (int $c.metricsPort)) -}}
certctl: controller.healthPort and controller.metricsPort are both {{ $c.healthPort }}; give them different ports (each has its own named container port)
{{- else if and $controller (not .Values.serviceAccount.create) (not .Values.serviceAccount.name) -}}
certctl: serviceAccount.name is required when serviceAccount.create is false (an existing ServiceAccount for the controller's pods)
{{- else if and $controller (or $durationProblem $monitoringProblem) -}}
{{- default $monitoringProblem $durationProblem -}}
{{- else if $controller -}}
{{- /* The annotations name the Services, Secrets and targets: nothing more to check. */ -}}
{{- else if not .Values.webhook.service -}}
certctl: webhook.service is required: the name of the webhook's Service, whose DNS names the server certificate covers (--set webhook.service=NAME)
{{- else if not (or $t.validatingWebhooks $t.mutatingWebhooks $t.crds $t.apiServices $t.webhookSelector) -}}
certctl: at least one target is required to receive the CA bundle: set targets.validatingWebhooks, targets.mutatingWebhooks, targets.crds, targets.apiServices or targets.webhookSelector
{{- else if and (not .Values.serviceAccount.create) (not .Values.serviceAccount.name) -}}
certctl: serviceAccount.name is required when serviceAccount.create is false (an existing ServiceAccount for {{ ternary "the webhook's pods" "the hook Jobs" $sidecar }})
{{- else if and $sidecar (semverCompare "<1.29.0-0" .Capabilities.KubeVersion.Version) -}}
certctl: mode sidecar runs certctl as a native sidecar (an init container with restartPolicy Always), which Kubernetes runs from 1.29 on; this cluster is {{ .Capabilities.KubeVersion.Version }}, where certctl would hold the pod's start forever. Use mode: job, or certctl as an ordinary container with certctl wait in front of the webhook server (see the chart README)
{{- else if and $deployment (not $s.webhook.image.repository) -}}
certctl: sidecar.webhook.image.repository is required in mode sidecar: the image of the webhook server, which the chart runs beside certctl (or set sidecar.createDeployment=false to render only certctl's ServiceAccount and RBAC, or mode: job)
{{- else if and $sidecar (eq (int $s.healthPort) (int $s.metricsPort)) -}}
certctl: sidecar.healthPort and sidecar.metricsPort are both {{ $s.healthPort }}; give them different ports (each has its own named container port)
{{- else if and $deployment (has (int $s.webhook.port) (list (int $s.healthPort) (int $s.metricsPort))) -}}
certctl: sidecar.webhook.port {{ $s.webhook.port }} is also certctl's sidecar.healthPort or sidecar.metricsPort; the containers of a pod share its ports
{{- else if and $deployment (include "certctl.servingPortProblem" .) -}}
{{- include "certctl.servingPortProblem" . -}}
{{- else if and $deployment (include "certctl.keyReaderProblem" .) -}}
{{- include "certctl.keyReaderProblem" . -}}
{{- else if $durationProblem -}}
{{- $durationProblem -}}
{{- else if $monitoringProblem -}}
{{- $monitoringProblem -}}
{{- end -}}
{{- end -}}

{{/*
The serving check must reach the webhook container the chart renders: a port other than
sidecar.webhook.port is some other listener, or none, and the check would pass or fail for
the wrong server.
*/}}
{{- define "certctl.servingPortProblem" -}}
{{- $s := .Values.sidecar -}}
{{- $addr := include "certctl.servingAddr" . -}}
{{- if $addr -}}
{{- $port := regexFind "[0-9]+$" $addr -}}
{{- if ne $port (toString (int $s.webhook.port)) -}}
certctl: sidecar.servingAddr {{ $addr | quote }} is not the webhook's port sidecar.webhook.port {{ $s.webhook.port }}; the serving check must shake hands with the webhook container (leave servingAddr out for 127.0.0.1:{{ $s.webhook.port }}, or set it to "" to turn the check off)
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
certctl writes tls.key with mode 0600, owned by the user it runs as: a webhook container
running as another user cannot read it and never starts serving.
*/}}
{{- define "certctl.keyReaderProblem" -}}
{{- $s := .Values.sidecar -}}
{{- $certctl := include "certctl.runAsUser" (dict "container" $s.securityContext "pod" $s.podSecurityContext) -}}
{{- $webhook := include "certctl.runAsUser" (dict "container" $s.webhook.securityContext "pod" $s.podSecurityContext) -}}
{{- if ne $certctl $webhook -}}
certctl: the webhook container runs as user {{ $webhook | default "of its image" }} and certctl as user {{ $certctl | default "of its image" }}; tls.key (mode 0600) belongs to certctl's user, so the webhook could not read it. Run both as one user: set sidecar.podSecurityContext.runAsUser and leave runAsUser out of sidecar.webhook.securityContext and sidecar.securityContext
{{- end -}}
{{- end -}}

{{/*
The flags that name the Secret and the certificate, shared by `certctl job` and `certctl
run`: call with the root context. Every list value becomes one flag per item. Like the
other argument templates, its output starts each item on a new line: include it with
{{- include ... }} right after the previous item.
*/}}
{{- define "certctl.secretArgs" -}}
{{- $v := .Values }}
- -n
- {{ include "certctl.webhookNamespace" . | quote }}
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
{{- with $v.certificate.caOverlap }}
- --ca-overlap
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
{{- end -}}

{{/* `certctl check` of the release's Secret, names and targets (the `helm test` pod). */}}
{{- define "certctl.checkArgs" -}}
{{- $v := .Values -}}
- check
- -n
- {{ include "certctl.webhookNamespace" . | quote }}
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
{{- with $v.certificate.renewBefore }}
- --renew-before
- {{ . | quote }}
{{- end }}
{{- with $v.certificate.caOverlap }}
- --ca-overlap
- {{ . | quote }}
{{- end }}
{{- include "certctl.targetArgs" . }}
{{- include "certctl.logArgs" . }}
{{- end -}}

{{/* The target flags, shared by `certctl job --phase inject` and `certctl run`. */}}
{{- define "certctl.targetArgs" -}}
{{- $t := .Values.targets -}}
{{- range $t.validatingWebhooks }}
- --validating-webhook
- {{ . | quote }}
{{- end }}
{{- range $t.mutatingWebhooks }}
- --mutating-webhook
- {{ . | quote }}
{{- end }}
{{- range $t.crds }}
- --crd
- {{ . | quote }}
{{- end }}
{{- range $t.apiServices }}
- --apiservice
- {{ . | quote }}
{{- end }}
{{- with $t.webhookSelector }}
- --webhook-selector
- {{ . | quote }}
{{- end }}
{{- end -}}

{{/* The logging flags. */}}
{{- define "certctl.logArgs" -}}
{{- with .Values.logLevel }}
- --log-level
- {{ . | quote }}
{{- end }}
{{- with .Values.logFormat }}
- --log-format
- {{ . | quote }}
{{- end }}
{{- end -}}

{{/*
The certctl command line of a hook Job: call with (dict "root" $ "phase" "secret|inject").
Both phases get the same Secret and certificate flags: the inject phase validates the
Secret against them before it trusts its ca.crt. Only the inject phase gets the targets:
the secret phase runs before the webhook's own objects exist and must not look for them.
*/}}
{{- define "certctl.jobArgs" -}}
{{- $v := .root.Values -}}
- job
- --phase
- {{ .phase }}
{{- include "certctl.secretArgs" .root }}
{{- /* The secret phase too: a pre-upgrade hook that starts a CA rotation injects the new CA
     and moves the server certificate before it exits (a first install writes no target). */}}
{{- include "certctl.targetArgs" .root }}
{{- with $v.job.waitForTargets }}
- --wait-for-targets
- {{ . | quote }}
{{- end }}
{{- if and (eq .phase "inject") $v.failurePolicyOnceReady }}
- --failure-policy-once-ready
- {{ $v.failurePolicyOnceReady | quote }}
{{- end }}
{{- include "certctl.logArgs" .root }}
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
  ttlSecondsAfterFinished: {{ $v.job.ttlSecondsAfterFinished }}
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
            {{- with $v.extraArgs }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          {{- with $v.extraEnv }}
          env:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- with $v.job.securityContext }}
          securityContext:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- with $v.job.resources }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
{{- end -}}
