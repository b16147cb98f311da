{{- define "leafsync.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "leafsync.fullname" -}}
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

{{- define "leafsync.labels" -}}
app.kubernetes.io/name: {{ include "leafsync.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "leafsync.selectorLabels" -}}
app.kubernetes.io/name: {{ include "leafsync.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "leafsync.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "leafsync.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
"true" when the replicas share the members (docs/install.md, "Running
more than one replica"): config.sharding.enabled when set, else more
than one replica.
*/}}
{{- define "leafsync.sharded" -}}
{{- $s := .Values.config.sharding | default dict -}}
{{- if hasKey $s "enabled" -}}
{{- $s.enabled -}}
{{- else -}}
{{- gt (int .Values.replicaCount) 1 -}}
{{- end -}}
{{- end -}}

{{/*
leafsync's config file: config, with sharding turned on and its ring
named after the release when the replicas share the members.
*/}}
{{- define "leafsync.config" -}}
{{- $config := deepCopy .Values.config -}}
{{- if eq (include "leafsync.sharded" .) "true" -}}
{{- if ($config.sharding).replica -}}
{{- fail "config.sharding.replica would give every replica one name: leave it unset, each replica is named after its pod (POD_NAME)" -}}
{{- end -}}
{{- $_ := set $config "sharding" (merge (deepCopy ($config.sharding | default dict)) (dict "enabled" true "ring" .Release.Name)) -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}

{{/*
The seconds of a Go duration (90s, 1m30s, 1.5h), rounded up.
*/}}
{{- define "leafsync.seconds" -}}
{{- $unit := dict "h" 3600 "m" 60 "s" 1 "ms" 0.001 "us" 0.000001 "µs" 0.000001 "ns" 0.000000001 -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "[0-9.]+(ns|us|µs|ms|h|m|s)" (toString .) -1 -}}
{{- $total = addf $total (mulf (float64 (regexFind "^[0-9.]+" .)) (get $unit (regexReplaceAll "^[0-9.]+" . ""))) -}}
{{- end -}}
{{- ceil $total -}}
{{- end -}}
