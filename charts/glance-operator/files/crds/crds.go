// Package crds embeds the generated CRDs of this chart, so that the offline
// checker evaluates exactly the schema and CEL rules the cluster enforces.
// Helm reads only the YAML files of this directory.
package crds

import _ "embed"

// Glance is the Glance CustomResourceDefinition.
//
//go:embed glance.openstack.c5c3.io_glances.yaml
var Glance []byte

// GlanceBackend is the GlanceBackend CustomResourceDefinition.
//
//go:embed glance.openstack.c5c3.io_glancebackends.yaml
var GlanceBackend []byte
