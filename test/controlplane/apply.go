package controlplane

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldManager is the server-side apply field manager of objects the harness
// applies.
const FieldManager = "glance-operator-harness"

// ApplyFiles server-side applies every object of the given multi-document
// YAML files, in order, and returns them as applied.
func ApplyFiles(ctx context.Context, cfg *rest.Config, files ...string) ([]*unstructured.Unstructured, error) {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	var applied []*unstructured.Unstructured
	for _, f := range files {
		objs, err := ReadObjects(f)
		if err != nil {
			return applied, err
		}
		for _, obj := range objs {
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
				return applied, fmt.Errorf("apply %s %s/%s from %s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), f, err)
			}
			applied = append(applied, obj)
		}
	}
	return applied, nil
}

// ReadObjects decodes the objects of a multi-document YAML file, skipping
// empty documents.
func ReadObjects(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objs, err := DecodeObjects(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}

// DecodeObjects decodes the objects of a multi-document YAML text, skipping
// empty documents.
func DecodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		obj := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &obj.Object); err != nil {
			return nil, err
		}
		if len(obj.Object) == 0 {
			continue
		}
		objs = append(objs, obj)
	}
}
