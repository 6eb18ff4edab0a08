package docgen

import (
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Kinds renders the kinds crds define, in their order, as a Markdown
// table: kind, group/version (one row per served version), scope,
// resource name, short names, categories and subresources.
func Kinds(crds []*apiextensionsv1.CustomResourceDefinition) string {
	t := newTable("kind", "group/version", "scope", "resource", "short names", "categories", "subresources")
	for _, crd := range crds {
		names := crd.Spec.Names
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			var sub []string
			if v.Subresources != nil {
				if v.Subresources.Status != nil {
					sub = append(sub, "status")
				}
				if v.Subresources.Scale != nil {
					sub = append(sub, "scale")
				}
			}
			t.row(code(names.Kind), code(crd.Spec.Group+"/"+v.Name), scope(crd.Spec.Scope), code(names.Plural),
				codes(names.ShortNames), codes(names.Categories), strings.Join(sub, ", "))
		}
	}
	return t.String()
}

// PrinterColumns renders the columns `kubectl get` shows for each kind
// of crds that has any, beside NAME: a Markdown table of kind, column,
// its type, where it reads (JSONPath), whether only `-o wide` shows it,
// and its description. The kinds' names should tell them apart.
func PrinterColumns(crds []*apiextensionsv1.CustomResourceDefinition) string {
	t := newTable("kind", "column", "type", "JSONPath", "shown", "description")
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			for _, c := range v.AdditionalPrinterColumns {
				shown := "always"
				if c.Priority > 0 {
					shown = "`-o wide`"
				}
				t.row(code(crd.Spec.Names.Kind), strings.ToUpper(c.Name), c.Type, code(c.JSONPath), shown, text(c.Description))
			}
		}
	}
	return t.String()
}

func scope(s apiextensionsv1.ResourceScope) string {
	if s == apiextensionsv1.NamespaceScoped {
		return "namespace"
	}
	return "cluster"
}

// codes writes each of names as code, comma-separated.
func codes(names []string) string {
	out := make([]string, len(names))
	for i, n := range slices.Sorted(slices.Values(names)) {
		out[i] = code(n)
	}
	return strings.Join(out, ", ")
}
