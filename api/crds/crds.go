package crds

import (
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed *.yaml
var files embed.FS

// All decodes the embedded CRDs, sorted by name. Every call returns new
// objects, so callers may change them.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(files, "*.yaml")
	if err != nil {
		return nil, fmt.Errorf("list embedded CRDs: %w", err)
	}
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(names))
	for _, name := range names {
		raw, err := files.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("read embedded CRD %s: %w", name, err)
		}
		crd, err := decode(raw)
		if err != nil {
			return nil, fmt.Errorf("decode embedded CRD %s: %w", name, err)
		}
		out = append(out, crd)
	}
	slices.SortFunc(out, func(a, b *apiextensionsv1.CustomResourceDefinition) int {
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

// decode reads one CRD document, refusing unknown fields and other kinds.
func decode(raw []byte) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(raw, crd); err != nil {
		return nil, err
	}
	want := apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition")
	if got := crd.GroupVersionKind(); got != want {
		return nil, fmt.Errorf("got %s, want %s", got, want)
	}
	return crd, nil
}
