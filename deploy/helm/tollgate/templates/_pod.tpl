{{/* The security context every Tollgate container runs with: the image's nonroot user. */}}
{{- define "tollgate.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "tollgate.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/* The store's URL, as the environment variable every command reads. */}}
{{- define "tollgate.storeEnv" -}}
{{- $s := .Values.store -}}
- name: TOLLGATE_STORE
{{- if eq $s.type "redis" }}
  valueFrom:
    secretKeyRef:
      name: {{ include "tollgate.storeSecretName" . }}
      key: {{ if $s.redis.existingSecret }}{{ $s.redis.existingSecretKey }}{{ else }}url{{ end }}
{{- else if eq $s.type "dynamodb" }}
  value: {{ printf "dynamodb://%s%s" $s.dynamodb.table (ternary (printf "?region=%s" $s.dynamodb.region) "" (ne $s.dynamodb.region "")) | quote }}
{{- else }}
  value: "embedded:/data/tollgate.db"
{{- end }}
{{- if and (eq $s.type "dynamodb") $s.dynamodb.region }}
- name: AWS_REGION
  value: {{ $s.dynamodb.region | quote }}
{{- end }}
{{- end -}}

{{/* The server's pod template, for its Deployment or its StatefulSet. */}}
{{- define "tollgate.serverPod" -}}
metadata:
  labels:
    {{- include "tollgate.selectorLabels" . | nindent 4 }}
    {{- with .Values.server.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- if or (include "tollgate.keysFileOn" .) .Values.server.podAnnotations .Values.server.rls.enabled }}
  annotations:
    {{- if include "tollgate.keysFileOn" . }}
    checksum/keys: {{ .Values.keys.file | sha256sum }}
    {{- end }}
    {{- if .Values.server.rls.enabled }}
    checksum/rls: {{ .Values.server.rls.config | sha256sum }}
    {{- end }}
    {{- with .Values.server.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- end }}
spec:
  serviceAccountName: {{ include "tollgate.serviceAccountName" . }}
  # Tollgate never calls the Kubernetes API; IRSA's web identity token is
  # a volume of its own, which EKS's webhook adds.
  automountServiceAccountToken: false
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- include "tollgate.podSecurityContext" . | nindent 4 }}
  terminationGracePeriodSeconds: {{ .Values.server.terminationGracePeriodSeconds }}
  containers:
    - name: tollgate
      image: {{ include "tollgate.image" . | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args:
        - serve
        - --addr=0.0.0.0:{{ .Values.server.httpPort }}
        - --log-format={{ .Values.server.logFormat }}
        - --log-level={{ .Values.server.logLevel }}
        {{- if include "tollgate.keysFileOn" . }}
        - --keys=/etc/tollgate/keys/keys
        {{- end }}
        {{- if .Values.keys.allowUnauthenticated }}
        - --allow-unauthenticated
        {{- end }}
        {{- if .Values.server.rls.enabled }}
        - --grpc-addr=0.0.0.0:{{ .Values.server.rls.port }}
        - --rls-config=/etc/tollgate/rls/rls.yaml
        {{- end }}
        {{- if include "tollgate.workersOn" . }}
        - --reconcile-interval=0
        {{- end }}
        {{- range .Values.server.extraArgs }}
        - {{ . | quote }}
        {{- end }}
      env:
        {{- include "tollgate.storeEnv" . | nindent 8 }}
        {{- with .Values.server.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      ports:
        - name: http
          containerPort: {{ .Values.server.httpPort }}
          protocol: TCP
        {{- if .Values.server.rls.enabled }}
        - name: grpc-rls
          containerPort: {{ .Values.server.rls.port }}
          protocol: TCP
        {{- end }}
      readinessProbe:
        httpGet:
          path: /readyz
          port: http
        {{- toYaml .Values.server.readinessProbe | nindent 8 }}
      livenessProbe:
        httpGet:
          path: /healthz
          port: http
        {{- toYaml .Values.server.livenessProbe | nindent 8 }}
      resources:
        {{- toYaml .Values.server.resources | nindent 8 }}
      securityContext:
        {{- include "tollgate.containerSecurityContext" . | nindent 8 }}
      {{- if or (include "tollgate.keysFileOn" .) .Values.server.rls.enabled (eq .Values.store.type "embedded") }}
      volumeMounts:
        {{- if include "tollgate.keysFileOn" . }}
        - name: keys
          mountPath: /etc/tollgate/keys
          readOnly: true
        {{- end }}
        {{- if .Values.server.rls.enabled }}
        - name: rls
          mountPath: /etc/tollgate/rls
          readOnly: true
        {{- end }}
        {{- if eq .Values.store.type "embedded" }}
        - name: data
          mountPath: /data
        {{- end }}
      {{- end }}
  {{- if or (include "tollgate.keysFileOn" .) .Values.server.rls.enabled }}
  volumes:
    {{- if include "tollgate.keysFileOn" . }}
    - name: keys
      secret:
        secretName: {{ include "tollgate.keysSecretName" . }}
        items:
          - key: {{ include "tollgate.keysSecretKey" . }}
            path: keys
    {{- end }}
    {{- if .Values.server.rls.enabled }}
    - name: rls
      configMap:
        name: {{ include "tollgate.fullname" . }}-rls
        items:
          - key: rls.yaml
            path: rls.yaml
    {{- end }}
  {{- end }}
  {{- with .Values.server.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.server.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.server.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.server.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}
