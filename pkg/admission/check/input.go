package check

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// ReadDocuments reads the objects of the given files and directories (YAML
// or JSON, several documents per file; directories are walked for .yaml,
// .yml and .json files in lexical order). List kinds are expanded.
func ReadDocuments(paths ...string) ([]Document, error) {
	var docs []Document
	for _, p := range paths {
		files, err := manifestFiles(p)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			fileDocs, err := readFile(f)
			if err != nil {
				return nil, err
			}
			docs = append(docs, fileDocs...)
		}
	}
	return docs, nil
}

func manifestFiles(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{path}, nil
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch strings.ToLower(filepath.Ext(p)) {
		case ".yaml", ".yml", ".json":
			if !d.IsDir() {
				files = append(files, p)
			}
		}
		return nil
	})
	sort.Strings(files)
	return files, err
}

func readFile(path string) ([]Document, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs []Document
	for index := 0; ; index++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s#%d: %w", path, index, err)
		}
		obj := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(raw, &obj.Object); err != nil {
			return nil, fmt.Errorf("%s#%d: %w", path, index, err)
		}
		if len(obj.Object) == 0 {
			index-- // an empty document is not counted, as kubectl skips it
			continue
		}
		source := fmt.Sprintf("%s#%d", path, index)
		if obj.GetKind() == "" || obj.GetAPIVersion() == "" {
			return nil, fmt.Errorf("%s: apiVersion and kind are required", source)
		}
		if obj.IsList() {
			list, err := obj.ToList()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", source, err)
			}
			for i := range list.Items {
				docs = append(docs, Document{Source: fmt.Sprintf("%s[%d]", source, i), Object: &list.Items[i]})
			}
			continue
		}
		docs = append(docs, Document{Source: source, Object: obj})
	}
}
