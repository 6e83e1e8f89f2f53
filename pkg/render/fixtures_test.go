package render

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// minimalGlance is a Glance as a user writes it, before admission defaults:
// every default must be resolved by the renderer itself.
func minimalGlance() *v1alpha1.Glance {
	return &v1alpha1.Glance{
		ObjectMeta: metav1.ObjectMeta{Name: "glance", Namespace: "openstack"},
		Spec: v1alpha1.GlanceSpec{
			OpenStackRelease: "2025.2",
			Image:            v1alpha1.ImageSpec{Repository: "registry.example.com/openstack/glance", Tag: "2025.2-20251001"},
			Database: v1alpha1.DatabaseSpec{
				ClusterRef: &v1alpha1.LocalObjectReference{Name: "mariadb"},
				Database:   "glance",
				SecretRef:  v1alpha1.SecretKeySelector{Name: "glance-db"},
			},
			KeystoneEndpoint: "http://keystone.openstack.svc:5000/v3",
			ServiceUser:      v1alpha1.ServiceUserSpec{SecretRef: v1alpha1.SecretKeySelector{Name: "glance-service-user"}},
		},
	}
}

// fullGlance sets every field the config renders from.
func fullGlance() *v1alpha1.Glance {
	g := minimalGlance()
	s := &g.Spec
	s.KeystonePublicEndpoint = "https://keystone.example.com/v3"
	s.ServiceUser.Username = "glance-svc"
	s.ServiceUser.ProjectName = "services"
	s.ServiceUser.UserDomainName = "service_domain"
	s.ServiceUser.ProjectDomainName = "service_domain"
	s.Region = "RegionOne"
	s.APIServer = &v1alpha1.APIServerSpec{Workers: ptr.To[int32](4)}
	s.Cache = &v1alpha1.CacheSpec{Servers: []string{"memcached-0.memcached:11211", "memcached-1.memcached:11211"}}
	s.Logging = &v1alpha1.LoggingSpec{
		Format:          v1alpha1.LogFormatJSON,
		Level:           "WARNING",
		PerLoggerLevels: map[string]v1alpha1.LogLevel{"sqlalchemy.engine": "ERROR", "glance.api": "DEBUG", "keystonemiddleware.auth_token": "INFO"},
	}
	s.PolicyOverrides = &v1alpha1.PolicyOverridesSpec{
		Rules:        map[string]v1alpha1.PolicyRule{"publicize_image": "role:admin", "get_images": "role:reader or role:admin"},
		ConfigMapRef: &v1alpha1.LocalObjectReference{Name: "glance-policy"},
	}
	s.Middleware = []v1alpha1.MiddlewareSpec{
		{Name: "request_id", FilterFactory: "oslo_middleware:RequestId.factory", Position: v1alpha1.MiddlewareBeforeAuth},
		{Name: "audit", FilterFactory: "audit_middleware:filter_factory", Config: map[string]string{"audit_map_file": "/etc/glance/audit_map.yaml", "format": "100%"}},
		{Name: "sizelimit", FilterFactory: "oslo_middleware:RequestBodySizeLimiter.factory", Position: v1alpha1.MiddlewareBeforeAuth},
	}
	s.Plugins = []v1alpha1.PluginSpec{
		{Name: "image_conversion", ConfigSection: "image_conversion", Config: map[string]string{"output_format": "raw"}},
		{Name: "inject_image_metadata", ConfigSection: "inject_metadata_properties", Config: map[string]string{"ignore_user_roles": "admin", "inject": "hw_vif_model:virtio"}},
	}
	s.ExtraConfig = map[string]map[string]string{
		"DEFAULT":           {"show_image_direct_url": "true", "image_size_cap": "1099511627776"},
		"oslo_messaging":    {"transport_url": "$transport"},
		"taskflow_executor": {"conversion_format": "raw"},
	}
	return g
}

func imageCacheGlance() *v1alpha1.Glance {
	g := minimalGlance()
	g.Spec.ImageCache = &v1alpha1.ImageCacheSpec{Size: resource.MustParse("50Gi")}
	return g
}

func tlsDatabaseGlance() *v1alpha1.Glance {
	g := minimalGlance()
	g.Spec.Database = v1alpha1.DatabaseSpec{
		Host:      "db.example.com",
		Port:      3307,
		Database:  "glance_prod",
		SecretRef: v1alpha1.SecretKeySelector{Name: "glance-db"},
		TLS: &v1alpha1.DatabaseTLSSpec{
			Mode:                v1alpha1.DatabaseTLSVerifyFull,
			CABundleSecretRef:   &v1alpha1.SecretKeySelector{Name: "db-ca", Key: "bundle.pem"},
			ClientCertSecretRef: &v1alpha1.LocalObjectReference{Name: "glance-db-client"},
		},
	}
	g.Spec.Cache = &v1alpha1.CacheSpec{ClusterRef: &v1alpha1.LocalObjectReference{Name: "memcached"}}
	return g
}

func uwsgiGlance() *v1alpha1.Glance {
	g := minimalGlance()
	g.Spec.OpenStackRelease = "2026.1"
	g.Spec.Image.Tag = "2026.1-20260301"
	// workers is the eventlet knob: inert (and not rendered) under uWSGI.
	g.Spec.APIServer = &v1alpha1.APIServerSpec{Workers: ptr.To[int32](8), UWSGI: &v1alpha1.UWSGISpec{Processes: ptr.To[int32](4)}}
	return g
}

func s3Backend(name string, isDefault bool) Backend {
	return Backend{
		Name: name,
		Spec: v1alpha1.GlanceBackendSpec{
			GlanceRef: v1alpha1.LocalObjectReference{Name: "glance"},
			Type:      v1alpha1.BackendTypeS3,
			IsDefault: isDefault,
			S3: &v1alpha1.S3BackendSpec{
				Host:                 "https://s3.example.com",
				Bucket:               "glance-" + name,
				CredentialsSecretRef: v1alpha1.LocalObjectReference{Name: name + "-s3"},
			},
		},
		AccessKeyID:     "AKIA" + name,
		SecretAccessKey: "secret/" + name + "+key",
	}
}

// renderedAsWanted checks a builder's err against a case's wantErr: with
// wantErr, err must contain it; without, err must be nil. It fails t
// otherwise, and reports whether the case goes on to check the object.
func renderedAsWanted(t *testing.T, err error, wantErr string) bool {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("err = %v, want one containing %q", err, wantErr)
		}
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}
