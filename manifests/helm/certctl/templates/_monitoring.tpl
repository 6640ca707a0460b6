{{/*
Monitoring and the pods' protection (mode sidecar): the PodMonitor or ServiceMonitor that
scrapes certctl's port `metrics`, the PrometheusRule built from files/alerts.yaml, the
PodDisruptionBudget and the NetworkPolicy of the webhook's pods.
*/}}

{{/* Labels of the pods to scrape: monitoring.podSelector, else the chart's Deployment's. */}}
{{- define "certctl.metricsPodSelector" -}}
{{- if eq .Values.mode "controller" -}}
{{- include "certctl.controllerSelectorLabels" . -}}
{{- else if .Values.monitoring.podSelector -}}
{{- toYaml .Values.monitoring.podSelector -}}
{{- else -}}
{{- include "certctl.webhookSelectorLabels" . -}}
{{- end -}}
{{- end -}}

{{/* Namespace of the PodMonitor, ServiceMonitor and PrometheusRule. */}}
{{- define "certctl.monitoringNamespace" -}}
{{- $own := ternary .Release.Namespace (include "certctl.webhookNamespace" .) (eq .Values.mode "controller") -}}
{{- default $own .Values.monitoring.namespace -}}
{{- end -}}

{{/* Labels of the PodMonitor, ServiceMonitor and PrometheusRule. */}}
{{- define "certctl.monitoringLabels" -}}
{{ include "certctl.labels" (dict "root" . "component" "monitoring") }}
{{- with .Values.monitoring.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The Service of port `metrics` that a ServiceMonitor needs, and its selector labels. */}}
{{- define "certctl.metricsServiceName" -}}
{{- printf "%s-metrics" .Values.webhook.service | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "certctl.metricsServiceSelectorLabels" -}}
{{ include "certctl.selectorLabels" . }}
app.kubernetes.io/component: metrics
{{- end -}}

{{/* The scrape endpoint of a PodMonitor or ServiceMonitor (a list item). */}}
{{- define "certctl.scrapeEndpoint" -}}
- port: metrics
  path: /metrics
  scheme: http
  interval: {{ .Values.monitoring.interval | quote }}
  scrapeTimeout: {{ .Values.monitoring.scrapeTimeout | quote }}
{{- end -}}

{{/*
Milliseconds in a Prometheus duration ("1m30s" -> 90000), in Prometheus's units: ms, s, m,
h, d, w, y (365d); values.schema.json has checked the syntax.
*/}}
{{- define "certctl.promDurationMillis" -}}
{{- $unitMillis := dict "ms" 1 "s" 1000 "m" 60000 "h" 3600000 "d" 86400000 "w" 604800000 "y" 31536000000 -}}
{{- $total := 0 -}}
{{- range regexFindAll "[0-9]+(ms|[smhdwy])" . -1 -}}
{{- $unit := regexFind "(ms|[smhdwy])$" . -}}
{{- $total = add $total (mul (trimSuffix $unit . | atoi) (index $unitMillis $unit)) -}}
{{- end -}}
{{- $total -}}
{{- end -}}

{{/* Whether the chart renders a PodDisruptionBudget: "true" or "". */}}
{{- define "certctl.podDisruptionBudget" -}}
{{- $s := .Values.sidecar -}}
{{- $pdb := $s.podDisruptionBudget -}}
{{- $on := false -}}
{{- if and (hasKey $pdb "enabled") (not (kindIs "invalid" $pdb.enabled)) -}}
{{- $on = $pdb.enabled -}}
{{- else -}}
{{- $on = and $s.createDeployment (gt (int $s.replicas) 1) -}}
{{- end -}}
{{- if and $on (eq .Values.mode "sidecar") -}}true{{- end -}}
{{- end -}}

{{/*
The alerting rule groups of files/alerts.yaml as YAML (`groups: [...]`), with the values of
monitoring.prometheusRule applied: expiryDays and criticalExpiryDays as the thresholds of
WebhookCertificateExpiresSoon and WebhookCertificateExpiresCritical, the webhook's namespace
as the selector of WebhookCertificateMetricsAbsent, runbookUrl on every alert, alertLabels on
every alert, and per alert its `for`, its severity or its removal. The file stays the one source of the rules; nothing else in them
changes.
*/}}
{{- define "certctl.alertGroups" -}}
{{- $r := .Values.monitoring.prometheusRule -}}
{{- $file := .Files.Get "files/alerts.yaml" | fromYaml -}}
{{- if hasKey $file "Error" -}}
{{- fail (printf "certctl: files/alerts.yaml: %s" $file.Error) -}}
{{- end -}}
{{- $substitutions := dict
  "WebhookCertificateExpiresSoon" (list "< 14 * 86400" (printf "< %d * 86400" (int $r.expiryDays)) "monitoring.prometheusRule.expiryDays")
  "WebhookCertificateExpiresCritical" (list "< 3 * 86400" (printf "< %d * 86400" (int $r.criticalExpiryDays)) "monitoring.prometheusRule.criticalExpiryDays")
  "WebhookCertificateMetricsAbsent" (list "absent(certctl_ready)" (printf "absent(certctl_ready{namespace=%q})" (include "certctl.webhookNamespace" .)) "the webhook's namespace") -}}
{{- $groups := list -}}
{{- range $group := $file.groups -}}
{{- $rules := list -}}
{{- range $rule := $group.rules -}}
{{- $override := index $r.alerts $rule.alert | default dict -}}
{{- if not (and (hasKey $override "enabled") (not $override.enabled)) -}}
{{- $rule = deepCopy $rule -}}
{{- with index $substitutions $rule.alert -}}
{{- if not (contains (index . 0) $rule.expr) -}}
{{- fail (printf "certctl: files/alerts.yaml: the expression of %s no longer contains %q, where %s goes" $rule.alert (index . 0) (index . 2)) -}}
{{- end -}}
{{- $_ := set $rule "expr" (replace (index . 0) (index . 1) $rule.expr) -}}
{{- end -}}
{{- with $r.runbookUrl -}}
{{- $_ := set $rule "annotations" (merge (dict "runbook_url" .) (omit $rule.annotations "runbook_url")) -}}
{{- end -}}
{{- if hasKey $override "for" -}}
{{- $_ := set $rule "for" $override.for -}}
{{- end -}}
{{- $labels := merge (dict) (deepCopy ($rule.labels | default dict)) -}}
{{- $labels = merge (deepCopy $r.alertLabels) $labels -}}
{{- with $override.severity -}}
{{- $_ := set $labels "severity" . -}}
{{- end -}}
{{- $_ := set $rule "labels" $labels -}}
{{- $rules = append $rules $rule -}}
{{- end -}}
{{- end -}}
{{- if $rules -}}
{{- $groups = append $groups (merge (dict "rules" $rules) (omit $group "rules")) -}}
{{- end -}}
{{- end -}}
{{- toYaml (dict "groups" $groups) -}}
{{- end -}}

{{/* The alert names of files/alerts.yaml. */}}
{{- define "certctl.alertNames" -}}
{{- $names := list -}}
{{- range (.Files.Get "files/alerts.yaml" | fromYaml).groups -}}
{{- range .rules -}}
{{- $names = append $names .alert -}}
{{- end -}}
{{- end -}}
{{- join ", " $names -}}
{{- end -}}

{{/*
The first problem with the monitoring, disruption budget and network policy values, as a
message naming the value; empty when there is none. Part of certctl.problem.
*/}}
{{- define "certctl.monitoringProblem" -}}
{{- $m := .Values.monitoring -}}
{{- $s := .Values.sidecar -}}
{{- $sidecar := eq .Values.mode "sidecar" -}}
{{- $monitors := list -}}
{{- if $m.podMonitor.enabled }}{{ $monitors = append $monitors "monitoring.podMonitor.enabled" }}{{ end -}}
{{- if $m.serviceMonitor.enabled }}{{ $monitors = append $monitors "monitoring.serviceMonitor.enabled" }}{{ end -}}
{{- $scraped := gt (len $monitors) 0 -}}
{{- $requested := $monitors -}}
{{- if $m.prometheusRule.enabled }}{{ $requested = append $requested "monitoring.prometheusRule.enabled" }}{{ end -}}
{{- $pdb := $s.podDisruptionBudget -}}
{{- $pdbRequested := false -}}
{{- if and (hasKey $pdb "enabled") (not (kindIs "invalid" $pdb.enabled)) -}}
{{- $pdbRequested = $pdb.enabled -}}
{{- end -}}
{{- $np := $s.networkPolicy -}}
{{- $interval := include "certctl.promDurationMillis" $m.interval | atoi -}}
{{- $timeout := include "certctl.promDurationMillis" $m.scrapeTimeout | atoi -}}
{{- $names := splitList ", " (include "certctl.alertNames" .) -}}
{{- $unknownAlerts := list -}}
{{- range $name, $_ := $m.prometheusRule.alerts -}}
{{- if not (has $name $names) }}{{ $unknownAlerts = append $unknownAlerts $name }}{{ end -}}
{{- end -}}
{{- $renewBefore := include "certctl.durationSeconds" (default "30d" .Values.certificate.renewBefore) | atoi -}}
{{- $controller := eq .Values.mode "controller" -}}
{{- $notForController := list -}}
{{- if $m.serviceMonitor.enabled }}{{ $notForController = append $notForController "monitoring.serviceMonitor.enabled" }}{{ end -}}
{{- if $m.prometheusRule.enabled }}{{ $notForController = append $notForController "monitoring.prometheusRule.enabled" }}{{ end -}}
{{- if and $controller $notForController -}}
certctl: {{ first $notForController }} needs mode sidecar: in mode controller use monitoring.podMonitor (its alerts are about one Secret's certctl run; the controller's metrics are certctl_controller_*, see docs/controller.md)
{{- else if and $controller $m.podSelector -}}
certctl: monitoring.podSelector is for mode sidecar with your own Deployment; in mode controller the PodMonitor selects the controller's pods
{{- else if and (not $sidecar) (not $controller) $requested -}}
certctl: {{ first $requested }} needs mode sidecar: in mode job certctl runs only as hook Jobs, which serve no metrics to scrape or alert on
{{- else if and (not $sidecar) (or $pdbRequested $np.enabled) -}}
certctl: {{ ternary "sidecar.podDisruptionBudget.enabled" "sidecar.networkPolicy.enabled" $pdbRequested }} needs mode sidecar: in mode {{ .Values.mode }} the chart renders no webhook pods to protect{{ if $controller }} (the controller's own: controller.podDisruptionBudget){{ end }}
{{- else if eq (len $monitors) 2 -}}
certctl: monitoring.podMonitor.enabled and monitoring.serviceMonitor.enabled are both true; enable one of them, or Prometheus scrapes every pod twice
{{- else if and $sidecar $scraped (not $s.createDeployment) (not $m.podSelector) -}}
certctl: {{ first $monitors }} with sidecar.createDeployment false needs monitoring.podSelector: the labels of your Deployment's pods, which run the certctl sidecar
{{- else if and $scraped (eq $interval 0) -}}
certctl: monitoring.interval is {{ $m.interval }}; it must be longer than zero
{{- else if and $scraped (gt $timeout $interval) -}}
certctl: monitoring.scrapeTimeout ({{ $m.scrapeTimeout }}) is longer than monitoring.interval ({{ $m.interval }}), which Prometheus refuses
{{- else if and $scraped $np.enabled (not $np.metricsFrom) -}}
certctl: {{ first $monitors }} with sidecar.networkPolicy.enabled needs sidecar.networkPolicy.metricsFrom (Prometheus's namespace and pods); without it the NetworkPolicy keeps Prometheus from port metrics
{{- else if $unknownAlerts -}}
certctl: monitoring.prometheusRule.alerts names {{ join ", " $unknownAlerts }}, which files/alerts.yaml does not have; the alerts are {{ join ", " $names }}
{{- else if and $m.prometheusRule.enabled (ge (mul (int $m.prometheusRule.expiryDays) 86400) $renewBefore) -}}
certctl: monitoring.prometheusRule.expiryDays ({{ $m.prometheusRule.expiryDays }}) must be below certificate.renewBefore ({{ default "30d" .Values.certificate.renewBefore }}): certctl renews only then, so the alert would fire before every renewal
{{- else if and $m.prometheusRule.enabled (ge (int $m.prometheusRule.criticalExpiryDays) (int $m.prometheusRule.expiryDays)) -}}
certctl: monitoring.prometheusRule.criticalExpiryDays ({{ $m.prometheusRule.criticalExpiryDays }}) must be below monitoring.prometheusRule.expiryDays ({{ $m.prometheusRule.expiryDays }}): the critical alert is the later step
{{- else if and $pdbRequested (not $s.createDeployment) -}}
certctl: sidecar.podDisruptionBudget.enabled needs sidecar.createDeployment: the chart renders no pods of its own; give your Deployment its own PodDisruptionBudget
{{- else if and $np.enabled (not $s.createDeployment) -}}
certctl: sidecar.networkPolicy.enabled needs sidecar.createDeployment: the chart renders no pods of its own; give your Deployment its own NetworkPolicy (see the chart README)
{{- end -}}
{{- end -}}
