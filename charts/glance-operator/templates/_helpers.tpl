{{/* The chart's name, and the full name every object name starts with. */}}
{{- define "glance-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "glance-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Names of the two workloads; each names its Deployment, ServiceAccount and Services. */}}
{{- define "glance-operator.manager.name" -}}
{{- include "glance-operator.fullname" . | trunc 55 | trimSuffix "-" }}-manager
{{- end }}

{{- define "glance-operator.webhook.name" -}}
{{- include "glance-operator.fullname" . | trunc 55 | trimSuffix "-" }}-webhook
{{- end }}

{{/* The Secret holding the webhook's serving certificate. */}}
{{- define "glance-operator.webhook.secretName" -}}
{{- if .Values.webhook.certManager.enabled }}
{{- include "glance-operator.webhook.name" . }}-serving-cert
{{- else }}
{{- required "webhook.tls.secretName is required when webhook.certManager.enabled is false" .Values.webhook.tls.secretName }}
{{- end }}
{{- end }}

{{- define "glance-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "glance-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: glance-operator
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The extra labels of a component's pods: include with (list $ .Values.manager.podLabels); the pod's own win. */}}
{{- define "glance-operator.podLabels" -}}
{{- $ := index . 0 -}}
{{- with merge (dict) (index . 1) $.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels of a component: include with (list $ "manager"). */}}
{{- define "glance-operator.selectorLabels" -}}
{{- $ := index . 0 -}}
app.kubernetes.io/name: {{ include "glance-operator.name" $ }}
app.kubernetes.io/instance: {{ $.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{- define "glance-operator.componentLabels" -}}
{{ include "glance-operator.labels" (index . 0) }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{/* An image reference from {repository, tag, digest}: include with (list $ .Values.manager.image). */}}
{{- define "glance-operator.image" -}}
{{- $ := index . 0 -}}
{{- $image := index . 1 }}
{{- $repository := $image.repository }}
{{- with $.Values.global.imageRegistry }}
{{- $path := splitList "/" $repository }}
{{- $first := first $path }}
{{- if and (gt (len $path) 1) (or (contains "." $first) (contains ":" $first) (eq "localhost" $first)) }}
{{- $path = rest $path }}
{{- end }}
{{- $repository = printf "%s/%s" (trimSuffix "/" .) (join "/" $path) }}
{{- end }}
{{- if $image.digest }}
{{- printf "%s@%s" $repository $image.digest }}
{{- else }}
{{- printf "%s:%s" $repository (default $.Chart.AppVersion $image.tag) }}
{{- end }}
{{- end }}

{{/* The watched namespaces as a list; empty means all. */}}
{{- define "glance-operator.watchNamespaces" -}}
{{- $namespaces := list }}
{{- range splitList "," .Values.watchNamespace }}
{{- if trim . }}{{ $namespaces = append $namespaces (trim .) }}{{ end }}
{{- end }}
{{- toJson $namespaces }}
{{- end }}

{{/*
Kinds of the generated rules that are cluster-scoped. A namespaced install
grants them through a ClusterRole, since a Role cannot; a chart test checks
this list against the API server's discovery.
*/}}
{{- define "glance-operator.clusterScopedResources" -}}
{{- toJson (list "clustersecretstores" "priorityclasses") }}
{{- end }}

{{/*
The rules of a generated ClusterRole (files/rbac/<name>/role.yaml) whose
resources are cluster-scoped (scope "cluster") or namespaced (scope
"namespaced"): include with (dict "root" $ "file" "manager" "scope" "cluster").
*/}}
{{- define "glance-operator.generatedRules" -}}
{{- $clusterScoped := include "glance-operator.clusterScopedResources" .root | fromJsonArray }}
{{- $rules := list }}
{{- range splitList "\n---\n" (.root.Files.Get (printf "files/rbac/%s/role.yaml" .file)) }}
{{- $doc := fromYaml . }}
{{- if eq (get $doc "kind") "ClusterRole" }}
{{- range $doc.rules }}
{{- $resources := list }}
{{- range .resources }}
{{- if eq (has (first (splitList "/" .)) $clusterScoped) (eq $.scope "cluster") }}{{ $resources = append $resources . }}{{ end }}
{{- end }}
{{- if or (eq $.scope "all") (and $resources (ne $.scope "all")) }}
{{- $rule := deepCopy . }}
{{- if ne $.scope "all" }}{{ $_ := set $rule "resources" $resources }}{{ end }}
{{- $rules = append $rules $rule }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- toYaml $rules }}
{{- end }}

{{/* The rules of the generated Role (the leader election Lease and its Events). */}}
{{- define "glance-operator.generatedNamespacedRules" -}}
{{- $rules := list }}
{{- range splitList "\n---\n" (.root.Files.Get (printf "files/rbac/%s/role.yaml" .file)) }}
{{- $doc := fromYaml . }}
{{- if eq (get $doc "kind") "Role" }}{{ $rules = concat $rules $doc.rules }}{{ end }}
{{- end }}
{{- toYaml $rules }}
{{- end }}

{{/* Default spread of a component's replicas across nodes. */}}
{{- define "glance-operator.topologySpread" -}}
{{- $ := index . 0 -}}
{{- $values := index . 2 }}
{{- if $values.topologySpreadConstraints }}
{{- toYaml $values.topologySpreadConstraints }}
{{- else }}
- maxSkew: 1
  topologyKey: kubernetes.io/hostname
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      {{- include "glance-operator.selectorLabels" (list $ (index . 1)) | nindent 6 }}
{{- end }}
{{- end }}

{{/*
A component's permissions, generated from its RBAC markers
(files/rbac/<component>/role.yaml, `make manifests`). Cluster-wide, they are
one ClusterRole; with watchNamespace, a Role in each watched namespace plus a
ClusterRole for the cluster-scoped kinds among them. Include with
(dict "root" $ "component" "manager").
*/}}
{{- define "glance-operator.generatedRBAC" -}}
{{- $root := .root }}
{{- $component := .component }}
{{- $name := include (printf "glance-operator.%s.name" $component) $root }}
{{- $namespaces := include "glance-operator.watchNamespaces" $root | fromJsonArray }}
{{- $clusterRules := include "glance-operator.generatedRules" (dict "root" $root "file" $component "scope" (ternary "cluster" "all" (gt (len $namespaces) 0))) | fromYamlArray }}
{{- if $clusterRules }}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ $name }}
  labels:
    {{- include "glance-operator.componentLabels" (list $root $component) | nindent 4 }}
rules:
  {{- toYaml $clusterRules | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ $name }}
  labels:
    {{- include "glance-operator.componentLabels" (list $root $component) | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $name }}
subjects:
  - kind: ServiceAccount
    name: {{ include "glance-operator.serviceAccountName" (list $root $component) }}
    namespace: {{ $root.Release.Namespace }}
{{- end }}
{{- $namespacedRules := include "glance-operator.generatedRules" (dict "root" $root "file" $component "scope" "namespaced") | fromYamlArray }}
{{- range $namespaces }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $name }}
  namespace: {{ . }}
  labels:
    {{- include "glance-operator.componentLabels" (list $root $component) | nindent 4 }}
rules:
  {{- toYaml $namespacedRules | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $name }}
  namespace: {{ . }}
  labels:
    {{- include "glance-operator.componentLabels" (list $root $component) | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $name }}
subjects:
  - kind: ServiceAccount
    name: {{ include "glance-operator.serviceAccountName" (list $root $component) }}
    namespace: {{ $root.Release.Namespace }}
{{- end }}
{{- end }}

{{/* The cert-manager Certificate of the webhook's serving certificate. */}}
{{- define "glance-operator.webhook.certificateName" -}}
{{- include "glance-operator.webhook.name" . }}-serving-cert
{{- end }}

{{/* A component's pull Secrets, the global ones first: include with (list $ .Values.manager.imagePullSecrets). */}}
{{- define "glance-operator.imagePullSecrets" -}}
{{- $ := index . 0 -}}
{{- with concat $.Values.global.imagePullSecrets (index . 1) }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* A component's ServiceAccount: its name, or the one values name. Include with (list $ "manager"). */}}
{{- define "glance-operator.serviceAccountName" -}}
{{- $ := index . 0 -}}
{{- $component := index . 1 -}}
{{- default (include (printf "glance-operator.%s.name" $component) $) (index $.Values $component).serviceAccount.name }}
{{- end }}

{{/*
A component's PodDisruptionBudget: include with (list $ "manager"). Unset,
more than one replica keeps one up, and a single replica may always be
drained.
*/}}
{{- define "glance-operator.podDisruptionBudget" -}}
{{- $ := index . 0 -}}
{{- $component := index . 1 -}}
{{- $values := index $.Values $component -}}
{{- $pdb := $values.podDisruptionBudget -}}
{{- if $pdb.enabled }}
{{- if and (ne (toString $pdb.minAvailable) "") (ne (toString $pdb.maxUnavailable) "") }}
{{- fail (printf "%s.podDisruptionBudget: set minAvailable or maxUnavailable, not both" $component) }}
{{- end }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include (printf "glance-operator.%s.name" $component) $ }}
  namespace: {{ $.Release.Namespace }}
  labels:
    {{- include "glance-operator.componentLabels" (list $ $component) | nindent 4 }}
spec:
  {{- if ne (toString $pdb.minAvailable) "" }}
  minAvailable: {{ $pdb.minAvailable }}
  {{- else if ne (toString $pdb.maxUnavailable) "" }}
  maxUnavailable: {{ $pdb.maxUnavailable }}
  {{- else if gt (int $values.replicas) 1 }}
  minAvailable: 1
  {{- else }}
  maxUnavailable: 1
  {{- end }}
  {{- with $pdb.unhealthyPodEvictionPolicy }}
  unhealthyPodEvictionPolicy: {{ . }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "glance-operator.selectorLabels" (list $ $component) | nindent 6 }}
{{- end }}
{{- end }}

{{/* A component's PriorityClass: its own, else the global one. Include with (list $ "manager"). */}}
{{- define "glance-operator.priorityClassName" -}}
{{- $ := index . 0 -}}
{{- (index $.Values (index . 1)).priorityClassName | default $.Values.global.priorityClassName }}
{{- end }}

{{/*
A component's Deployment strategy and revision history, each only when set:
unset, the API server's defaults apply and the Deployment renders as it did
before these values. Include with .Values.manager.
*/}}
{{- define "glance-operator.rollout" -}}
{{- with .strategy }}
strategy:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- /* 0 is a limit of its own; only "" means unset. */}}
{{- if ne (toString .revisionHistoryLimit) "" }}
revisionHistoryLimit: {{ .revisionHistoryLimit }}
{{- end }}
{{- end }}

{{/* An HTTP probe of the health port with the values' timings: include with (list "/healthz" .Values.manager.livenessProbe). */}}
{{- define "glance-operator.probe" -}}
httpGet:
  path: {{ index . 0 }}
  port: health
{{- with index . 1 }}
{{ toYaml . }}
{{- end }}
{{- end }}
