package crds

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Karmada's API groups the hub also serves, with Flotilla's schemas.
const (
	KarmadaPolicyGroup = "policy.karmada.io"
	KarmadaAppsGroup   = "apps.karmada.io"
)

// LabelAliasOf is on each of Karmada's CRDs: the Flotilla CRD it copies.
const LabelAliasOf = "flotilla.io/alias-of"

// karmadaGroups maps Flotilla's groups of Karmada's kinds to Karmada's.
var karmadaGroups = map[string]map[string]string{
	"flotilla.io": {"PropagationPolicy": KarmadaPolicyGroup, "ClusterPropagationPolicy": KarmadaPolicyGroup,
		"ClusterTaintPolicy": KarmadaPolicyGroup},
	"apps.flotilla.io": {"WorkloadRebalancer": KarmadaAppsGroup},
}

// KarmadaGroup is Karmada's group of the kind of Flotilla's group, or ""
// when Karmada has no such kind the hub serves.
func KarmadaGroup(group, kind string) string { return karmadaGroups[group][kind] }

// Karmada returns the CRDs of Karmada's documents that Flotilla accepts as
// written: policy.karmada.io PropagationPolicy, ClusterPropagationPolicy
// and ClusterTaintPolicy and apps.karmada.io WorkloadRebalancer, each a copy of Flotilla's CRD of
// that kind in Karmada's group (the same field names, schema, columns and
// status subresource), so kubectl can apply Karmada's documents to the
// hub. Short names and categories stay with Flotilla's kinds, so `pp` and
// `kubectl get flotilla` keep meaning them. The hub mirrors these objects
// into their Flotilla kinds (hub/karmada).
func Karmada() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	all, err := All()
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range all {
		group := KarmadaGroup(crd.Spec.Group, crd.Spec.Names.Kind)
		if group == "" {
			continue
		}
		alias := crd.DeepCopy()
		alias.Labels = map[string]string{LabelAliasOf: crd.Name}
		alias.Spec.Group = group
		alias.Name = fmt.Sprintf("%s.%s", crd.Spec.Names.Plural, group)
		alias.Spec.Names.ShortNames = nil
		alias.Spec.Names.Categories = nil
		out = append(out, alias)
	}
	if len(out) != 4 {
		return nil, fmt.Errorf("found %d of Karmada's 4 kinds among Flotilla's CRDs", len(out))
	}
	return out, nil
}

// Hub returns every CRD the hub installs: All, then Karmada.
func Hub() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	all, err := All()
	if err != nil {
		return nil, err
	}
	karmada, err := Karmada()
	if err != nil {
		return nil, err
	}
	return append(all, karmada...), nil
}
