package v1alpha1_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/charts/glance-operator/files/crds"
)

// schemaDefaults are the v1alpha1 constants each schema default of the CRDs
// must equal, by field path. The markers and CEL rules cannot name the Go
// constants, so this table is where the two meet.
var schemaDefaults = map[string]any{
	"Glance.spec.apiServer.uwsgi.httpKeepAlive":            v1alpha1.DefaultUWSGIHTTPKeepAlive,
	"Glance.spec.apiServer.uwsgi.processes":                v1alpha1.DefaultUWSGIProcesses,
	"Glance.spec.apiServer.uwsgi.threads":                  v1alpha1.DefaultUWSGIThreads,
	"Glance.spec.cache.backend":                            v1alpha1.DefaultCacheBackend,
	"Glance.spec.database.credentialsMode":                 v1alpha1.DefaultCredentialsMode,
	"Glance.spec.database.port":                            v1alpha1.DefaultDatabasePort,
	"Glance.spec.dbPurge.activeDeadlineSeconds":            v1alpha1.DefaultDBPurgeActiveDeadlineSecs,
	"Glance.spec.dbPurge.ageInDays":                        v1alpha1.DefaultDBPurgeAgeInDays,
	"Glance.spec.dbPurge.failedJobsHistoryLimit":           v1alpha1.DefaultDBPurgeFailedJobsLimit,
	"Glance.spec.dbPurge.maxRows":                          v1alpha1.DefaultDBPurgeMaxRows,
	"Glance.spec.dbPurge.schedule":                         v1alpha1.DefaultDBPurgeSchedule,
	"Glance.spec.dbPurge.successfulJobsHistoryLimit":       v1alpha1.DefaultDBPurgeSuccessfulJobsLimit,
	"Glance.spec.dbPurge.suspend":                          v1alpha1.DefaultDBPurgeSuspend,
	"Glance.spec.deployment.preStopSleepSeconds":           v1alpha1.DefaultPreStopSleepSeconds,
	"Glance.spec.deployment.replicas":                      v1alpha1.DefaultReplicas,
	"Glance.spec.deployment.terminationGracePeriodSeconds": v1alpha1.DefaultTerminationGracePeriodSeconds,
	"Glance.spec.gateway.path":                             v1alpha1.DefaultGatewayPath,
	"Glance.spec.imageCache.maintenanceInterval":           v1alpha1.DefaultImageCacheMaintenanceInterval,
	"Glance.spec.logging.debug":                            v1alpha1.DefaultLogDebug,
	"Glance.spec.logging.format":                           v1alpha1.DefaultLogFormat,
	"Glance.spec.logging.level":                            v1alpha1.DefaultLogLevel,
	"Glance.spec.middleware[].position":                    v1alpha1.DefaultMiddlewarePosition,
	"Glance.spec.secretStoreRef.kind":                      v1alpha1.DefaultSecretStoreKind,
	"Glance.spec.serviceUser.projectDomainName":            v1alpha1.DefaultServiceProjectDomainName,
	"Glance.spec.serviceUser.projectName":                  v1alpha1.DefaultServiceProjectName,
	"Glance.spec.serviceUser.userDomainName":               v1alpha1.DefaultServiceUserDomainName,
	"Glance.spec.serviceUser.username":                     v1alpha1.DefaultServiceUsername,
	"GlanceBackend.spec.s3.bucketURLFormat":                v1alpha1.DefaultBucketURLFormat,
}

// A CEL rule reads an unset defaulted field as
// "has(self.f) ? self.f : <literal>", and a message may say "f (default <n>)".
var (
	celFallback    = regexp.MustCompile(`has\(self\.([\w.]+)\) \? self\.[\w.]+ : (\d+)`)
	messageDefault = regexp.MustCompile(`([\w.]+) \(default (\d+)\)`)
)

// TestSchemaDefaultsAreTheConstants: every default the CRDs carry, and every
// literal a CEL rule or its message falls back to, is the v1alpha1 constant,
// so a default changed in Go cannot leave the schema behind, or the other
// way round.
func TestSchemaDefaultsAreTheConstants(t *testing.T) {
	defaults := map[string]json.RawMessage{}
	fallbacks := map[string][]string{}
	for _, doc := range [][]byte{crds.Glance, crds.GlanceBackend} {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(doc, &crd); err != nil {
			t.Fatal(err)
		}
		for _, v := range crd.Spec.Versions {
			walkSchema(crd.Spec.Names.Kind, v.Schema.OpenAPIV3Schema, defaults, fallbacks)
		}
	}
	if len(defaults) == 0 || len(fallbacks) == 0 {
		t.Fatalf("found %d schema defaults and %d CEL fallbacks: the walk is broken", len(defaults), len(fallbacks))
	}

	for _, path := range slices.Sorted(maps.Keys(defaults)) {
		want, ok := schemaDefaults[path]
		if !ok {
			t.Errorf("%s has the schema default %s but no v1alpha1 constant in schemaDefaults", path, defaults[path])
			continue
		}
		if got := decodeLike(t, defaults[path], want); got != fmt.Sprint(want) {
			t.Errorf("%s: the schema default is %s, the constant %v", path, got, want)
		}
	}
	for _, path := range slices.Sorted(maps.Keys(schemaDefaults)) {
		if _, ok := defaults[path]; !ok {
			t.Errorf("schemaDefaults lists %s, which has no schema default", path)
		}
	}
	for _, path := range slices.Sorted(maps.Keys(fallbacks)) {
		want, ok := schemaDefaults[path]
		if !ok {
			t.Errorf("a CEL rule falls back to a literal for %s, which has no schema default", path)
			continue
		}
		for _, lit := range fallbacks[path] {
			if lit != fmt.Sprint(want) {
				t.Errorf("a CEL rule or message takes %s as %s, the constant is %v", path, lit, want)
			}
		}
	}
}

func walkSchema(path string, s *apiextensionsv1.JSONSchemaProps, defaults map[string]json.RawMessage, fallbacks map[string][]string) {
	if s == nil {
		return
	}
	if s.Default != nil {
		defaults[path] = s.Default.Raw
	}
	for _, r := range s.XValidations {
		for _, m := range celFallback.FindAllStringSubmatch(r.Rule, -1) {
			fallbacks[path+"."+m[1]] = append(fallbacks[path+"."+m[1]], m[2])
		}
		for _, m := range messageDefault.FindAllStringSubmatch(r.Message, -1) {
			fallbacks[path+"."+m[1]] = append(fallbacks[path+"."+m[1]], m[2])
		}
	}
	for name, p := range s.Properties {
		walkSchema(path+"."+name, &p, defaults, fallbacks)
	}
	if s.Items != nil {
		walkSchema(path+"[]", s.Items.Schema, defaults, fallbacks)
	}
	if s.AdditionalProperties != nil {
		walkSchema(path+"{}", s.AdditionalProperties.Schema, defaults, fallbacks)
	}
}

// decodeLike reads a schema default as the constant's type reads it, and
// formats it as fmt formats the constant.
func decodeLike(t *testing.T, raw json.RawMessage, like any) string {
	t.Helper()
	if _, ok := like.(time.Duration); ok {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		got, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("default %s is not a duration: %v", raw, err)
		}
		return fmt.Sprint(got)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if f, ok := v.(float64); ok {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}
