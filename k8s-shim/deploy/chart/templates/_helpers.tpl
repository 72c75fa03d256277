{{/* The release's objects are named after it, the chart's name appended
unless the release name already carries it. */}}
{{- define "dragon.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "dragon.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "dragon.labels" -}}
{{ include "dragon.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Cluster-scoped objects: one release name may be used in two namespaces. */}}
{{- define "dragon.clusterName" -}}
{{- printf "%s-%s" .Release.Namespace (include "dragon.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "dragon.serviceAccountName" -}}
{{- default (include "dragon.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* The `policy:` of the configuration: exactly one source. */}}
{{- define "dragon.policy" -}}
{{- $p := .Values.policy -}}
{{- $sources := compact (list $p.bundled $p.configMap $p.oci) -}}
{{- if ne (len $sources) 1 -}}
{{- fail (printf "set exactly one of policy.bundled, policy.configMap and policy.oci (got %d: %v); unset the default with --set policy.bundled=" (len $sources) $sources) -}}
{{- end -}}
{{- if $p.configMap -}}
/etc/dragon/policy/policy.wasm
{{- else if $p.oci -}}
{{- if not (hasPrefix "oci://" $p.oci) -}}
{{- fail (printf "policy.oci must start with oci:// (got %q)" $p.oci) -}}
{{- end -}}
{{- $p.oci -}}
{{- else -}}
{{- $p.bundled -}}
{{- end -}}
{{- end -}}

{{/* dragon-scheduler's config.yaml: the chart's settings, and
`.Values.config` beside them. */}}
{{- define "dragon.config" -}}
{{- $v := .Values -}}
{{- $c := dict "apiVersion" "dragon.dev/v1alpha1" "kind" "DragonSchedulerConfiguration" -}}
{{- $_ := set $c "schedulerName" $v.schedulerName -}}
{{- $_ = set $c "policy" (include "dragon.policy" .) -}}
{{- $_ = set $c "onPolicyError" $v.policy.onError -}}
{{- if $v.policy.settings -}}{{- $_ = set $c "settings" $v.policy.settings -}}{{- end -}}
{{- if $v.policy.sha256 -}}{{- $_ = set $c "policySha256" $v.policy.sha256 -}}{{- end -}}
{{- if $v.policy.registrySecret -}}
{{- $_ = set $c "registry" (dict "configFile" "/etc/dragon/registry/.dockerconfigjson") -}}
{{- end -}}
{{- $_ = set $c "metricsAddr" (printf "0.0.0.0:%v" $v.metrics.port) -}}
{{- $_ = set $c "cacheDir" "/var/cache/dragon" -}}
{{- if $v.recording.enabled -}}
{{- $_ = set $c "recording" (dict "dir" "/var/lib/dragon/recordings" "maxBytes" (int64 $v.recording.maxBytes)) -}}
{{- else -}}
{{- $_ = set $c "recording" (dict "enabled" false) -}}
{{- end -}}
{{- $le := $v.leaderElection -}}
{{- $_ = set $c "leaderElection" (dict "enabled" $le.enabled "namespace" .Release.Namespace "leaseName" $le.leaseName "leaseDurationSeconds" (int64 $le.leaseDurationSeconds)) -}}
{{- /* `config` adds keys; those above come from their own values (a merge
would also drop a `false` given there). */ -}}
{{- range $key, $value := $v.config -}}
{{- if hasKey $c $key -}}
{{- fail (printf "config.%s is set by the chart: use its own value (see values.yaml)" $key) -}}
{{- end -}}
{{- $_ = set $c $key $value -}}
{{- end -}}
{{- toYaml $c -}}
{{- end -}}
