package crd

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// mutation edits an object given as decoded JSON.
type mutation func(map[string]any)

const minimalGlance = `
apiVersion: glance.openstack.c5c3.io/v1alpha1
kind: Glance
spec:
  openStackRelease: "2025.2"
  image: {repository: registry.example.com/openstack/glance, tag: "2025.2"}
  database:
    clusterRef: {name: mariadb}
    database: glance
    secretRef: {name: glance-db}
  keystoneEndpoint: http://keystone.openstack.svc:5000
  serviceUser:
    secretRef: {name: glance-service-user}
`

const fullGlance = `
apiVersion: glance.openstack.c5c3.io/v1alpha1
kind: Glance
spec:
  openStackRelease: "2026.1"
  image: {repository: "registry.example.com:5000/openstack/glance", digest: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
  deployment:
    replicas: 4
    resources:
      requests: {cpu: 200m, memory: 512Mi}
      limits: {cpu: "2", memory: 2Gi}
    terminationGracePeriodSeconds: 60
    preStopSleepSeconds: 10
    strategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 0, maxSurge: 2}}
    topologySpreadConstraints:
    - maxSkew: 1
      topologyKey: topology.kubernetes.io/zone
      whenUnsatisfiable: DoNotSchedule
      labelSelector: {matchLabels: {app.kubernetes.io/instance: full}}
    priorityClassName: openstack-critical
  database:
    host: db.example.com
    port: 3307
    database: glance_prod
    secretRef: {name: glance-db, key: pass}
    credentialsMode: Static
    tls:
      mode: verify-full
      caBundleSecretRef: {name: db-ca}
      clientCertSecretRef: {name: db-client}
  cache:
    servers: ["memcached-0.memcached:11211", "memcached-1.memcached:11211"]
    backend: dogpile.cache.pymemcache
  keystoneEndpoint: https://keystone.internal:5000/v3
  keystonePublicEndpoint: https://keystone.example.com/v3
  serviceUser:
    username: glance-svc
    projectName: services
    userDomainName: Service
    projectDomainName: Service
    secretRef: {name: glance-service-user, key: pw}
  region: RegionTwo
  apiServer:
    workers: 4
    uwsgi: {processes: 4, threads: 2, httpKeepAlive: true, httpKeepAliveTimeout: 30, harakiri: 45}
  gateway:
    parentRef: {name: public, namespace: gateways, sectionName: https}
    hostname: image.example.com
    path: /image
    annotations: {example.com/team: platform}
  networkPolicy:
    ingress:
    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: openstack}}
    - podSelector: {matchLabels: {app: nova}}
    additionalEgress:
    - to: [{ipBlock: {cidr: 10.0.0.0/8}}]
      ports: [{port: 443, protocol: TCP}]
  autoscaling: {minReplicas: 2, maxReplicas: 8, targetCPUUtilization: 70, targetMemoryUtilization: 80}
  logging:
    format: json
    level: WARNING
    debug: true
    perLoggerLevels: {sqlalchemy: ERROR, glance_store: DEBUG}
  secretStoreRef: {kind: SecretStore, name: vault}
  policyOverrides:
    rules: {"get_images": "role:reader"}
    configMapRef: {name: glance-policy}
  middleware:
  - {name: sizelimit, filterFactory: "oslo_middleware.sizelimit:RequestBodySizeLimiter.factory", position: before, config: {max_request_body_size: "1048576"}}
  plugins:
  - {name: image_conversion, configSection: image_conversion, config: {output_format: raw}}
  extraConfig:
    DEFAULT: {show_image_direct_url: "true"}
  imageCache: {size: 50Gi, maintenanceInterval: 1h}
  staging: {sizeLimit: 100Gi}
  dbPurge: {schedule: "30 2 * * 0", suspend: true, ageInDays: 7, maxRows: 1000, activeDeadlineSeconds: 600, successfulJobsHistoryLimit: 1, failedJobsHistoryLimit: 5}
  targetClusterRef: {name: region-two}
`

const minimalBackend = `
apiVersion: glance.openstack.c5c3.io/v1alpha1
kind: GlanceBackend
spec:
  glanceRef: {name: glance}
  type: S3
  s3:
    host: http://s3.example.com:9000
    bucket: images
    credentialsSecretRef: {name: s3-credentials}
`

const fullBackend = `
apiVersion: glance.openstack.c5c3.io/v1alpha1
kind: GlanceBackend
spec:
  glanceRef: {name: glance}
  type: S3
  isDefault: true
  s3:
    host: https://s3.eu-central-1.example.com
    bucket: glance.images-eu
    credentialsSecretRef: {name: s3-credentials}
    bucketURLFormat: virtual
    region: eu-central-1
    createBucketOnPut: true
    largeObjectSize: 100
    largeObjectChunkSize: 10
  extraOptions: {s3_thread_pools: "10", rados_connect_timeout: "0"}
`

// object decodes a manifest, names it and applies the mutations.
func object(manifest, name string, mutations ...mutation) *unstructured.Unstructured {
	var m map[string]any
	if err := yaml.Unmarshal([]byte(manifest), &m); err != nil {
		panic(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetName(name)
	u.SetNamespace(namespace)
	for _, mut := range mutations {
		mut(u.Object)
	}
	return u
}

// set replaces the value at a dotted path; value is YAML.
func set(path, value string) mutation {
	return func(m map[string]any) {
		var v any
		if err := yaml.Unmarshal([]byte(value), &v); err != nil {
			panic(err)
		}
		parent, key := walk(m, path)
		parent[key] = v
	}
}

// del removes the value at a dotted path.
func del(path string) mutation {
	return func(m map[string]any) {
		parent, key := walk(m, path)
		delete(parent, key)
	}
}

// walk returns the map holding the last element of path, creating
// intermediate maps.
func walk(m map[string]any, path string) (map[string]any, string) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	return m, parts[len(parts)-1]
}
