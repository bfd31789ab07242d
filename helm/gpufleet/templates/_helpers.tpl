{{/* Names and labels shared by every object. */}}
{{- define "gpufleet.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpufleet.fullname" -}}
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

{{- define "gpufleet.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "gpufleet.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component: include "gpufleet.selectorLabels" (list . "agent") */}}
{{- define "gpufleet.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "gpufleet.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "gpufleet.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "gpufleet.secretName" -}}
{{- default (printf "%s-secrets" (include "gpufleet.fullname" .)) .Values.secret.existingSecret -}}
{{- end -}}

{{- define "gpufleet.collectorUrl" -}}
{{- default (printf "http://%s-collector.%s.svc:%v" (include "gpufleet.fullname" .) .Release.Namespace .Values.collector.service.port) .Values.agent.collectorUrl -}}
{{- end -}}

{{/* Where secrets are mounted in every pod. */}}
{{- define "gpufleet.secretDir" -}}/etc/gpufleet/secrets{{- end -}}

{{/* Auto-release acts on Kubernetes only when some policy enforces ("true" or ""). */}}
{{- define "gpufleet.enforcing" -}}
{{- $a := .Values.collector.config.actions -}}
{{- $on := eq (toString (default dict $a.default).mode) "enforce" -}}
{{- range $name, $policy := $a.policies -}}
{{- if eq (toString $policy.mode) "enforce" }}{{ $on = true }}{{ end -}}
{{- end -}}
{{- if $on }}true{{ end -}}
{{- end -}}

{{/* Remediation cordons Kubernetes nodes (actions.remediation.mode enforce, not via slurm). */}}
{{- define "gpufleet.cordoning" -}}
{{- $r := default dict .Values.collector.config.actions.remediation -}}
{{- if and (eq (toString $r.mode) "enforce") (ne (toString $r.via) "slurm") }}true{{ end -}}
{{- end -}}

{{/* The collector talks to the Kubernetes API: auto-release enforces, or remediation cordons. */}}
{{- define "gpufleet.kubeActions" -}}
{{- if or (include "gpufleet.enforcing" .) (include "gpufleet.cordoning" .) }}true{{ end -}}
{{- end -}}

{{/* An enforcing policy not bound to one namespace: the default, or a team:/owner: one. */}}
{{- define "gpufleet.enforcingAnywhere" -}}
{{- $a := .Values.collector.config.actions -}}
{{- $on := eq (toString (default dict $a.default).mode) "enforce" -}}
{{- range $name, $policy := $a.policies -}}
{{- if and (contains ":" $name) (eq (toString $policy.mode) "enforce") }}{{ $on = true }}{{ end -}}
{{- end -}}
{{- if $on }}true{{ end -}}
{{- end -}}

{{/* The collector needs its ServiceAccount: a policy enforces, remediation cordons, or it reads pod metadata. */}}
{{- define "gpufleet.collectorAccount" -}}
{{- if or (include "gpufleet.kubeActions" .) (.Values.collector.config.kubernetes).enabled }}true{{ end -}}
{{- end -}}

{{/* Some enforcing policy really acts (dry_run off; dry_run defaults to true). */}}
{{- define "gpufleet.acting" -}}
{{- $a := .Values.collector.config.actions -}}
{{- $acting := false -}}
{{- range $policy := append (values (default dict $a.policies)) (default dict $a.default) -}}
{{- if and (eq (toString $policy.mode) "enforce") (hasKey $policy "dry_run") (not $policy.dry_run) }}{{ $acting = true }}{{ end -}}
{{- end -}}
{{- if $acting }}true{{ end -}}
{{- end -}}

{{/* The agent's --config file: the agent.config values plus the keys the chart owns. */}}
{{- define "gpufleet.agentConfig" -}}
{{- $cfg := deepCopy .Values.agent.config -}}
{{- $shipper := merge (dict "url" (include "gpufleet.collectorUrl" .) "spool_dir" "/var/lib/gpufleet/spool") (default dict $cfg.shipper) -}}
{{- $exporter := merge (dict "address" "0.0.0.0") (default dict $cfg.exporter) -}}
{{- $attribution := merge (dict "kubelet_socket" "/var/lib/kubelet/pod-resources/kubelet.sock" "proc_root" "/proc" "cgroup_root" "/host/sys/fs/cgroup") (default dict $cfg.attribution) -}}
{{- $_ := set $cfg "shipper" $shipper -}}
{{- $_ = set $cfg "exporter" $exporter -}}
{{- $_ = set $cfg "attribution" $attribution -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* The collector's --config file: the collector.config values plus the keys the chart owns. */}}
{{- define "gpufleet.collectorConfig" -}}
{{- $cfg := deepCopy .Values.collector.config -}}
{{- $server := merge (dict "host" "0.0.0.0" "tokens_file" (printf "%s/collector-tokens" (include "gpufleet.secretDir" .))) (default dict $cfg.server) -}}
{{- $ledger := default dict $cfg.ledger -}}
{{- if not (include "gpufleet.postgresSecret" .) -}}
{{- $ledger = merge (dict "url" "/var/lib/gpufleet/gpufleet.db") $ledger -}}
{{- end -}}
{{- $_ := set $cfg "server" $server -}}
{{- $_ = set $cfg "ledger" $ledger -}}
{{- $influx := default dict $cfg.influx -}}
{{- if $influx.url -}}
{{- $_ = set $cfg "influx" (merge (dict "token_file" (printf "%s/influx-token" (include "gpufleet.secretDir" .))) $influx) -}}
{{- end -}}
{{- $actions := deepCopy (default dict $cfg.actions) -}}
{{- $k8s := merge (dict "enabled" (eq (include "gpufleet.kubeActions" .) "true")) (default dict $actions.kubernetes) -}}
{{- $_ = set $actions "kubernetes" $k8s -}}
{{- $hook := default dict $actions.webhook -}}
{{- if .Values.secret.actionWebhook -}}
{{- $_ = set $hook "url_file" (printf "%s/action-webhook" (include "gpufleet.secretDir" .)) -}}
{{- end -}}
{{- if .Values.secret.actionWebhookKey -}}
{{- $_ = set $hook "secret_file" (printf "%s/action-webhook-key" (include "gpufleet.secretDir" .)) -}}
{{- end -}}
{{- $_ = set $actions "webhook" $hook -}}
{{- $_ = set $cfg "actions" $actions -}}
{{- if $cfg.notifications -}}
{{- $_ = set $cfg "notifications" (include "gpufleet.notifications" . | fromYaml) -}}
{{- else -}}
{{- $_ = unset $cfg "notifications" -}}
{{- end -}}
{{- if .Values.collector.priceBook -}}
{{- $pricing := merge (dict "price_book" "/etc/gpufleet/pricebook.yaml") (default dict $cfg.pricing) -}}
{{- $_ = set $cfg "pricing" $pricing -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* notifications: each channel's URL and signing key are files from the Secret. */}}
{{- define "gpufleet.notifications" -}}
{{- $n := deepCopy .Values.collector.config.notifications -}}
{{- $dir := include "gpufleet.secretDir" . -}}
{{- $channels := list -}}
{{- range $n.channels -}}
{{- if not (or $.Values.secret.existingSecret (hasKey $.Values.secret.webhooks .name)) -}}
{{- fail (printf "notifications channel %q: set secret.webhooks.%s to its URL" .name .name) -}}
{{- end -}}
{{- $ch := merge (dict "url_file" (printf "%s/webhook-%s" $dir .name)) . -}}
{{- if hasKey $.Values.secret.signingKeys .name -}}
{{- $_ := set $ch "secret_file" (printf "%s/signing-key-%s" $dir .name) -}}
{{- end -}}
{{- $channels = append $channels $ch -}}
{{- end -}}
{{- $_ := set $n "channels" $channels -}}
{{- toYaml $n -}}
{{- end -}}

{{/* The Secret holding the PostgreSQL URL ("" = SQLite on a volume). */}}
{{- define "gpufleet.postgresSecret" -}}
{{- $pg := .Values.collector.postgresql -}}
{{- if and $pg.existingSecret $pg.cnpgCluster -}}
{{- fail "collector.postgresql: set existingSecret or cnpgCluster, not both" -}}
{{- end -}}
{{- if $pg.cnpgCluster -}}{{ printf "%s-app" $pg.cnpgCluster }}{{- else -}}{{ $pg.existingSecret }}{{- end -}}
{{- end -}}

{{/* The key of that Secret: CloudNativePG's is always uri. */}}
{{- define "gpufleet.postgresKey" -}}
{{- if .Values.collector.postgresql.cnpgCluster -}}uri{{- else -}}{{ .Values.collector.postgresql.key }}{{- end -}}
{{- end -}}
