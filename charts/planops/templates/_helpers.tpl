{{/* The release's full name (release name, unless it already contains the chart's name). */}}
{{- define "planops.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "planops.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "planops.labels" -}}
{{ include "planops.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "planops.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "planops.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "planops.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The operator's rules on Plans' work, in the namespaces it watches (Role or ClusterRole). */}}
{{- define "planops.namespacedRules" -}}
# Plans: read and watch them, create/delete child Plans of capsule steps and the runs of
# ScheduledPlans, delete a finished Plan past its ttlSecondsAfterFinished, and annotate nothing
# (no update/patch of a Plan's spec or metadata, but the one below).
- apiGroups: ["planops.dev"]
  resources: ["plans"]
  verbs: ["get", "list", "watch", "create", "delete"]
{{- with .Values.artifactRepository }}
{{- if or .enabled .capsuleSecrets }}
# With an artifact repository only: the finalizer planops.dev/artifacts added to a Plan whose
# run stores objects, and removed once they are deleted (a merge patch of metadata.finalizers,
# with the Plan's resourceVersion as a precondition; docs/artifacts.md, GC).
- apiGroups: ["planops.dev"]
  resources: ["plans"]
  verbs: ["patch"]
{{- end }}
{{- end }}
# The report: the operator writes only the status subresource.
- apiGroups: ["planops.dev"]
  resources: ["plans/status", "scheduledplans/status"]
  verbs: ["get", "patch"]
# A run's full report: PlanReport chunks, owned by their Plan (garbage-collected with it);
# created and appended to (patch), listed on a restart, deleted when a new run replaces them.
- apiGroups: ["planops.dev"]
  resources: ["planreports"]
  verbs: ["get", "list", "create", "patch", "delete"]
# Capsules are policy: read only (admins write them, never the operator).
- apiGroups: ["planops.dev"]
  resources: ["capsules"]
  verbs: ["get", "list", "watch"]
# PlanTemplates a Plan runs (spec.templateRef, template steps): read only, never written.
- apiGroups: ["planops.dev"]
  resources: ["plantemplates"]
  verbs: ["get", "list", "watch"]
# The operator creates child Plans and scheduled runs under their Capsules: the admission policy
# (admission-policy.yaml) lets a Plan's creator name only Capsules it may `use`.
- apiGroups: ["planops.dev"]
  resources: ["capsules"]
  verbs: ["use"]
# Child Plans and scheduled runs are the operator's alone: the admission policy lets only holders
# of `manage` create Plans with planops' reserved labels or change such a Plan's spec.
- apiGroups: ["planops.dev"]
  resources: ["plans"]
  verbs: ["manage"]
# ScheduledPlans: read and watch (their status is written above).
- apiGroups: ["planops.dev"]
  resources: ["scheduledplans"]
  verbs: ["get", "list", "watch"]
# One Job per step attempt; delete stuck attempts, the Jobs of a stopped run, and those a Plan's
# podGC collects.
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "list", "watch", "create", "delete"]
# Pods of those Jobs: their state (OOMKilled, image pull errors) and logs (the step's output).
# No create (pods come from Jobs), no exec, no attach.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch"]
# A step's output is its pod's log.
- apiGroups: [""]
  resources: ["pods/log"]
  verbs: ["get"]
# The run's workspace volume (spec.workspace), deleted with the run.
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get", "list", "create", "delete"]
# Events on Plans: the trace (plan_start, plan_step, ...).
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "list"]
{{- end -}}

{{/* Whether a write to a Plan or ScheduledPlan is an author's act: it changes what the object
does, so its requester needs `use` on the Capsule (the capsule-use policy) and becomes its
recorded author (the record-author policy). One definition for both policies, so they never
disagree. planops.dev/ keys are compared as a set of "key=value" strings, but for three: cancel
(stopping is no act), rerun (a re-run runs the whole plan the recorded author defined, and the
operator asks first whether they still may) and the author record itself (the mutating policy
writes it). retry is an act: with --from it picks which steps run again and which earlier
results (outputs) they build on, a choice of what the plan does this time, so it needs `use` as
any change does (the operator still asks for the recorded author before the retried run starts).
So is cancel-run-finally (kubectl plan cancel --run-finally): it makes the finally steps run,
which a plain cancel does not. Owner references: the garbage collector may remove them (orphan deletion) without being
an author. */}}
{{- define "planops.authorsActVariables" -}}
- name: notActs
  expression: "['planops.dev/cancel', 'planops.dev/rerun', 'planops.dev/author']"
- name: newLabels
  expression: "has(object.metadata.labels) ? object.metadata.labels : {}"
- name: oldLabels
  expression: "oldObject != null && has(oldObject.metadata.labels) ? oldObject.metadata.labels : {}"
- name: newAnnotations
  expression: "has(object.metadata.annotations) ? object.metadata.annotations : {}"
- name: oldAnnotations
  expression: >-
    oldObject != null && has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {}
- name: newMarks
  expression: >-
    variables.newLabels.map(k, (k.startsWith('planops.dev/') || k.contains('.planops.dev/')),
      'label ' + k + '=' + variables.newLabels[k]) +
    variables.newAnnotations.map(k, (k.startsWith('planops.dev/') || k.contains('.planops.dev/'))
      && !(k in variables.notActs),
      'annotation ' + k + '=' + variables.newAnnotations[k])
- name: oldMarks
  expression: >-
    variables.oldLabels.map(k, (k.startsWith('planops.dev/') || k.contains('.planops.dev/')),
      'label ' + k + '=' + variables.oldLabels[k]) +
    variables.oldAnnotations.map(k, (k.startsWith('planops.dev/') || k.contains('.planops.dev/'))
      && !(k in variables.notActs),
      'annotation ' + k + '=' + variables.oldAnnotations[k])
- name: newRefs
  expression: "has(object.metadata.ownerReferences) ? object.metadata.ownerReferences : []"
- name: oldRefs
  expression: >-
    oldObject != null && has(oldObject.metadata.ownerReferences) ? oldObject.metadata.ownerReferences : []
- name: orphaning
  expression: >-
    request.userInfo.username in ['system:serviceaccount:kube-system:generic-garbage-collector',
      'system:kube-controller-manager'] &&
    variables.newRefs.all(r, r in variables.oldRefs)
- name: act
  expression: >-
    request.operation == 'CREATE' || object.spec != oldObject.spec ||
    (variables.newRefs != variables.oldRefs && !variables.orphaning) ||
    !variables.newMarks.all(m, m in variables.oldMarks) ||
    !variables.oldMarks.all(m, m in variables.newMarks)
{{- end -}}

{{/* The version of admissionregistration.k8s.io in which the cluster serves `.kind` (an
admission policy kind): "v1", else "v1beta1" (a beta turned on by the cluster's admin), else ""
(not served: the chart leaves the object out, and NOTES.txt says what is then lost).
`helm install` and `helm upgrade` read it from the API server's discovery, which names every
group/version/Kind it serves. `helm template` has no cluster: it reads `--api-versions` when
they name a kind of admissionregistration.k8s.io (Argo CD passes the cluster's, kinds included);
otherwise the kind counts as served, as v1, when `--kube-version` (default: helm's own
Kubernetes version) is at least `.ga`, the release that serves it on by default. Call with
(dict "root" $ "kind" "ValidatingAdmissionPolicy" "ga" "1.30"). */}}
{{- define "planops.admissionVersion" -}}
{{- $versions := .root.Capabilities.APIVersions -}}
{{- $group := "admissionregistration.k8s.io" -}}
{{- $kinds := false -}}
{{- range $versions -}}
{{- if regexMatch "^admissionregistration\\.k8s\\.io/[^/]+/[^/]+$" . -}}{{- $kinds = true -}}{{- end -}}
{{- end -}}
{{- if $versions.Has (printf "%s/v1/%s" $group .kind) -}}
v1
{{- else if $versions.Has (printf "%s/v1beta1/%s" $group .kind) -}}
v1beta1
{{- else if and (not $kinds) (semverCompare (printf ">=%s-0" .ga) .root.Capabilities.KubeVersion.Version) -}}
v1
{{- end -}}
{{- end -}}

{{/* The capsule-use, managed-plans, plan-reports and owned-objects policies' version ("": none
rendered). ValidatingAdmissionPolicy: v1 GA (on by default) since Kubernetes 1.30; v1beta1 in
1.28 and 1.29, off unless the admin turns it on. */}}
{{- define "planops.validatingPolicyVersion" -}}
{{- if .Values.admissionPolicy.enabled -}}
{{- include "planops.admissionVersion" (dict "root" . "kind" "ValidatingAdmissionPolicy" "ga" "1.30") -}}
{{- end -}}
{{- end -}}

{{/* The record-author policy's version ("": none rendered, and the operator is not told to
require the record). MutatingAdmissionPolicy: v1 GA (on by default) since Kubernetes 1.36;
v1beta1 in 1.34 and 1.35, off unless the admin turns it on. */}}
{{- define "planops.mutatingPolicyVersion" -}}
{{- if and .Values.admissionPolicy.enabled .Values.admissionPolicy.recordAuthor -}}
{{- include "planops.admissionVersion" (dict "root" . "kind" "MutatingAdmissionPolicy" "ga" "1.36") -}}
{{- end -}}
{{- end -}}
