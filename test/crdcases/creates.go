// Package crdcases holds the validation cases of the Glance and
// GlanceBackend CRDs, each an object and the violations the API server must
// report for it: every CEL rule with its exact message, and the schema's
// patterns, bounds, enums and list-maps. test/integration/crd runs them on
// the API server every suite runs, test/compat on the oldest one the chart
// claims.
package crdcases

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/test/fixtures"
)

type mutation = fixtures.Mutation

var (
	set = fixtures.Set
	del = fixtures.Del
)

// violation is one cause of an Invalid error: the field it names and the end
// of its message. For CEL rules the message is the rule's exact message.
type violation struct {
	field, message string
	fragment       bool // message is a fragment of a schema error, not a CEL rule's exact message
	// older is how Kubernetes 1.31, the oldest version the chart claims
	// (test/compat), words a schema error whose wording has changed since.
	older string
}

// frag expects a schema (pattern, bound, enum, list-map) error on field whose
// message contains text.
func frag(field, text string) violation {
	return violation{field: field, message: text, fragment: true}
}

// fragOr is frag of a message that Kubernetes 1.31 words as older.
func fragOr(field, text, older string) violation {
	return violation{field: field, message: text, fragment: true, older: older}
}

// celSkipped is the cause the API server adds when schema errors kept it from
// evaluating the CEL rules.
var celSkipped = frag("<nil>", "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation")

// cel expects the CEL rule with this exact message to fail on field.
func cel(field, message string) violation { return violation{field: field, message: message} }

type createCase struct {
	name string
	obj  *unstructured.Unstructured
	want []violation // empty: the create must succeed
}

// Messages of the CEL rules, exactly as users see them.
const (
	msgGlanceName        = "metadata.name must be a DNS-1035 label of at most 43 characters (lowercase letters, digits and '-', starting with a letter)"
	msgImageOneOf        = "exactly one of image.tag or image.digest must be set"
	msgDatabaseOneOf     = "exactly one of database.clusterRef or database.host must be set"
	msgDynamicNeedsCl    = "database.credentialsMode Dynamic requires database.clusterRef"
	msgTLSNeedsCA        = "database.tls.mode verify-ca and verify-full need caBundleSecretRef: without a CA nothing would be verified"
	msgCacheOneOf        = "exactly one of cache.clusterRef or cache.servers must be set"
	msgKeystoneURL       = "keystoneEndpoint must be an absolute http or https URL with a host"
	msgKeystonePublicURL = "keystonePublicEndpoint must be an absolute http or https URL with a host"
	msgUsernameKey       = `serviceUser.usernameKey must differ from serviceUser.secretRef.key (default "password"): the password would be the user's name`
	msgKeepAliveTimeout  = "apiServer.uwsgi.httpKeepAliveTimeout requires apiServer.uwsgi.httpKeepAlive"
	msgHarakiri          = "apiServer.uwsgi.harakiri must be less than deployment.terminationGracePeriodSeconds minus deployment.preStopSleepSeconds, so a stuck request is killed before the pod is"
	msgPreStop           = "deployment.preStopSleepSeconds must be less than deployment.terminationGracePeriodSeconds"
	msgStrategy          = "deployment.strategy.rollingUpdate may only be set when deployment.strategy.type is RollingUpdate"
	msgStrategyType      = "deployment.strategy.type must be RollingUpdate or Recreate"
	msgIngress           = "networkPolicy.ingress must list at least one source; an empty list would cut the API off from every client"
	msgIngressSource     = "each networkPolicy.ingress source needs a namespaceSelector, a podSelector or both"
	msgMinMax            = "autoscaling.minReplicas must not exceed autoscaling.maxReplicas"
	msgTarget            = "autoscaling needs targetCPUUtilization, targetMemoryUtilization or both"
	msgMaxBelowReplicas  = "autoscaling.maxReplicas must be at least deployment.replicas (default 3), which autoscaling.minReplicas defaults to"
	msgPolicyOneOf       = "policyOverrides needs rules, configMapRef or both"
	msgPolicyRuleEmpty   = `check string must not be empty: oslo.policy reads it as allow-all; write "@" if that is meant`
	msgCacheSize         = "imageCache.size must be between 1Mi and 1Pi"
	msgInterval          = "imageCache.maintenanceInterval must be between 1m and 24h"
	msgStagingBoth       = "staging.sizeLimit and staging.unbounded are mutually exclusive"
	msgStagingSize       = "staging.sizeLimit must be greater than zero"
	msgTargetAddRemove   = "targetClusterRef cannot be added or removed after creation"
	msgTargetImmutable   = "targetClusterRef.name is immutable"

	msgS3Required     = "type S3 requires the s3 block"
	msgS3Host         = "s3.host must be an absolute http or https URL with a host"
	msgOptionValue    = "value must not contain line breaks"
	msgGlanceRefFixed = "glanceRef is immutable; delete and recreate the backend to move it"
	// MsgTypeFixed is the message of spec.type's transition rule, which no
	// update through the API server reaches while S3 is the only type.
	MsgTypeFixed = "type is immutable"
)

// objects makes the cases' objects in a namespace.
type objects string

func (ns objects) object(manifest, name string, muts ...mutation) *unstructured.Unstructured {
	return fixtures.Object(manifest, string(ns), name, muts...)
}

func (ns objects) glance(name string, muts ...mutation) *unstructured.Unstructured {
	return ns.object(fixtures.MinimalGlance, name, muts...)
}

func (ns objects) backend(name string, muts ...mutation) *unstructured.Unstructured {
	return ns.object(fixtures.MinimalBackend, name, muts...)
}

// RunCreates creates the object of every create case in namespace with cl,
// each in a subtest, and checks the API server's verdict.
func RunCreates(t *testing.T, cl client.Client, namespace string) {
	ns := objects(namespace)
	glance, backend, object := ns.glance, ns.backend, ns.object
	cases := []createCase{
		// Glance: valid objects.
		{name: "glance minimal", obj: glance("minimal")},
		{name: "glance full", obj: object(fixtures.FullGlance, "full")},
		{name: "glance dynamic credentials with clusterRef", obj: glance("dynamic", set("spec.database.credentialsMode", "Dynamic"))},
		{name: "glance keepalive timeout with default keepalive", obj: glance("keepalive", set("spec.apiServer", "{uwsgi: {httpKeepAliveTimeout: 10}}"))},
		{name: "glance harakiri just below grace minus preStop", obj: glance("harakiri-ok", set("spec.apiServer", "{uwsgi: {harakiri: 24}}"))},
		{name: "glance unbounded staging", obj: glance("unbounded", set("spec.staging", "{unbounded: true}"))},
		{name: "glance empty topology spread list", obj: glance("nospread", set("spec.deployment", "{topologySpreadConstraints: []}"))},
		{name: "glance 43-character name", obj: glance("a" + strings.Repeat("b", 42))},

		// Glance: metadata.
		{name: "glance name too long", obj: glance("a" + strings.Repeat("b", 43)), want: []violation{cel("<nil>", msgGlanceName)}},
		{name: "glance name with a dot", obj: glance("glance.api"), want: []violation{cel("<nil>", msgGlanceName)}},
		{name: "glance name starting with a digit", obj: glance("1glance"), want: []violation{cel("<nil>", msgGlanceName)}},

		// Glance: release and image.
		{name: "release with minor 3", obj: glance("release3", set("spec.openStackRelease", `"2025.3"`)),
			want: []violation{frag("spec.openStackRelease", `spec.openStackRelease in body should match '^\d{4}\.[12]$'`)}},
		{name: "image tag and digest", obj: glance("both-image", set("spec.image.digest", `"sha256:`+strings.Repeat("a", 64)+`"`)),
			want: []violation{cel("spec.image", msgImageOneOf)}},
		{name: "image neither tag nor digest", obj: glance("no-image-ref", del("spec.image.tag")),
			want: []violation{cel("spec.image", msgImageOneOf)}},
		{name: "image digest malformed", obj: glance("bad-digest", del("spec.image.tag"), set("spec.image.digest", "sha256:abc")),
			want: []violation{frag("spec.image.digest", `spec.image.digest in body should match '^sha256:[a-f0-9]{64}$'`)}},
		{name: "image repository empty", obj: glance("empty-repo", set("spec.image.repository", "''")),
			want: []violation{frag("spec.image.repository", "spec.image.repository in body should match")}},
		{name: "image repository uppercase path", obj: glance("bad-repo", set("spec.image.repository", "registry.example.com/OpenStack/Glance")),
			want: []violation{frag("spec.image.repository", "spec.image.repository in body should match")}},

		// Glance: database.
		{name: "database clusterRef and host", obj: glance("db-both", set("spec.database.host", "db.example.com")),
			want: []violation{cel("spec.database", msgDatabaseOneOf)}},
		{name: "database neither clusterRef nor host", obj: glance("db-none", del("spec.database.clusterRef")),
			want: []violation{cel("spec.database", msgDatabaseOneOf)}},
		{name: "dynamic credentials on a brownfield host", obj: glance("dynamic-host", del("spec.database.clusterRef"), set("spec.database.host", "db"), set("spec.database.credentialsMode", "Dynamic")),
			want: []violation{cel("spec.database", msgDynamicNeedsCl)}},
		{name: "database name with a dash", obj: glance("db-name", set("spec.database.database", "glance-db")),
			want: []violation{frag("spec.database.database", `spec.database.database in body should match '^[A-Za-z0-9_]{1,64}$'`)}},
		{name: "database port 0", obj: glance("db-port", set("spec.database.port", "0")),
			want: []violation{frag("spec.database.port", "spec.database.port in body should be greater than or equal to 1")}},
		{name: "database tls mode unknown", obj: glance("db-tls", set("spec.database.tls", "{mode: strict}")),
			want: []violation{frag("spec.database.tls.mode", `Unsupported value: "strict": supported values: "disabled", "prefer", "require", "verify-ca", "verify-full"`), celSkipped}},

		{name: "database tls verify-full without a CA", obj: glance("db-tls-ca", set("spec.database.tls", "{mode: verify-full}")),
			want: []violation{cel("spec.database.tls", msgTLSNeedsCA)}},
		{name: "database tls require without a CA", obj: glance("db-tls-require", set("spec.database.tls", "{mode: require}"))},

		// Glance: cache and Keystone.
		{name: "cache clusterRef and servers", obj: glance("cache-both", set("spec.cache", "{clusterRef: {name: memcached}, servers: ['m:11211']}")),
			want: []violation{cel("spec.cache", msgCacheOneOf)}},
		{name: "cache empty", obj: glance("cache-none", set("spec.cache", "{}")),
			want: []violation{cel("spec.cache", msgCacheOneOf)}},
		{name: "keystone endpoint without scheme", obj: glance("ks-noscheme", set("spec.keystoneEndpoint", "keystone:5000")),
			want: []violation{cel("spec.keystoneEndpoint", msgKeystoneURL)}},
		{name: "keystone endpoint ftp", obj: glance("ks-ftp", set("spec.keystoneEndpoint", "ftp://keystone/")),
			want: []violation{cel("spec.keystoneEndpoint", msgKeystoneURL)}},
		{name: "keystone public endpoint relative", obj: glance("ks-public", set("spec.keystonePublicEndpoint", "/v3")),
			want: []violation{cel("spec.keystonePublicEndpoint", msgKeystonePublicURL)}},
		{name: "service user usernameKey", obj: glance("su-userkey", set("spec.serviceUser.usernameKey", "username"))},
		{name: "service user usernameKey the default password key", obj: glance("su-userkey-pw", set("spec.serviceUser.usernameKey", "password")),
			want: []violation{cel("spec.serviceUser", msgUsernameKey)}},
		{name: "service user usernameKey the password key", obj: glance("su-userkey-key", set("spec.serviceUser.secretRef.key", "secret"), set("spec.serviceUser.usernameKey", "secret")),
			want: []violation{cel("spec.serviceUser", msgUsernameKey)}},
		{name: "service user usernameKey beside another password key", obj: glance("su-userkey-other", set("spec.serviceUser.secretRef.key", "secret"), set("spec.serviceUser.usernameKey", "password"))},
		{name: "service user usernameKey empty", obj: glance("su-userkey-empty", set("spec.serviceUser.usernameKey", "''")),
			want: []violation{frag("spec.serviceUser.usernameKey", "spec.serviceUser.usernameKey in body should be at least 1 chars long")}},

		// Glance: deployment and API server.
		{name: "keepalive timeout with keepalive off", obj: glance("keepalive-off", set("spec.apiServer", "{uwsgi: {httpKeepAlive: false, httpKeepAliveTimeout: 10}}")),
			want: []violation{cel("spec.apiServer.uwsgi", msgKeepAliveTimeout)}},
		{name: "harakiri equal to grace minus preStop", obj: glance("harakiri", set("spec.apiServer", "{uwsgi: {harakiri: 25}}")),
			want: []violation{cel("spec", msgHarakiri)}},
		{name: "harakiri against a custom grace period", obj: glance("harakiri-grace", set("spec.deployment", "{terminationGracePeriodSeconds: 20, preStopSleepSeconds: 2}"), set("spec.apiServer", "{uwsgi: {harakiri: 18}}")),
			want: []violation{cel("spec", msgHarakiri)}},
		{name: "uwsgi processes 0", obj: glance("uwsgi-procs", set("spec.apiServer", "{uwsgi: {processes: 0}}")),
			want: []violation{frag("spec.apiServer.uwsgi.processes", "spec.apiServer.uwsgi.processes in body should be greater than or equal to 1")}},
		{name: "preStop not below grace", obj: glance("prestop", set("spec.deployment", "{terminationGracePeriodSeconds: 10, preStopSleepSeconds: 10}")),
			want: []violation{cel("spec.deployment", msgPreStop)}},
		{name: "grace below 10", obj: glance("grace", set("spec.deployment", "{terminationGracePeriodSeconds: 5, preStopSleepSeconds: 1}")),
			want: []violation{frag("spec.deployment.terminationGracePeriodSeconds", "spec.deployment.terminationGracePeriodSeconds in body should be greater than or equal to 10")}},
		{name: "replicas 0", obj: glance("replicas", set("spec.deployment", "{replicas: 0}")),
			want: []violation{frag("spec.deployment.replicas", "spec.deployment.replicas in body should be greater than or equal to 1")}},
		{name: "recreate with rollingUpdate", obj: glance("recreate", set("spec.deployment", "{strategy: {type: Recreate, rollingUpdate: {maxSurge: 1}}}")),
			want: []violation{cel("spec.deployment.strategy", msgStrategy)}},
		{name: "unknown strategy type", obj: glance("strategy-type", set("spec.deployment", "{strategy: {type: BlueGreen}}")),
			want: []violation{cel("spec.deployment.strategy", msgStrategyType)}},
		{name: "uwsgi processes 0", obj: glance("processes", set("spec.apiServer", "{uwsgi: {processes: 0}}")),
			want: []violation{frag("spec.apiServer.uwsgi.processes", "spec.apiServer.uwsgi.processes in body should be greater than or equal to 1")}},

		// Glance: network policy and autoscaling.
		{name: "network policy with empty ingress", obj: glance("np-empty", set("spec.networkPolicy", "{ingress: []}")),
			want: []violation{cel("spec.networkPolicy", msgIngress)}},
		{name: "network policy without ingress", obj: glance("np-none", set("spec.networkPolicy", "{additionalEgress: [{ports: [{port: 443}]}]}")),
			want: []violation{cel("spec.networkPolicy", msgIngress)}},
		{name: "network policy source without selectors", obj: glance("np-source", set("spec.networkPolicy", "{ingress: [{}]}")),
			want: []violation{cel("spec.networkPolicy.ingress[0]", msgIngressSource)}},
		{name: "autoscaling min above max", obj: glance("hpa-minmax", set("spec.autoscaling", "{minReplicas: 5, maxReplicas: 4, targetCPUUtilization: 80}")),
			want: []violation{cel("spec.autoscaling", msgMinMax)}},
		{name: "autoscaling without a target", obj: glance("hpa-target", set("spec.autoscaling", "{maxReplicas: 4}")),
			want: []violation{cel("spec.autoscaling", msgTarget)}},
		{name: "autoscaling max below default replicas", obj: glance("hpa-replicas", set("spec.autoscaling", "{maxReplicas: 2, targetCPUUtilization: 80}")),
			want: []violation{cel("spec", msgMaxBelowReplicas)}},
		{name: "autoscaling target above 100", obj: glance("hpa-101", set("spec.autoscaling", "{maxReplicas: 4, targetMemoryUtilization: 101}")),
			want: []violation{frag("spec.autoscaling.targetMemoryUtilization", "spec.autoscaling.targetMemoryUtilization in body should be less than or equal to 100")}},

		// Glance: logging, secret store, policy, middleware, plugins.
		{name: "logging format yaml", obj: glance("log-format", set("spec.logging", "{format: yaml}")),
			want: []violation{frag("spec.logging.format", `Unsupported value: "yaml": supported values: "text", "json"`), celSkipped}},
		{name: "per-logger level unknown", obj: glance("log-level", set("spec.logging", "{perLoggerLevels: {sqlalchemy: TRACE}}")),
			want: []violation{frag("spec.logging.perLoggerLevels.sqlalchemy", `Unsupported value: "TRACE"`), celSkipped}},
		{name: "secret store kind unknown", obj: glance("store-kind", set("spec.secretStoreRef", "{kind: Vault, name: v}")),
			want: []violation{frag("spec.secretStoreRef.kind", `Unsupported value: "Vault": supported values: "ClusterSecretStore", "SecretStore"`), celSkipped}},
		{name: "policy overrides empty", obj: glance("policy-empty", set("spec.policyOverrides", "{}")),
			want: []violation{cel("spec.policyOverrides", msgPolicyOneOf)}},
		{name: "policy rule names are left to the webhook", obj: glance("policy-names", set("spec.policyOverrides", `{rules: {"": role:admin}}`))},
		{name: "policy rule empty check string", obj: glance("policy-rules", set("spec.policyOverrides", `{rules: {a: "!", get_images: ""}}`)),
			want: []violation{cel("spec.policyOverrides.rules[get_images]", msgPolicyRuleEmpty)}},
		{name: "middleware names not unique", obj: glance("mw-dup", set("spec.middleware", "[{name: a, filterFactory: 'm:f'}, {name: a, filterFactory: 'm:g'}]")),
			want: []violation{fragOr("spec.middleware[1]", `Duplicate value: {"name":"a"}`, `Duplicate value: map[string]interface {}{"name":"a"}`)}},
		{name: "plugin sections not unique", obj: glance("plugin-dup", set("spec.plugins", "[{name: a, configSection: s}, {name: b, configSection: s}]")),
			want: []violation{fragOr("spec.plugins[1]", `Duplicate value: {"configSection":"s"}`, `Duplicate value: map[string]interface {}{"configSection":"s"}`)}},

		// Glance: image cache, staging, purge, target cluster.
		{name: "image cache size 0", obj: glance("cache-zero", set("spec.imageCache", "{size: '0'}")),
			want: []violation{cel("spec.imageCache.size", msgCacheSize)}},
		{name: "image cache integer size 0", obj: glance("cache-int-zero", set("spec.imageCache", "{size: 0}")),
			want: []violation{cel("spec.imageCache.size", msgCacheSize)}},
		{name: "image cache size of one byte", obj: glance("cache-byte", set("spec.imageCache", "{size: '1'}")),
			want: []violation{cel("spec.imageCache.size", msgCacheSize)}},
		{name: "image cache size beyond 1Pi", obj: glance("cache-huge", set("spec.imageCache", "{size: 1000000Ei}")),
			want: []violation{cel("spec.imageCache.size", msgCacheSize)}},
		{name: "image cache size at both bounds", obj: glance("cache-bounds", set("spec.imageCache", "{size: 1Mi}"))},
		{name: "image cache interval 30s", obj: glance("interval-short", set("spec.imageCache", "{size: 10Gi, maintenanceInterval: 30s}")),
			want: []violation{cel("spec.imageCache.maintenanceInterval", msgInterval)}},
		{name: "image cache interval 25h", obj: glance("interval-long", set("spec.imageCache", "{size: 10Gi, maintenanceInterval: 25h}")),
			want: []violation{cel("spec.imageCache.maintenanceInterval", msgInterval)}},
		{name: "staging sizeLimit and unbounded", obj: glance("staging-both", set("spec.staging", "{sizeLimit: 10Gi, unbounded: true}")),
			want: []violation{cel("spec.staging", msgStagingBoth)}},
		{name: "staging sizeLimit 0", obj: glance("staging-zero", set("spec.staging", "{sizeLimit: '0'}")),
			want: []violation{cel("spec.staging.sizeLimit", msgStagingSize)}},
		{name: "web-download without hosts", obj: glance("webdl-nohosts", set("spec.webDownload", "{hosts: []}")),
			want: []violation{frag("spec.webDownload.hosts", "spec.webDownload.hosts in body should have at least 1 items")}},
		{name: "web-download port 0", obj: glance("webdl-port", set("spec.webDownload", "{hosts: [images.example.com], ports: [0]}")),
			want: []violation{frag("spec.webDownload.ports[0]", "should be greater than or equal to 1")}},
		{name: "web-download hosts not unique", obj: glance("webdl-dup", set("spec.webDownload", "{hosts: [a.example.com, a.example.com]}")),
			want: []violation{frag("spec.webDownload.hosts[1]", `Duplicate value: "a.example.com"`)}},
		{name: "db purge age 0", obj: glance("purge-age", set("spec.dbPurge", "{ageInDays: 0}")),
			want: []violation{frag("spec.dbPurge.ageInDays", "spec.dbPurge.ageInDays in body should be greater than or equal to 1")}},
		{name: "target cluster name with uppercase", obj: glance("target-name", set("spec.targetClusterRef", "{name: RegionTwo}")),
			want: []violation{frag("spec.targetClusterRef.name", "spec.targetClusterRef.name in body should match")}},

		// GlanceBackend: valid objects.
		{name: "backend minimal", obj: backend("minimal")},
		// Reserved store names are admission's (under metadata.name).
		{name: "backend named default", obj: backend("default")},
		{name: "backend full", obj: object(fixtures.FullBackend, "full")},

		// GlanceBackend: rules.
		{name: "backend S3 without s3 block", obj: backend("no-s3", del("spec.s3")),
			want: []violation{cel("spec", msgS3Required)}},
		{name: "backend type Swift", obj: backend("swift", set("spec.type", "Swift")),
			want: []violation{frag("spec.type", `Unsupported value: "Swift": supported values: "S3"`), celSkipped}},
		{name: "backend s3 host without scheme", obj: backend("s3-host", set("spec.s3.host", "s3.example.com")),
			want: []violation{cel("spec.s3.host", msgS3Host)}},
		{name: "backend bucket with uppercase", obj: backend("s3-bucket", set("spec.s3.bucket", "Images")),
			want: []violation{frag("spec.s3.bucket", "spec.s3.bucket in body should match")}},
		{name: "backend chunk size 0", obj: backend("s3-chunk", set("spec.s3.largeObjectChunkSize", "0")),
			want: []violation{frag("spec.s3.largeObjectChunkSize", "spec.s3.largeObjectChunkSize in body should be greater than or equal to 1")}},
		{name: "backend bucket url format unknown", obj: backend("s3-url", set("spec.s3.bucketURLFormat", "host")),
			want: []violation{frag("spec.s3.bucketURLFormat", `Unsupported value: "host": supported values: "path", "virtual"`), celSkipped}},
		// The value rules name the entry; the key rules are the webhook's
		// (test/integration/admission), since CEL cannot name a key.
		{name: "extra option value with a line break", obj: backend("opt-value", set("spec.extraOptions", `{ok: x, a: "x\n[DEFAULT]"}`)),
			want: []violation{cel("spec.extraOptions[a]", msgOptionValue)}},
		{name: "extra option value with a carriage return", obj: backend("opt-value-cr", set("spec.extraOptions", `{weight: "1\r[DEFAULT]"}`)),
			want: []violation{cel("spec.extraOptions[weight]", msgOptionValue)}},
		{name: "two extra option values with line breaks", obj: backend("opt-values", set("spec.extraOptions", `{a: "\n", b: "\r"}`)),
			want: []violation{cel("spec.extraOptions[a]", msgOptionValue), cel("spec.extraOptions[b]", msgOptionValue)}},
		{name: "extra option keys are left to the webhook", obj: backend("opt-keys", set("spec.extraOptions", `{s3_store_host: x, a-b: x}`))},
		{name: "extra option value too long", obj: backend("opt-long", set("spec.extraOptions", "{a: "+strings.Repeat("x", 1025)+"}")),
			want: []violation{fragOr("spec.extraOptions.a", "Too long: may not be more than 1024 bytes", "Too long: may not be longer than 1024"), celSkipped}},
		{name: "33 extra options", obj: backend("opt-many", set("spec.extraOptions", fixtures.Options(33))),
			want: []violation{frag("spec.extraOptions", "Too many: 33: must have at most 32 items"), celSkipped}},
	}
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := cl.Create(ctx, tc.obj)
			checkVerdict(t, err, tc.want)
		})
	}
	if len(cases) < 40 {
		t.Fatalf("the table has %d create cases, want at least 40", len(cases))
	}
}

// checkVerdict asserts that err is nil when no violation is wanted, and
// otherwise an Invalid error whose causes are exactly the wanted ones.
func checkVerdict(t testing.TB, err error, want []violation) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("want success, got %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("want rejection %v, got success", want)
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsInvalid(err) || status.Status().Details == nil {
		t.Fatalf("want an Invalid error, got %v", err)
	}
	causes := status.Status().Details.Causes
	var got []string
	for _, c := range causes {
		got = append(got, fmt.Sprintf("%s: %s", c.Field, c.Message))
	}
	for _, w := range want {
		if !slices.ContainsFunc(causes, func(c metav1.StatusCause) bool {
			if c.Field != w.field {
				return false
			}
			if w.fragment {
				return strings.Contains(c.Message, w.message) || w.older != "" && strings.Contains(c.Message, w.older)
			}
			// A CEL cause reads `Invalid value: "object": <message>`.
			return c.Message == w.message || strings.HasSuffix(c.Message, ": "+w.message)
		}) {
			t.Errorf("missing violation %q on field %q; got:\n  %s", w.message, w.field, strings.Join(got, "\n  "))
		}
	}
	if len(causes) != len(want) {
		t.Errorf("got %d violations, want %d:\n  %s", len(causes), len(want), strings.Join(got, "\n  "))
	}
}
