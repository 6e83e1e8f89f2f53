package schema

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	crdschema "github.com/c5c3/glance-operator/pkg/admission/schema"
	"github.com/c5c3/glance-operator/test/fixtures"
)

// verdict is how the server answers a request.
type verdict string

const (
	accepted   verdict = "accepted"
	invalid    verdict = "422 Invalid"     // validation errors
	badRequest verdict = "400 Bad Request" // unknown fields under fieldValidation=Strict
)

// outcome is everything compared between the server and the offline
// evaluation of one request.
type outcome struct {
	verdict verdict
	message string
	causes  []metav1.StatusCause
	spec    any // the stored spec, when accepted
}

// diffCase is a create of obj, or with update set, a create of obj followed by
// an update that applies the mutations to the stored object.
type diffCase struct {
	name   string
	obj    *unstructured.Unstructured
	update []mutation
	want   verdict // the server's verdict, so that the table covers what it claims
}

// strict is what kubectl sends by default.
var strict = client.FieldValidation("Strict")

func TestOfflineMatchesServer(t *testing.T) {
	cases := []diffCase{
		// Accepted creates: the stored spec carries the schema defaults.
		{name: "glance minimal", obj: glance("minimal"), want: accepted},
		{name: "glance full", obj: object(fullGlance, "full"), want: accepted},
		{name: "backend minimal", obj: backend("minimal"), want: accepted},
		{name: "backend full", obj: object(fullBackend, "full"), want: accepted},
		{name: "defaults inside empty objects", obj: glance("empty-objects",
			set("spec.deployment", "{}"), set("spec.dbPurge", "{}"), set("spec.logging", "{}"),
			set("spec.apiServer", "{uwsgi: {}}"), set("spec.secretStoreRef", "{name: vault}"),
			set("spec.imageCache", "{size: 10Gi}")), want: accepted},
		{name: "defaults inside list-map items", obj: glance("list-items", set("spec.middleware", "[{name: a, filterFactory: 'm:f'}, {name: b, filterFactory: 'm:g'}]")), want: accepted},
		{name: "nulls dropped or defaulted", obj: glance("nulls", set("spec.region", "null"), set("spec.database.port", "null"), set("spec.dbPurge", "{schedule: null}")), want: accepted},
		{name: "status ignored on create", obj: glance("with-status", set("status", "{installedRelease: '2025.1', observedGeneration: 7}")), want: accepted},
		{name: "system metadata from an export", obj: glance("exported", set("metadata.uid", "0b3a1c3e-9a8f-4b7e-8d3c-1f2e3d4c5b6a"),
			set("metadata.creationTimestamp", "2026-01-02T03:04:05Z"), set("metadata.deletionGracePeriodSeconds", "30"), set("metadata.deletionTimestamp", "2026-01-02T03:04:05Z")), want: accepted},
		{name: "generated name", obj: glance("", set("metadata.generateName", "gen-")), want: accepted},
		{name: "43-character name", obj: glance("a" + strings.Repeat("b", 42)), want: accepted},
		{name: "unbounded staging", obj: glance("unbounded", set("spec.staging", "{unbounded: true}")), want: accepted},

		// Root-level rules on metadata.name.
		{name: "glance name too long", obj: glance("a" + strings.Repeat("b", 43)), want: invalid},
		{name: "glance name with a dot", obj: glance("glance.api"), want: invalid},
		{name: "glance name starting with a digit", obj: glance("1glance"), want: invalid},
		// A reserved store name is admission's to refuse, under metadata.name.
		{name: "backend named default", obj: backend("default"), want: accepted},

		// Schema: patterns, bounds, enums, types, required, lengths.
		{name: "release pattern", obj: glance("release3", set("spec.openStackRelease", `"2025.3"`)), want: invalid},
		{name: "digest pattern", obj: glance("bad-digest", del("spec.image.tag"), set("spec.image.digest", "sha256:abc")), want: invalid},
		{name: "database port minimum", obj: glance("db-port", set("spec.database.port", "0")), want: invalid},
		{name: "autoscaling target maximum", obj: glance("hpa-101", set("spec.autoscaling", "{maxReplicas: 4, targetMemoryUtilization: 101}")), want: invalid},
		{name: "tls mode enum", obj: glance("db-tls", set("spec.database.tls", "{mode: strict}")), want: invalid},
		{name: "logging format enum", obj: glance("log-format", set("spec.logging", "{format: yaml}")), want: invalid},
		{name: "per-logger level enum in a map", obj: glance("log-level", set("spec.logging", "{perLoggerLevels: {sqlalchemy: TRACE}}")), want: invalid},
		{name: "backend type enum", obj: backend("swift", set("spec.type", "Swift")), want: invalid},
		{name: "integer given as a string", obj: glance("replicas-string", set("spec.deployment", "{replicas: three}")), want: invalid},
		{name: "integer given as a fraction", obj: glance("replicas-fraction", set("spec.deployment", "{replicas: 1.5}")), want: invalid},
		{name: "required field missing", obj: glance("no-image", del("spec.image")), want: invalid},
		{name: "string too long", obj: glance("long-class", set("spec.deployment", "{priorityClassName: "+strings.Repeat("p", 254)+"}")), want: invalid},
		{name: "map value too long", obj: backend("opt-long", set("spec.extraOptions", "{a: "+strings.Repeat("x", 1025)+"}")), want: invalid},
		{name: "maxProperties", obj: backend("opt-many", set("spec.extraOptions", fixtures.Options(33))), want: invalid},
		{name: "invalid label key", obj: glance("bad-label", set("metadata.labels", "{'bad key': x}")), want: invalid},

		// List-map duplicates.
		{name: "middleware names not unique", obj: glance("mw-dup", set("spec.middleware", "[{name: a, filterFactory: 'm:f'}, {name: a, filterFactory: 'm:g'}]")), want: invalid},
		{name: "plugin sections not unique", obj: glance("plugin-dup", set("spec.plugins", "[{name: a, configSection: s}, {name: b, configSection: s}]")), want: invalid},

		// CEL rules.
		{name: "image tag and digest", obj: glance("both-image", set("spec.image.digest", `"sha256:`+strings.Repeat("a", 64)+`"`)), want: invalid},
		{name: "database clusterRef and host", obj: glance("db-both", set("spec.database.host", "db.example.com")), want: invalid},
		{name: "keystone endpoint without scheme", obj: glance("ks-noscheme", set("spec.keystoneEndpoint", "keystone:5000")), want: invalid},
		{name: "harakiri against defaulted grace and preStop", obj: glance("harakiri", set("spec.apiServer", "{uwsgi: {harakiri: 25}}")), want: invalid},
		{name: "preStop not below grace", obj: glance("prestop", set("spec.deployment", "{terminationGracePeriodSeconds: 10, preStopSleepSeconds: 10}")), want: invalid},
		{name: "recreate with rollingUpdate", obj: glance("recreate", set("spec.deployment", "{strategy: {type: Recreate, rollingUpdate: {maxSurge: 1}}}")), want: invalid},
		{name: "network policy with empty ingress", obj: glance("np-empty", set("spec.networkPolicy", "{ingress: []}")), want: invalid},
		{name: "network policy source without selectors", obj: glance("np-source", set("spec.networkPolicy", "{ingress: [{}]}")), want: invalid},
		{name: "autoscaling max below default replicas", obj: glance("hpa-replicas", set("spec.autoscaling", "{maxReplicas: 2, targetCPUUtilization: 80}")), want: invalid},
		{name: "image cache size 0", obj: glance("cache-zero", set("spec.imageCache", "{size: '0'}")), want: invalid},
		{name: "image cache size 1", obj: glance("cache-one", set("spec.imageCache", "{size: '1'}")), want: invalid},
		{name: "image cache size 1000000Ei", obj: glance("cache-huge", set("spec.imageCache", "{size: 1000000Ei}")), want: invalid},
		{name: "image cache size 1Pi", obj: glance("cache-max", set("spec.imageCache", "{size: 1Pi}")), want: accepted},
		{name: "image cache interval 30s", obj: glance("interval-short", set("spec.imageCache", "{size: 10Gi, maintenanceInterval: 30s}")), want: invalid},
		{name: "staging sizeLimit and unbounded", obj: glance("staging-both", set("spec.staging", "{sizeLimit: 10Gi, unbounded: true}")), want: invalid},
		{name: "backend S3 without s3 block", obj: backend("no-s3", del("spec.s3")), want: invalid},
		{name: "backend s3 host without scheme", obj: backend("s3-host", set("spec.s3.host", "s3.example.com")), want: invalid},
		{name: "extra option value with a line break, named by key", obj: backend("opt-value", set("spec.extraOptions", `{ok: x, a: "x\n[DEFAULT]"}`)), want: invalid},
		// The map keys are the webhook's rules (CEL cannot name a key).
		{name: "extra option keys left to the webhook", obj: backend("opt-keys", set("spec.extraOptions", "{s3_store_host: http://evil, a-b: x}")), want: accepted},
		{name: "policy rule names left to the webhook", obj: glance("policy-names", set("spec.policyOverrides", `{rules: {"": role:admin}}`)), want: accepted},
		{name: "policy rule empty check string", obj: glance("policy-rules", set("spec.policyOverrides", `{rules: {a: "!", get_images: ""}}`)), want: invalid},
		{name: "schema and CEL errors together", obj: glance("mixed", set("spec.openStackRelease", `"2025.3"`), set("spec.database.host", "db")), want: invalid},
		{name: "name rule and enum together", obj: glance("Mixed.Enum", set("spec.logging", "{format: yaml}")), want: invalid},

		// Unknown fields.
		{name: "unknown spec field", obj: glance("unknown-spec", set("spec.replicas", "3")), want: badRequest},
		{name: "unknown fields everywhere", obj: glance("unknown-all", set("metadata.colour", "blue"), set("bogus", "true"),
			set("spec.middleware", "[{name: a, filterFactory: 'm:f', order: 1}]"), set("status.phase", "Ready")), want: badRequest},
		{name: "unknown field beside an invalid one", obj: backend("unknown-invalid", set("spec.s3.port", "9000"), set("spec.s3.bucket", "Images")), want: badRequest},

		// Updates: transition rules, ratcheting, re-defaulting, unknown fields.
		{name: "update: targetClusterRef added", obj: glance("tc-add"),
			update: []mutation{set("spec.targetClusterRef", "{name: region-two}")}, want: invalid},
		{name: "update: targetClusterRef removed", obj: glance("tc-remove", set("spec.targetClusterRef", "{name: region-two}")),
			update: []mutation{del("spec.targetClusterRef")}, want: invalid},
		{name: "update: targetClusterRef renamed", obj: glance("tc-rename", set("spec.targetClusterRef", "{name: region-two}")),
			update: []mutation{set("spec.targetClusterRef", "{name: region-three}")}, want: invalid},
		{name: "update: targetClusterRef kept while the release moves", obj: glance("tc-keep", set("spec.targetClusterRef", "{name: region-two}")),
			update: []mutation{set("spec.openStackRelease", `"2026.1"`), set("spec.image.tag", `"2026.1"`)}, want: accepted},
		{name: "update: glanceRef changed", obj: backend("ref-change"),
			update: []mutation{set("spec.glanceRef.name", "other")}, want: invalid},
		{name: "update: backend made default", obj: backend("ref-keep"),
			update: []mutation{set("spec.isDefault", "true")}, want: accepted},
		{name: "update: type changed", obj: backend("type-change"),
			update: []mutation{set("spec.type", "Swift")}, want: invalid},
		{name: "update: defaulted field removed", obj: glance("redefault", set("spec.deployment", "{replicas: 2}")),
			update: []mutation{del("spec.deployment.preStopSleepSeconds"), del("spec.database.port")}, want: accepted},
		{name: "update: status change ignored", obj: glance("status-update"),
			update: []mutation{set("status", "{installedRelease: '2025.2'}")}, want: accepted},
		{name: "update: list-map duplicate", obj: glance("mw-update", set("spec.middleware", "[{name: a, filterFactory: 'm:f'}]")),
			update: []mutation{set("spec.middleware", "[{name: a, filterFactory: 'm:f'}, {name: a, filterFactory: 'm:g'}]")}, want: invalid},
		{name: "update: pattern broken", obj: glance("pattern-update"),
			update: []mutation{set("spec.database.database", "glance-db")}, want: invalid},
		{name: "update: unknown field", obj: backend("unknown-update"),
			update: []mutation{set("spec.s3.port", "9000")}, want: badRequest},
	}
	if len(cases) < 40 {
		t.Fatalf("the table has %d cases, want at least 40", len(cases))
	}
	runDiffCases(t, cases)
}

// runDiffCases runs each case on the server and offline and compares.
func runDiffCases(t *testing.T, cases []diffCase) {
	t.Helper()
	ctx := context.Background()
	// A namespace per run keeps the names free under -count.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "schema-diff-"}}
	if err := cl.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		tc.obj.SetNamespace(ns.Name)
		t.Run(tc.name, func(t *testing.T) {
			kind, ok := offline.For(tc.obj.GroupVersionKind())
			if !ok {
				t.Fatalf("no offline evaluator for %s", tc.obj.GroupVersionKind())
			}
			var server, local outcome
			if tc.update == nil {
				created := tc.obj.DeepCopy()
				server = onServer(cl.Create(ctx, created, strict), created)
				local = offlineCreate(ctx, t, kind, tc.obj.Object)
			} else {
				server = serverUpdate(ctx, t, tc.obj, tc.update)
				local = offlineUpdate(ctx, t, kind, tc.obj.Object, tc.update)
			}
			if server.verdict != tc.want {
				t.Errorf("server verdict %s, want %s: %s", server.verdict, tc.want, server.message)
			}
			compare(t, server, local)
		})
	}
}

// onServer turns the server's answer into an outcome; obj is the object it
// returned.
func onServer(err error, obj *unstructured.Unstructured) outcome {
	if err == nil {
		return outcome{verdict: accepted, spec: obj.Object["spec"]}
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return outcome{verdict: verdict("transport error"), message: err.Error()}
	}
	return fromStatus(status.Status())
}

func fromStatus(s metav1.Status) outcome {
	o := outcome{message: s.Message}
	switch s.Reason {
	case metav1.StatusReasonInvalid:
		o.verdict = invalid
	case metav1.StatusReasonBadRequest:
		o.verdict = badRequest
	default:
		o.verdict = verdict(fmt.Sprintf("%d %s", s.Code, s.Reason))
	}
	if s.Details != nil {
		o.causes = s.Details.Causes
	}
	return o
}

func serverUpdate(ctx context.Context, t *testing.T, obj *unstructured.Unstructured, update []mutation) outcome {
	t.Helper()
	stored := obj.DeepCopy()
	if err := cl.Create(ctx, stored, strict); err != nil {
		t.Fatalf("create the object to update: %v", err)
	}
	updated := stored.DeepCopy()
	for _, m := range update {
		m(updated.Object)
	}
	err := cl.Update(ctx, updated, strict)
	return onServer(err, updated)
}

func offlineCreate(ctx context.Context, t *testing.T, kind *crdschema.Kind, obj map[string]any) outcome {
	t.Helper()
	decoded, err := kind.Decode(obj)
	if err != nil {
		return offlineDecodeFailure(t, err)
	}
	decoded = offlineWebhook(t, kind, decoded, "CREATE")
	if errs := kind.Validate(ctx, decoded, nil); len(errs) > 0 {
		return fromStatus(kind.Invalid(nameOf(decoded), errs).Status())
	}
	return outcome{verdict: accepted, spec: decoded["spec"]}
}

// offlineUpdate evaluates what a client does: read the stored object (the
// offline decode of obj), change it and send it back.
func offlineUpdate(ctx context.Context, t *testing.T, kind *crdschema.Kind, obj map[string]any, update []mutation) outcome {
	t.Helper()
	old, err := kind.Decode(obj)
	if err != nil {
		t.Fatalf("offline decode of the object to update: %v", err)
	}
	old = offlineWebhook(t, kind, old, "CREATE")
	changed := deepCopy(old)
	for _, m := range update {
		m(changed)
	}
	decoded, err := kind.Decode(changed)
	if err != nil {
		return offlineDecodeFailure(t, err)
	}
	decoded = offlineWebhook(t, kind, decoded, "UPDATE")
	if errs := kind.Validate(ctx, decoded, old); len(errs) > 0 {
		return fromStatus(kind.Invalid(nameOf(decoded), errs).Status())
	}
	return outcome{verdict: accepted, spec: decoded["spec"]}
}

func offlineDecodeFailure(t *testing.T, err error) outcome {
	t.Helper()
	var de *crdschema.DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("offline decode: %v", err)
	}
	return fromStatus(de.Status())
}

func nameOf(obj map[string]any) string {
	name, _, _ := unstructured.NestedString(obj, "metadata", "name")
	return name
}

func compare(t *testing.T, server, local outcome) {
	t.Helper()
	if server.verdict != local.verdict {
		t.Fatalf("verdict: server %s, offline %s\nserver: %s\noffline: %s", server.verdict, local.verdict, server.message, local.message)
	}
	if server.message != local.message {
		t.Errorf("message:\nserver:  %s\noffline: %s", server.message, local.message)
	}
	if !reflect.DeepEqual(server.causes, local.causes) {
		t.Errorf("causes:\nserver:\n  %s\noffline:\n  %s", causeLines(server.causes), causeLines(local.causes))
	}
	if server.verdict == accepted && !reflect.DeepEqual(server.spec, local.spec) {
		t.Errorf("stored spec:\nserver:  %s\noffline: %s", asJSON(server.spec), asJSON(local.spec))
	}
}

func causeLines(causes []metav1.StatusCause) string {
	var lines []string
	for _, c := range causes {
		lines = append(lines, fmt.Sprintf("%s %s: %s", c.Type, c.Field, c.Message))
	}
	return strings.Join(lines, "\n  ")
}

func asJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}
