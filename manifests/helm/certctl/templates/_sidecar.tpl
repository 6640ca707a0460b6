{{/*
Mode sidecar: `certctl run` as a native sidecar of the webhook's pods.

Every template here takes the chart's root context. A chart that has this one as a
dependency (named `certctl`) and renders the webhook's Deployment itself passes the
dependency's own context, `.Subcharts.certctl`, so that certctl's values, names and
appVersion are this chart's:

  spec:
    serviceAccountName: {{ include "certctl.serviceAccountName" .Subcharts.certctl }}
    automountServiceAccountToken: false
    initContainers:
      {{- include "certctl.sidecarContainer" .Subcharts.certctl | nindent 6 }}
    containers:
      - name: webhook
        volumeMounts:
          {{- include "certctl.webhookVolumeMounts" .Subcharts.certctl | nindent 10 }}
    volumes:
      {{- include "certctl.sidecarVolumes" .Subcharts.certctl | nindent 6 }}

with `certctl.sidecar.createDeployment: false` in its values, so that this chart renders only
certctl's ServiceAccount and RBAC. The chart README has the whole example.
*/}}

{{- define "certctl.certVolumeName" -}}certctl-certs{{- end -}}
{{- define "certctl.tokenVolumeName" -}}certctl-token{{- end -}}

{{/* Where a container finds its service-account token, as the kubelet would mount it. */}}
{{- define "certctl.tokenMountPath" -}}/var/run/secrets/kubernetes.io/serviceaccount{{- end -}}

{{/*
Labels that select the webhook's pods (Deployment selector, Service selector). The webhook
is the user's application, named after its Service, not after certctl: a selector for
`app.kubernetes.io/name=certctl` finds certctl's own objects (RBAC, Jobs, monitoring) only.
*/}}
{{- define "certctl.webhookSelectorLabels" -}}
app.kubernetes.io/name: {{ include "certctl.webhookAppName" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: webhook
{{- end -}}

{{/*
The webhook's Deployment that this release already has in the cluster, as JSON, or {}: the
Deployment keeps its name and selector (which cannot change) when webhook.service is
renamed, so that a rename rolls its pods instead of replacing them all at once. Found by
`lookup`, which sees nothing under `helm template` or a client-side dry run: there, and on
a first install, they follow webhook.service.
*/}}
{{- define "certctl.existingWebhookDeployment" -}}
{{- $found := dict -}}
{{- if .Values.sidecar.createDeployment -}}
{{- $list := lookup "apps/v1" "Deployment" (include "certctl.webhookNamespace" .) "" -}}
{{- range ($list.items | default list) -}}
{{- $annotations := .metadata.annotations | default dict -}}
{{- $labels := .metadata.labels | default dict -}}
{{- if and (eq (get $annotations "meta.helm.sh/release-name") $.Release.Name) (eq (get $annotations "meta.helm.sh/release-namespace") $.Release.Namespace) (eq (get $labels "app.kubernetes.io/component") "webhook") -}}
{{- $found = . -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $found -}}
{{- end -}}

{{/* The name of the webhook's Deployment, PodDisruptionBudget and NetworkPolicy. */}}
{{- define "certctl.webhookWorkloadName" -}}
{{- $existing := include "certctl.existingWebhookDeployment" . | fromJson -}}
{{- dig "metadata" "name" .Values.webhook.service $existing -}}
{{- end -}}

{{/* app.kubernetes.io/name of the webhook's pods, part of the Deployment's selector. */}}
{{- define "certctl.webhookAppName" -}}
{{- $existing := include "certctl.existingWebhookDeployment" . | fromJson -}}
{{- $default := .Values.webhook.service | trunc 63 | trimSuffix "-" -}}
{{- dig "spec" "selector" "matchLabels" "app.kubernetes.io/name" $default $existing -}}
{{- end -}}

{{/*
The release's webhook Services other than webhook.service that a target still calls, as a
JSON list of names: a rename keeps the old Service (same port, same pods) until no target
calls it, so calls go on while the targets are pointed at the new name; the next upgrade
after that removes it. Only named targets are looked at (a webhookSelector's are unknown);
like the Deployment's, found by `lookup`.
*/}}
{{- define "certctl.calledFormerServices" -}}
{{- $ns := include "certctl.webhookNamespace" . -}}
{{- $called := list -}}
{{- $t := .Values.targets -}}
{{- $entries := list -}}
{{- range $t.validatingWebhooks -}}
{{- $entries = concat $entries (dig "webhooks" list (lookup "admissionregistration.k8s.io/v1" "ValidatingWebhookConfiguration" "" .)) -}}
{{- end -}}
{{- range $t.mutatingWebhooks -}}
{{- $entries = concat $entries (dig "webhooks" list (lookup "admissionregistration.k8s.io/v1" "MutatingWebhookConfiguration" "" .)) -}}
{{- end -}}
{{- range $entries -}}
{{- $service := dig "clientConfig" "service" dict . -}}
{{- if eq (dig "namespace" "" $service) $ns -}}
{{- $called = append $called (dig "name" "" $service) -}}
{{- end -}}
{{- end -}}
{{- range $t.crds -}}
{{- $service := dig "spec" "conversion" "webhook" "clientConfig" "service" dict (lookup "apiextensions.k8s.io/v1" "CustomResourceDefinition" "" .) -}}
{{- if eq (dig "namespace" "" $service) $ns -}}
{{- $called = append $called (dig "name" "" $service) -}}
{{- end -}}
{{- end -}}
{{- range $t.apiServices -}}
{{- $service := dig "spec" "service" dict (lookup "apiregistration.k8s.io/v1" "APIService" "" .) -}}
{{- if eq (dig "namespace" "" $service) $ns -}}
{{- $called = append $called (dig "name" "" $service) -}}
{{- end -}}
{{- end -}}
{{- $kept := list -}}
{{- if .Values.sidecar.createDeployment -}}
{{- $list := lookup "v1" "Service" $ns "" -}}
{{- range ($list.items | default list) -}}
{{- $annotations := .metadata.annotations | default dict -}}
{{- $labels := .metadata.labels | default dict -}}
{{- if and (ne .metadata.name $.Values.webhook.service) (has .metadata.name $called) (eq (get $annotations "meta.helm.sh/release-name") $.Release.Name) (eq (get $annotations "meta.helm.sh/release-namespace") $.Release.Namespace) (eq (get $labels "app.kubernetes.io/component") "webhook") -}}
{{- $kept = append $kept .metadata.name -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $kept -}}
{{- end -}}

{{/* Every label of the webhook's Deployment, pods and Service. */}}
{{- define "certctl.webhookLabels" -}}
helm.sh/chart: {{ include "certctl.chart" . }}
{{ include "certctl.webhookSelectorLabels" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/*
The address of the serving check (--serving-addr), or "": sidecar.servingAddr as given, or
when it is null (left out) and the chart renders the webhook's Deployment, the webhook's
own port on loopback. Elsewhere the chart does not know where the webhook listens.
*/}}
{{- define "certctl.servingAddr" -}}
{{- $s := .Values.sidecar -}}
{{- if and (hasKey $s "servingAddr") (not (kindIs "invalid" $s.servingAddr)) -}}
{{- $s.servingAddr -}}
{{- else if $s.createDeployment -}}
{{- printf "127.0.0.1:%d" (int $s.webhook.port) -}}
{{- end -}}
{{- end -}}

{{/*
The webhook container's lifecycle (YAML; "{}" when none): sidecar.webhook.lifecycle, plus the
preStop pause of preStopSleepSeconds unless that sets a preStop itself or the cluster has no
`sleep` action (before Kubernetes 1.30, where the API server would refuse the Deployment).
*/}}
{{- define "certctl.webhookLifecycle" -}}
{{- $w := .Values.sidecar.webhook -}}
{{- $lifecycle := deepCopy (default dict $w.lifecycle) -}}
{{- $pause := int (default 0 $w.preStopSleepSeconds) -}}
{{- if and (gt $pause 0) (not (hasKey $lifecycle "preStop"))
      (semverCompare ">=1.30-0" .Capabilities.KubeVersion.Version) -}}
{{- $_ := set $lifecycle "preStop" (dict "sleep" (dict "seconds" $pause)) -}}
{{- end -}}
{{- toYaml $lifecycle -}}
{{- end -}}

{{/*
The user id a container of the pod runs as: its own securityContext's runAsUser, else the
pod's. Call with (dict "container" .securityContext "pod" .podSecurityContext); "" when
neither sets it (the image's user).
*/}}
{{- define "certctl.runAsUser" -}}
{{- $container := .container | default dict -}}
{{- $pod := .pod | default dict -}}
{{- if hasKey $container "runAsUser" -}}
{{- $container.runAsUser | int64 -}}
{{- else if hasKey $pod "runAsUser" -}}
{{- $pod.runAsUser | int64 -}}
{{- end -}}
{{- end -}}

{{/*
The path of the startupProbe. With --serving-addr, /readyz also checks a TLS handshake to
the webhook's own listener (the check named `serving`), which cannot pass before the
webhook container runs, and the kubelet starts it only after this probe passed: the
startupProbe leaves that one check out. The readinessProbe keeps it, and leaves out
`callable` instead (see certctl.readinessProbePath).
*/}}
{{- define "certctl.startupProbePath" -}}
{{- if include "certctl.servingAddr" . -}}
/readyz?exclude=serving
{{- else -}}
/readyz
{{- end -}}
{{- end -}}

{{/*
The path of the readinessProbe. The checks `callable` (some target entry calls a name the
certificate does not have) and `injected` (a caBundle lacks the CA: not yet injected, or
another writer fighting) block a start (the startupProbe keeps them), but they fail alike on
every replica: running pods leaving their Service over them would break the calls they answer.
*/}}
{{- define "certctl.readinessProbePath" -}}
/readyz?exclude=callable&exclude=injected
{{- end -}}

{{/* The `certctl run` command line (see certctl.secretArgs for the layout). */}}
{{- define "certctl.runArgs" -}}
{{- $s := .Values.sidecar -}}
- run
{{- include "certctl.secretArgs" . }}
{{- include "certctl.targetArgs" . }}
- --cert-dir
- {{ $s.certDir | quote }}
- --health-addr
- {{ printf ":%d" (int $s.healthPort) | quote }}
- --metrics-addr
- {{ printf ":%d" (int $s.metricsPort) | quote }}
{{- with $s.resync }}
- --resync
- {{ . | quote }}
{{- end }}
{{- if include "certctl.leaderElection" . }}
- --leader-elect
- --lease-name
- {{ include "certctl.leaseName" . | quote }}
{{- range $flag, $value := dict "--lease-duration" $s.leaseDuration "--lease-renew-deadline" $s.leaseRenewDeadline "--lease-retry-period" $s.leaseRetryPeriod }}
{{- with $value }}
- {{ $flag }}
- {{ . | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- with include "certctl.servingAddr" . }}
- --serving-addr
- {{ . | quote }}
{{- end }}
{{- with .Values.failurePolicyOnceReady }}
- --failure-policy-once-ready
- {{ . | quote }}
{{- end }}
{{- include "certctl.logArgs" . }}
{{- end -}}

{{/*
certctl as a native sidecar (Kubernetes 1.29+): an entry of the pod's initContainers with
restartPolicy Always. The kubelet starts it first, starts the next containers only once
its startupProbe passed (the certificate is in the folder and every caBundle holds its
CA), keeps it running beside them and restarts it when it exits. A list item.
*/}}
{{- define "certctl.sidecarContainer" -}}
{{- $v := .Values -}}
{{- $s := $v.sidecar -}}
- name: certctl
  image: {{ include "certctl.image" . | quote }}
  imagePullPolicy: {{ $v.image.pullPolicy }}
  restartPolicy: Always
  args:
    {{- include "certctl.runArgs" . | nindent 4 }}
    {{- with $v.extraArgs }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  env:
    # The identity in the Lease, in Events and in the Secret's certctl.io/issued-by
    # (--identity defaults to $POD_NAME plus a random suffix), and the namespace.
    - name: POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    - name: POD_NAMESPACE
      valueFrom:
        fieldRef:
          fieldPath: metadata.namespace
    {{- with $v.extraEnv }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  ports:
    - name: health
      containerPort: {{ $s.healthPort }}
      protocol: TCP
    - name: metrics
      containerPort: {{ $s.metricsPort }}
      protocol: TCP
  startupProbe:
    httpGet:
      path: {{ include "certctl.startupProbePath" . }}
      port: health
    {{- toYaml $s.startupProbe | nindent 4 }}
  readinessProbe:
    httpGet:
      path: {{ include "certctl.readinessProbePath" . }}
      port: health
    {{- toYaml $s.readinessProbe | nindent 4 }}
  livenessProbe:
    httpGet:
      path: /healthz
      port: health
    {{- toYaml $s.livenessProbe | nindent 4 }}
  volumeMounts:
    - name: {{ include "certctl.certVolumeName" . }}
      mountPath: {{ $s.certDir | quote }}
    - name: {{ include "certctl.tokenVolumeName" . }}
      mountPath: {{ include "certctl.tokenMountPath" . }}
      readOnly: true
  {{- with $s.securityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $s.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}

{{/* The webhook container's mount of the certificate folder, read-only. A list item. */}}
{{- define "certctl.webhookVolumeMounts" -}}
- name: {{ include "certctl.certVolumeName" . }}
  mountPath: {{ .Values.sidecar.certDir | quote }}
  readOnly: true
{{- end -}}

{{/*
The pod volumes the sidecar needs, list items:
- the certificate folder, an emptyDir in memory: the private key never reaches the node's
  disk, and every replica keeps its own copy;
- the service-account token, projected as the kubelet's automount would (token, ca.crt,
  namespace) but mounted into certctl's container only: the pod sets
  automountServiceAccountToken false, so the webhook server cannot use certctl's rights.
*/}}
{{- define "certctl.sidecarVolumes" -}}
- name: {{ include "certctl.certVolumeName" . }}
  emptyDir:
    medium: Memory
    sizeLimit: 1Mi
- name: {{ include "certctl.tokenVolumeName" . }}
  projected:
    defaultMode: 0444
    sources:
      - serviceAccountToken:
          path: token
          expirationSeconds: 3607
      - configMap:
          name: kube-root-ca.crt
          items:
            - key: ca.crt
              path: ca.crt
      - downwardAPI:
          items:
            - path: namespace
              fieldRef:
                apiVersion: v1
                fieldPath: metadata.namespace
{{- end -}}
