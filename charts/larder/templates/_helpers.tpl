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

{{/* The chart's own etcd: HA, deploy, and no external endpoints. "true" or empty. */}}
{{- define "larder.ownEtcd" -}}
{{- if and .Values.ha.enabled .Values.ha.etcd.deploy (not .Values.ha.etcd.endpoints) -}}true{{- end -}}
{{- end -}}

{{/* Larder's gRPC certificate: the named Secret, else the one the certificate Job makes. */}}
{{- define "larder.tlsSecretName" -}}
{{- .Values.tls.secretName | default (printf "%s-tls" (include "larder.fullname" .)) -}}
{{- end -}}

{{- define "larder.tlsGenerated" -}}
{{- if and .Values.tls.enabled (not .Values.tls.secretName) -}}true{{- end -}}
{{- end -}}

{{/* The name clients expect in the servers' certificate (--tls_server_name): tls.serverName,
     else, with a generated certificate, the master Service's name, which that certificate
     holds. Workers are dialled by pod IP, which no certificate made before they start can
     name: the override makes every connection check the one name. */}}
{{- define "larder.tlsServerName" -}}
{{- if .Values.tls.serverName -}}
{{- .Values.tls.serverName -}}
{{- else if include "larder.tlsGenerated" . -}}
{{- printf "%s-master.%s.svc" (include "larder.fullname" .) .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{/* The DNS and IP names of the generated Larder certificate. */}}
{{- define "larder.tlsSans" -}}
{{- $name := include "larder.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- $sans := list -}}
{{- with .Values.tls.serverName }}{{ $sans = append $sans (printf "DNS:%s" .) }}{{ end -}}
{{- $svc := printf "%s-master" $name -}}
{{- $sans = concat $sans (list (printf "DNS:%s" $svc) (printf "DNS:%s.%s" $svc $ns) (printf "DNS:%s.%s.svc" $svc $ns) (printf "DNS:%s.%s.svc.cluster.local" $svc $ns)) -}}
{{- $sans = concat $sans (list (printf "DNS:*.%s-master-headless.%s.svc" $name $ns) (printf "DNS:*.%s-master-headless.%s.svc.cluster.local" $name $ns) "DNS:localhost" "IP:127.0.0.1") -}}
{{- join "," (uniq $sans) -}}
{{- end -}}

{{/* The chart's etcd with certificates the certificate Job makes (neither Secret named).
     Naming only one of the two fails: both must come from the same CA. */}}
{{- define "larder.etcdTlsGenerated" -}}
{{- if include "larder.ownEtcd" . -}}
{{- $e := .Values.ha.etcd -}}
{{- if and $e.tlsSecret (not $e.serverTlsSecret) -}}
{{- fail "ha.etcd.tlsSecret is set but not ha.etcd.serverTlsSecret: the chart's etcd needs both (from one CA), or neither (the certificate Job makes them)" -}}
{{- else if and $e.serverTlsSecret (not $e.tlsSecret) -}}
{{- fail "ha.etcd.serverTlsSecret is set but not ha.etcd.tlsSecret: the masters need a client certificate from the same CA, or set neither (the certificate Job makes both)" -}}
{{- else if not $e.tlsSecret -}}true
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "larder.etcdTlsSecretName" -}}
{{- printf "%s-etcd-tls" (include "larder.fullname" .) -}}
{{- end -}}

{{/* The DNS and IP names of the generated etcd certificate: the Service, every member, a
     wildcard for the members, and loopback (etcdctl in the pod, etcd's own gateway). */}}
{{- define "larder.etcdSans" -}}
{{- $name := include "larder.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- $svc := printf "%s-etcd" $name -}}
{{- $sans := list (printf "DNS:%s" $svc) (printf "DNS:%s.%s" $svc $ns) (printf "DNS:%s.%s.svc" $svc $ns) (printf "DNS:%s.%s.svc.cluster.local" $svc $ns) -}}
{{- range $i := until (int .Values.ha.etcd.replicas) -}}
{{- $sans = concat $sans (list (printf "DNS:%s-%d.%s.%s.svc" $svc $i $svc $ns) (printf "DNS:%s-%d.%s.%s.svc.cluster.local" $svc $i $svc $ns)) -}}
{{- end -}}
{{- $sans = concat $sans (list (printf "DNS:*.%s.%s.svc" $svc $ns) (printf "DNS:*.%s.%s.svc.cluster.local" $svc $ns) "DNS:localhost" "IP:127.0.0.1") -}}
{{- join "," $sans -}}
{{- end -}}

{{/* TLS from the masters to etcd: a Secret named, or the chart's etcd's generated one. */}}
{{- define "larder.masterEtcdTls" -}}
{{- if and .Values.ha.enabled (or .Values.ha.etcd.tlsSecret (include "larder.etcdTlsGenerated" .)) -}}true{{- end -}}
{{- end -}}

{{- define "larder.certJobNeeded" -}}
{{- if or (include "larder.tlsGenerated" .) (include "larder.etcdTlsGenerated" .) -}}true{{- end -}}
{{- end -}}

{{/* Flags every daemon and client takes for TLS; the files are in /etc/larder/tls. */}}
{{- define "larder.tlsClientArgs" -}}
{{- if .Values.tls.enabled }}
- --tls_ca_file=/etc/larder/tls/ca.crt
{{- with include "larder.tlsServerName" . }}
- --tls_server_name={{ . }}
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

{{/* The tokens and TLS files a pod gets, no more: (dict "root" $ "tokens" (list KEY...)
     "serverCert" BOOL). Servers get the tokens file and their certificate and key; the FUSE
     daemons and the mounts Job only the token they present and the CA. */}}
{{- define "larder.secretVolumes" -}}
{{- $root := .root -}}
- name: tokens
  secret:
    secretName: {{ include "larder.tokensSecret" $root }}
    defaultMode: 0400
    items:
      {{- range .tokens }}
      - key: {{ . }}
        path: {{ . }}
      {{- end }}
{{- if $root.Values.tls.enabled }}
- name: tls
  secret:
    secretName: {{ include "larder.tlsSecretName" $root }}
    defaultMode: 0400
    items:
      - key: ca.crt
        path: ca.crt
      {{- if .serverCert }}
      - key: tls.crt
        path: tls.crt
      - key: tls.key
        path: tls.key
      {{- end }}
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

{{/* Pods that run without root: the masters, the chart's etcd, the mounts and certificate
     Jobs (uid and gid nonRoot.uid/gid, the image's `larder` user). fsGroup makes the volumes
     (state, etcd data) and the Secret files (mode 0400, then group-readable) theirs. */}}
{{- define "larder.nonRootPodSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.nonRoot.uid }}
runAsGroup: {{ .Values.nonRoot.gid }}
fsGroup: {{ .Values.nonRoot.gid }}
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "larder.nonRootContainerSecurityContext" -}}
runAsNonRoot: true
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
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
