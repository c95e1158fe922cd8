{{/*
Object names are fixed (greenpipe-exporter, greenpipe-estimator, prometheus, ...), as in
deploy/: one GreenPipe per cluster, and the kustomizations and this chart name the same objects.
*/}}

{{/* Labels of every object's metadata (not of pod templates or selectors). */}}
{{- define "greenpipe.labels" -}}
app.kubernetes.io/part-of: greenpipe
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "greenpipe.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "greenpipe.pullPolicy" -}}
{{- with .Values.image.pullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- end -}}

{{- define "greenpipe.pullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The URL the estimator (and the carbon controller) reach Prometheus at. */}}
{{- define "greenpipe.prometheusUrl" -}}
{{- if .Values.estimator.prometheusUrl -}}
{{ .Values.estimator.prometheusUrl }}
{{- else if .Values.prometheus.enabled -}}
{{ ternary "https" "http" .Values.tls.enabled }}://prometheus.{{ .Release.Namespace }}.svc:9090
{{- else -}}
{{ fail "estimator.prometheusUrl is required with prometheus.enabled=false" }}
{{- end -}}
{{- end -}}

{{/* Whether the Prometheus Operator objects are rendered. */}}
{{- define "greenpipe.operator" -}}
{{- $on := .Values.prometheusOperator.enabled -}}
{{- if eq (toString $on) "auto" -}}
{{- $on = .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" -}}
{{- end -}}
{{- if $on }}true{{ end -}}
{{- end -}}

{{/*
A file shared with the kustomizations (files/ holds symlinks into deploy/, dashboards/ and
estimator/models/profiles/), with the namespace "greenpipe" those files are written for
replaced by the release's.
*/}}
{{- define "greenpipe.file" -}}
{{- $text := .root.Files.Get .path -}}
{{- if not $text -}}{{ fail (printf "chart file %s is missing or empty" .path) }}{{- end -}}
{{- $ns := .root.Release.Namespace -}}
{{- $text | replace ".greenpipe.svc" (printf ".%s.svc" $ns) | replace "names: [greenpipe]" (printf "names: [%s]" $ns) -}}
{{- end -}}

{{/* The GreenPipe rule groups: every files/rules/*.yml, in file-name order. */}}
{{- define "greenpipe.ruleGroups" -}}
{{- $groups := list -}}
{{- range $path, $_ := .Files.Glob "files/rules/*.yml" -}}
{{- $groups = concat $groups (get ($.Files.Get $path | fromYaml) "groups") -}}
{{- end -}}
{{- toYaml $groups -}}
{{- end -}}

{{/* Checksum of rendered templates, for pod-template annotations that roll the pods. */}}
{{- define "greenpipe.checksum" -}}
{{- $out := "" -}}
{{- range .templates -}}
{{- $out = print $out (include (print $.root.Template.BasePath "/" .) $.root) -}}
{{- end -}}
{{- $out | sha256sum -}}
{{- end -}}
