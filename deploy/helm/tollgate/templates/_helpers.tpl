{{/* The release's full name, at most 63 characters (a DNS label). */}}
{{- define "tollgate.fullname" -}}
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

{{- define "tollgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The workers' name: the full name with a suffix, within 63 characters. */}}
{{- define "tollgate.workersName" -}}
{{- printf "%s-workers" (include "tollgate.fullname" . | trunc 55 | trimSuffix "-") -}}
{{- end -}}

{{- define "tollgate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "tollgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The selector of the server's pods; the workers' add their component. */}}
{{- define "tollgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tollgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: server
{{- end -}}

{{- define "tollgate.workersSelectorLabels" -}}
app.kubernetes.io/name: {{ include "tollgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: workers
{{- end -}}

{{- define "tollgate.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "tollgate.serviceAccountName" -}}
{{- default (include "tollgate.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* Whether the workers' Deployment is rendered: not over the embedded store. */}}
{{- define "tollgate.workersOn" -}}
{{- if and .Values.workers.enabled (ne .Values.store.type "embedded") -}}true{{- end -}}
{{- end -}}

{{- define "tollgate.keysSecretName" -}}
{{- default (printf "%s-keys" (include "tollgate.fullname" . | trunc 58 | trimSuffix "-")) .Values.keys.existingSecret -}}
{{- end -}}

{{- define "tollgate.keysSecretKey" -}}
{{- if .Values.keys.existingSecret -}}{{ .Values.keys.existingSecretKey }}{{- else -}}keys{{- end -}}
{{- end -}}

{{- define "tollgate.keysFileOn" -}}
{{- if or .Values.keys.file .Values.keys.existingSecret -}}true{{- end -}}
{{- end -}}

{{- define "tollgate.storeSecretName" -}}
{{- default (printf "%s-store" (include "tollgate.fullname" . | trunc 57 | trimSuffix "-")) .Values.store.redis.existingSecret -}}
{{- end -}}

{{/*
The values' checks, failing the render with the value to change: what the
server would otherwise refuse at start, or a shape the store cannot have.
*/}}
{{- define "tollgate.validate" -}}
{{- $t := .Values.store.type -}}
{{- if not (has $t (list "dynamodb" "redis" "embedded")) -}}
{{- fail (printf "store.type %q: want dynamodb, redis or embedded" $t) -}}
{{- end -}}
{{- if and (eq $t "dynamodb") (not .Values.store.dynamodb.roleArn) -}}
{{- fail "store.dynamodb.roleArn: the IAM role (IRSA) the server assumes is required with the dynamodb store" -}}
{{- end -}}
{{- if and (eq $t "dynamodb") (not .Values.store.dynamodb.table) -}}
{{- fail "store.dynamodb.table is required with the dynamodb store" -}}
{{- end -}}
{{- if and (eq $t "redis") (not .Values.store.redis.url) (not .Values.store.redis.existingSecret) -}}
{{- fail "store.redis.url (or store.redis.existingSecret) is required with the redis store" -}}
{{- end -}}
{{- if and (eq $t "embedded") .Values.server.autoscaling.enabled -}}
{{- fail "server.autoscaling.enabled: the embedded store runs one replica (one process owns the file); use dynamodb or redis to scale" -}}
{{- end -}}
{{- if and .Values.keys.file .Values.keys.existingSecret -}}
{{- fail "keys.file and keys.existingSecret: give one" -}}
{{- end -}}
{{- if not (or (include "tollgate.keysFileOn" .) .Values.keys.inStore .Values.keys.allowUnauthenticated) -}}
{{- fail "keys: the server refuses to listen beyond loopback without keys: set keys.file (or keys.existingSecret), or keys.inStore=true once the store holds a key, or keys.allowUnauthenticated=true" -}}
{{- end -}}
{{- if and .Values.server.rls.enabled (not .Values.server.rls.config) -}}
{{- fail "server.rls.config: the Envoy rate-limit service needs its descriptor mapping (docs/envoy.md)" -}}
{{- end -}}
{{- end -}}
