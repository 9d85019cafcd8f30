{{/* Names and labels. */}}
{{- define "larder.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "larder.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "larder.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "larder.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "larder.tokensSecret" -}}
{{- .Values.auth.existingSecret | default (printf "%s-tokens" (include "larder.fullname" .)) -}}
{{- end -}}

{{/* host:port of every master, as --master takes them. */}}
{{- define "larder.masterAddress" -}}
{{- $name := include "larder.fullname" . -}}
{{- if .Values.ha.enabled -}}
{{- $addrs := list -}}
{{- range $i := until (int .Values.ha.replicas) -}}
{{- $addrs = append $addrs (printf "%s-master-%d.%s-master-headless.%s.svc:%d" $name $i $name $.Release.Namespace (int $.Values.master.port)) -}}
{{- end -}}
{{- join "," $addrs -}}
{{- else -}}
{{- printf "%s-master.%s.svc:%d" $name .Release.Namespace (int .Values.master.port) -}}
{{- end -}}
{{- end -}}

{{- define "larder.etcdEndpoints" -}}
{{- if .Values.ha.etcd.endpoints -}}
{{- .Values.ha.etcd.endpoints -}}
{{- else -}}
{{- $name := include "larder.fullname" . -}}
{{- $eps := list -}}
{{- range $i := until (int .Values.ha.etcd.replicas) -}}
{{- $eps = append $eps (printf "%s-etcd-%d.%s-etcd.%s.svc:2379" $name $i $name $.Release.Namespace) -}}
{{- end -}}
{{- join "," $eps -}}
{{- end -}}
{{- end -}}

{{/* Flags every daemon and client takes for TLS; the files are in /etc/larder/tls. */}}
{{- define "larder.tlsClientArgs" -}}
{{- if .Values.tls.enabled }}
- --tls_ca_file=/etc/larder/tls/ca.crt
{{- if .Values.tls.serverName }}
- --tls_server_name={{ .Values.tls.serverName }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "larder.tlsServerArgs" -}}
{{- if .Values.tls.enabled }}
- --tls_cert_file=/etc/larder/tls/tls.crt
- --tls_key_file=/etc/larder/tls/tls.key
{{- end }}
{{- end -}}

{{/* Under-store credentials: environment from the named Secrets. */}}
{{- define "larder.credentialsEnvFrom" -}}
{{- range $s := list .Values.credentials.awsSecret .Values.credentials.azureSecret .Values.credentials.hdfsSecret }}
{{- if $s }}
- secretRef:
    name: {{ $s }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "larder.secretVolumes" -}}
- name: tokens
  secret:
    secretName: {{ include "larder.tokensSecret" . }}
    defaultMode: 0400
{{- if .Values.tls.enabled }}
- name: tls
  secret:
    secretName: {{ required "tls.secretName is required with tls.enabled" .Values.tls.secretName }}
    defaultMode: 0400
{{- end }}
{{- end -}}

{{- define "larder.secretMounts" -}}
- name: tokens
  mountPath: /etc/larder/tokens
  readOnly: true
{{- if .Values.tls.enabled }}
- name: tls
  mountPath: /etc/larder/tls
  readOnly: true
{{- end }}
{{- end -}}

{{/* A memory quantity: the RAM tier plus the overhead, in MiB ("8Gi" + "1Gi" -> "9216Mi").
     Sizes are Ki/Mi/Gi/Ti or KiB/MiB/GiB/TiB. */}}
{{- define "larder.mib" -}}
{{- $s := . | toString | trimSuffix "B" -}}
{{- if hasSuffix "Ti" $s -}}{{- mul (trimSuffix "Ti" $s | int) 1048576 -}}
{{- else if hasSuffix "Gi" $s -}}{{- mul (trimSuffix "Gi" $s | int) 1024 -}}
{{- else if hasSuffix "Mi" $s -}}{{- trimSuffix "Mi" $s | int -}}
{{- else -}}{{- fail (printf "size %q: want a whole number of Mi, Gi or Ti (e.g. 8Gi)" .) -}}
{{- end -}}
{{- end -}}

{{- define "larder.memory" -}}
{{- add (include "larder.mib" .tier | int) (include "larder.mib" .overhead | int) -}}Mi
{{- end -}}
