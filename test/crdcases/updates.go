package crdcases

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

type updateCase struct {
	name   string
	old    *unstructured.Unstructured
	update []mutation
	want   []violation
}

// RunUpdates creates the old object of every update case in namespace with
// cl, updates it, each in a subtest, and checks the API server's verdict on
// the update: the transition rules.
func RunUpdates(t *testing.T, cl client.Client, namespace string) {
	ns := objects(namespace)
	glance, backend := ns.glance, ns.backend
	cases := []updateCase{
		{name: "targetClusterRef added", old: glance("tc-add"),
			update: []mutation{set("spec.targetClusterRef", "{name: region-two}")},
			want:   []violation{cel("spec", msgTargetAddRemove)}},
		{name: "targetClusterRef removed", old: glance("tc-remove", set("spec.targetClusterRef", "{name: region-two}")),
			update: []mutation{del("spec.targetClusterRef")},
			want:   []violation{cel("spec", msgTargetAddRemove)}},
		{name: "targetClusterRef renamed", old: glance("tc-rename", set("spec.targetClusterRef", "{name: region-two}")),
			update: []mutation{set("spec.targetClusterRef", "{name: region-three}")},
			want:   []violation{cel("spec.targetClusterRef.name", msgTargetImmutable)}},
		{name: "targetClusterRef kept while the release moves", old: glance("tc-keep", set("spec.targetClusterRef", "{name: region-two}")),
			update: []mutation{set("spec.openStackRelease", `"2026.1"`), set("spec.image.tag", `"2026.1"`)}},
		{name: "no targetClusterRef before or after", old: glance("tc-none"),
			update: []mutation{set("spec.region", "RegionOne")}},
		{name: "glanceRef changed", old: backend("ref-change"),
			update: []mutation{set("spec.glanceRef.name", "other")},
			want:   []violation{cel("spec.glanceRef", msgGlanceRefFixed)}},
		{name: "backend made default", old: backend("ref-keep"),
			update: []mutation{set("spec.isDefault", "true")}},
		{name: "type changed", old: backend("type-change"),
			update: []mutation{set("spec.type", "Swift")},
			want:   []violation{frag("spec.type", `Unsupported value: "Swift": supported values: "S3"`), celSkipped}},
	}
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := cl.Create(ctx, tc.old); err != nil {
				t.Fatalf("create: %v", err)
			}
			updated := tc.old.DeepCopy()
			for _, m := range tc.update {
				m(updated.Object)
			}
			checkVerdict(t, cl.Update(ctx, updated), tc.want)
		})
	}
}
