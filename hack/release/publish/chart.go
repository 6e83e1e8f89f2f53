package publish

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	yaml3 "go.yaml.in/yaml/v3"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"sigs.k8s.io/yaml"

	"github.com/c5c3/glance-operator/hack/images/ociimage"
)

// annotationImages is Artifact Hub's list of a chart's images.
const annotationImages = "artifacthub.io/images"

// packagedChart is the chart archive of a release.
type packagedChart struct {
	Name, Version string
	Created       time.Time
	Archive       []byte
}

// packageChart packages the chart of the checkout at root as `helm package`
// does, but byte-stable (every header stamped with created) and with each
// image pinned: in values.yaml its repository under registry and its index
// digest, in Chart.yaml's Artifact Hub images by digest. Everything else of
// values.yaml, comments included, stays as written.
func packageChart(root, registry string, images []Image, created time.Time) (packagedChart, error) {
	dir := filepath.Join(root, filepath.Dir(ociimage.ChartFile))
	c, err := loader.LoadDir(dir)
	if err != nil {
		return packagedChart{}, err
	}
	values, ok := rawFile(c, chartutil.ValuesfileName)
	if !ok {
		return packagedChart{}, fmt.Errorf("%s has no %s", dir, chartutil.ValuesfileName)
	}
	var listed []map[string]string
	for _, img := range ociimage.Images {
		digest, ok := digestOf(images, img.Name)
		if !ok {
			return packagedChart{}, fmt.Errorf("no digest of %s", img.Name)
		}
		repository := registry + "/" + img.Name
		if values, err = setScalars(values, map[string]string{
			img.Component + ".image.repository": repository,
			img.Component + ".image.digest":     digest.String(),
		}); err != nil {
			return packagedChart{}, err
		}
		listed = append(listed, map[string]string{"name": img.Name, "image": repository + ":" + c.Metadata.AppVersion + "@" + digest.String()})
	}
	// The pinned values must still pass the chart's schema.
	pinned, err := chartutil.ReadValues(values)
	if err != nil {
		return packagedChart{}, fmt.Errorf("the pinned values.yaml: %w", err)
	}
	if err := chartutil.ValidateAgainstSchema(c, pinned); err != nil {
		return packagedChart{}, fmt.Errorf("the pinned values.yaml: %w", err)
	}

	imagesYAML, err := yaml.Marshal(listed)
	if err != nil {
		return packagedChart{}, err
	}
	if c.Metadata.Annotations == nil {
		c.Metadata.Annotations = map[string]string{}
	}
	c.Metadata.Annotations[annotationImages] = string(imagesYAML)
	// As `helm package` writes it: the metadata, not the file's comments.
	meta, err := yaml.Marshal(c.Metadata)
	if err != nil {
		return packagedChart{}, err
	}

	files := map[string][]byte{}
	for _, f := range c.Raw {
		files[f.Name] = f.Data
	}
	files[chartutil.ChartfileName] = meta
	files[chartutil.ValuesfileName] = values
	archive, err := writeChartArchive(c.Name(), files, created)
	if err != nil {
		return packagedChart{}, err
	}
	return packagedChart{Name: c.Name(), Version: c.Metadata.Version, Created: created, Archive: archive}, nil
}

func rawFile(c *chart.Chart, name string) ([]byte, bool) {
	for _, f := range c.Raw {
		if f.Name == name {
			return f.Data, true
		}
	}
	return nil, false
}

// setScalars replaces the scalars at the dotted paths of a YAML document in
// place, as double-quoted strings, leaving every other byte as it was.
func setScalars(doc []byte, values map[string]string) ([]byte, error) {
	var root yaml3.Node
	if err := yaml3.Unmarshal(doc, &root); err != nil {
		return nil, err
	}
	if len(root.Content) != 1 {
		return nil, fmt.Errorf("values.yaml is not one YAML document")
	}
	lines := strings.SplitAfter(string(doc), "\n")
	// Replace from the end, so that earlier positions hold.
	paths := make([]string, 0, len(values))
	nodes := map[string]*yaml3.Node{}
	for path := range values {
		n := lookup(root.Content[0], strings.Split(path, "."))
		if n == nil || n.Kind != yaml3.ScalarNode {
			return nil, fmt.Errorf("values.yaml has no scalar %s", path)
		}
		if n.Style&(yaml3.LiteralStyle|yaml3.FoldedStyle) != 0 || strings.Contains(n.Value, "\n") {
			return nil, fmt.Errorf("values.yaml: %s is a multi-line scalar", path)
		}
		paths = append(paths, path)
		nodes[path] = n
	}
	slices.SortFunc(paths, func(a, b string) int {
		if d := nodes[b].Line - nodes[a].Line; d != 0 {
			return d
		}
		return nodes[b].Column - nodes[a].Column
	})
	for _, path := range paths {
		n := nodes[path]
		line := lines[n.Line-1]
		start := n.Column - 1
		old := scalarText(n)
		if !strings.HasPrefix(line[start:], old) {
			return nil, fmt.Errorf("values.yaml line %d: %s is not written as %s", n.Line, path, old)
		}
		lines[n.Line-1] = line[:start] + strconv.Quote(values[path]) + line[start+len(old):]
	}
	out := []byte(strings.Join(lines, ""))
	// What was set must read back.
	var check yaml3.Node
	if err := yaml3.Unmarshal(out, &check); err != nil {
		return nil, fmt.Errorf("values.yaml after setting the images: %w", err)
	}
	for path, want := range values {
		if n := lookup(check.Content[0], strings.Split(path, ".")); n == nil || n.Value != want {
			return nil, fmt.Errorf("values.yaml after setting the images: %s is not %q", path, want)
		}
	}
	return out, nil
}

// scalarText is how a one-line scalar is written in the document.
func scalarText(n *yaml3.Node) string {
	switch {
	case n.Style&yaml3.DoubleQuotedStyle != 0:
		return strconv.Quote(n.Value)
	case n.Style&yaml3.SingleQuotedStyle != 0:
		return "'" + strings.ReplaceAll(n.Value, "'", "''") + "'"
	default:
		return n.Value
	}
}

// lookup follows keys through nested mappings.
func lookup(n *yaml3.Node, keys []string) *yaml3.Node {
	for _, k := range keys {
		if n.Kind != yaml3.MappingNode {
			return nil
		}
		var next *yaml3.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

// writeChartArchive writes files under NAME/ as a gzipped tar, in name
// order, every header the same but for name and size.
func writeChartArchive(name string, files map[string][]byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeReg,
			Name:     name + "/" + n,
			Mode:     0o644,
			Size:     int64(len(files[n])),
			ModTime:  mtime,
		}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(files[n]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
