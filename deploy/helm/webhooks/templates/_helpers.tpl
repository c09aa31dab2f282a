{{/* The chart's name. */}}
{{- define "webhooks.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object's name: 42 characters at most, so that the longest suffix
(-bootstrap-script) keeps names within the 63 of a DNS label.
*/}}
{{- define "webhooks.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 42 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 42 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 42 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "webhooks.selectorLabels" -}}
app.kubernetes.io/name: {{ include "webhooks.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "webhooks.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "webhooks.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "webhooks.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/* The Secret the pods read the service's credentials from. */}}
{{- define "webhooks.secretName" -}}
{{- .Values.secrets.existingSecret | default (include "webhooks.fullname" .) }}
{{- end }}

{{/*
The chart's own Secret's keys and values (secrets.existingSecret empty), as YAML. The two
required ones are checked here, so a missing value stops the install before anything runs.
*/}}
{{- define "webhooks.secretValues" -}}
{{- $secrets := .Values.secrets }}
{{- $key := required "secrets.encryptionKey is required unless secrets.existingSecret is set (openssl rand -base64 32)" $secrets.encryptionKey }}
{{- if ne (len (b64dec $key)) 32 }}
{{- fail "secrets.encryptionKey must be 32 bytes encoded in base64 (openssl rand -base64 32)" }}
{{- end }}
DATABASE_URL: {{ required "secrets.databaseUrl is required unless secrets.existingSecret is set" $secrets.databaseUrl | quote }}
SECRET_ENCRYPTION_KEY: {{ $key | quote }}
{{- with $secrets.previousEncryptionKeys }}
SECRET_ENCRYPTION_PREVIOUS_KEYS: {{ . | quote }}
{{- end }}
{{- with $secrets.eventProducerToken }}
EVENT_PRODUCER_TOKEN: {{ . | quote }}
{{- end }}
{{- if .Values.temporal.apiKey.enabled }}
TEMPORAL_API_KEY: {{ required "secrets.temporalApiKey is required with temporal.apiKey.enabled unless secrets.existingSecret is set" $secrets.temporalApiKey | quote }}
{{- end }}
{{- end }}

{{/*
Environment variables read from a Secret: (dict "secret" name "required" (list …) "optional" (list …)),
each variable under the key of its own name.
*/}}
{{- define "webhooks.secretEnv" -}}
{{- range .required }}
- name: {{ . }}
  valueFrom:
    secretKeyRef:
      name: {{ $.secret }}
      key: {{ . }}
{{- end }}
{{- range .optional }}
- name: {{ . }}
  valueFrom:
    secretKeyRef:
      name: {{ $.secret }}
      key: {{ . }}
      optional: true
{{- end }}
{{- end }}

{{/* Whether the connection to Temporal uses TLS: asked for, or implied by a certificate or an API key. */}}
{{- define "webhooks.temporalTls" -}}
{{- $tls := .Values.temporal.tls }}
{{- if or $tls.enabled $tls.clientCertSecret $tls.serverCaSecret .Values.temporal.apiKey.enabled }}true{{ end }}
{{- end }}

{{- define "webhooks.temporalClientCertDir" -}}/etc/temporal-tls/client{{- end }}
{{- define "webhooks.temporalServerCaDir" -}}/etc/temporal-tls/server-ca{{- end }}

{{/*
The Temporal connection (Temporal's own environment configuration names, which the service and the
`temporal` CLI both read), given (dict "root" $ "secret" name); the API key from that Secret.
*/}}
{{- define "webhooks.temporalEnv" -}}
{{- $temporal := .root.Values.temporal }}
- name: TEMPORAL_ADDRESS
  value: {{ required "temporal.address is required (host:port of the Temporal frontend)" $temporal.address | quote }}
- name: TEMPORAL_NAMESPACE
  value: {{ $temporal.namespace | quote }}
{{- if include "webhooks.temporalTls" .root }}
- name: TEMPORAL_TLS
  value: "true"
{{- end }}
{{- with $temporal.tls.serverName }}
- name: TEMPORAL_TLS_SERVER_NAME
  value: {{ . | quote }}
{{- end }}
{{- if $temporal.tls.clientCertSecret }}
- name: TEMPORAL_TLS_CLIENT_CERT_PATH
  value: {{ include "webhooks.temporalClientCertDir" .root }}/tls.crt
- name: TEMPORAL_TLS_CLIENT_KEY_PATH
  value: {{ include "webhooks.temporalClientCertDir" .root }}/tls.key
{{- end }}
{{- if $temporal.tls.serverCaSecret }}
- name: TEMPORAL_TLS_SERVER_CA_CERT_PATH
  value: {{ include "webhooks.temporalServerCaDir" .root }}/ca.crt
{{- end }}
{{- if $temporal.apiKey.enabled }}
{{- include "webhooks.secretEnv" (dict "secret" .secret "required" (list "TEMPORAL_API_KEY")) }}
{{- end }}
{{- end }}

{{/* The service's settings from `config`; the variables the chart sets itself are refused there. */}}
{{- define "webhooks.configEnv" -}}
{{- $managed := list "PORT" "HOST" "METRICS_PORT" "METRICS_HOST" "TEMPORAL_SDK_METRICS_PORT" "TEMPORAL_ADDRESS" "TEMPORAL_NAMESPACE" "TEMPORAL_TASK_QUEUE" "TEMPORAL_TLS" "TEMPORAL_TLS_SERVER_NAME" "TEMPORAL_TLS_CLIENT_CERT_PATH" "TEMPORAL_TLS_CLIENT_KEY_PATH" "TEMPORAL_TLS_SERVER_CA_CERT_PATH" "TEMPORAL_API_KEY" "DATABASE_URL" "SECRET_ENCRYPTION_KEY" "SECRET_ENCRYPTION_PREVIOUS_KEYS" "EVENT_PRODUCER_TOKEN" }}
{{- range $name, $value := .Values.config }}
{{- if has $name $managed }}
{{- fail (printf "config.%s is set by the chart: use its own value (see values.yaml)" $name) }}
{{- end }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- end }}

{{/* The volumes of the Temporal client certificate and server CA, when given. */}}
{{- define "webhooks.temporalTlsVolumes" -}}
{{- $tls := .Values.temporal.tls }}
{{- if $tls.clientCertSecret }}
- name: temporal-client-cert
  secret:
    secretName: {{ $tls.clientCertSecret }}
    defaultMode: 288 # 0440: the pods' group (fsGroup) reads it
    items:
      - { key: tls.crt, path: tls.crt }
      - { key: tls.key, path: tls.key }
{{- end }}
{{- if $tls.serverCaSecret }}
- name: temporal-server-ca
  secret:
    secretName: {{ $tls.serverCaSecret }}
    defaultMode: 288 # 0440: the pods' group (fsGroup) reads it
    items:
      - { key: {{ $tls.serverCaKey }}, path: ca.crt }
{{- end }}
{{- end }}

{{- define "webhooks.temporalTlsVolumeMounts" -}}
{{- $tls := .Values.temporal.tls }}
{{- if $tls.clientCertSecret }}
- name: temporal-client-cert
  mountPath: {{ include "webhooks.temporalClientCertDir" . }}
  readOnly: true
{{- end }}
{{- if $tls.serverCaSecret }}
- name: temporal-server-ca
  mountPath: {{ include "webhooks.temporalServerCaDir" . }}
  readOnly: true
{{- end }}
{{- end }}

{{/* The service's command for a role: the flags of package.json's scripts. */}}
{{- define "webhooks.command" -}}
- node
- --max-old-space-size=192
- --import
- ./scripts/typescript.mjs
- src/main.ts
- {{ . }}
{{- end }}

{{/* What every pod of the chart shares: its account, security context and placement. */}}
{{- define "webhooks.podSettings" -}}
{{- with .Values.serviceAccountName }}
serviceAccountName: {{ . }}
{{- end }}
automountServiceAccountToken: false
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
