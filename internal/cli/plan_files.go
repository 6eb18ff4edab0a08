package cli

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/api/validation"
)

// readPlanFile reads the objects of one plan input file, reporting every
// problem with its file and document.
func readPlanFile(inv *invocation, flag, path string) ([]manifest, error) {
	sources, err := readSources(inv.Stdin, []string{path}, false)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	manifests, problems := loadManifests(sources)
	if len(problems) > 0 {
		lines := make([]string, len(problems))
		for i, p := range problems {
			lines[i] = p.String()
		}
		return nil, fmt.Errorf("%s:\n  %s", flag, strings.Join(lines, "\n  "))
	}
	if len(manifests) == 0 {
		return nil, fmt.Errorf("%s %s: no objects in it", flag, path)
	}
	return manifests, nil
}

// only returns the one object of a file that must hold exactly one.
func only(flag string, manifests []manifest) (manifest, error) {
	if len(manifests) != 1 {
		return manifest{}, fmt.Errorf("%s: %d objects, want exactly one", flag, len(manifests))
	}
	return manifests[0], nil
}

// fieldProblems words validation errors with where they are.
func fieldProblems(m manifest, errs field.ErrorList) error {
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = m.where() + ": " + e.Error()
	}
	return fmt.Errorf("%s", strings.Join(lines, "\n"))
}

func loadPolicy(inv *invocation, path string) (*v1alpha1.PropagationSpec, error) {
	manifests, err := readPlanFile(inv, "--policy", path)
	if err != nil {
		return nil, err
	}
	m, err := only("--policy", manifests)
	if err != nil {
		return nil, err
	}
	if !validation.IsPolicyAPIVersion(m.apiVersion) {
		return nil, fmt.Errorf("%s: apiVersion %q: want %s or %s", m.where(), m.apiVersion, v1alpha1.APIVersion, validation.KarmadaPolicyAPIVersion)
	}
	switch m.kind {
	case v1alpha1.KindPropagationPolicy:
		p, errs := validation.PropagationPolicy(m.raw)
		// A plan has no namespace to default from: a policy file without
		// one is fine here.
		errs = errs.Filter(func(err error) bool {
			var fe *field.Error
			return errors.As(err, &fe) && fe.Field == "metadata.namespace" && fe.Type == field.ErrorTypeRequired
		})
		if len(errs) > 0 || p == nil {
			return nil, fieldProblems(m, errs)
		}
		return &p.Spec, nil
	case v1alpha1.KindClusterPropagationPolicy:
		p, errs := validation.ClusterPropagationPolicy(m.raw)
		if len(errs) > 0 {
			return nil, fieldProblems(m, errs)
		}
		return &p.Spec, nil
	}
	return nil, fmt.Errorf("%s: kind %q: want %s or %s", m.where(), m.kind, v1alpha1.KindPropagationPolicy, v1alpha1.KindClusterPropagationPolicy)
}

func loadTemplate(inv *invocation, path string) (*unstructured.Unstructured, error) {
	manifests, err := readPlanFile(inv, "--template", path)
	if err != nil {
		return nil, err
	}
	m, err := only("--template", manifests)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(m.raw); err != nil {
		return nil, fmt.Errorf("%s: %w", m.where(), err)
	}
	if errs := validation.Template(u, u.GetNamespace() != ""); len(errs) > 0 {
		return nil, fieldProblems(m, errs)
	}
	return u, nil
}

func loadClusters(inv *invocation, path string) ([]*v1alpha1.Cluster, error) {
	manifests, err := readPlanFile(inv, "--clusters", path)
	if err != nil {
		return nil, err
	}
	var clusters []*v1alpha1.Cluster
	for _, m := range manifests {
		if m.kind != v1alpha1.KindCluster {
			return nil, fmt.Errorf("%s: kind %q: want Cluster", m.where(), m.kind)
		}
		c := &v1alpha1.Cluster{}
		if errs := validation.DecodeStrict(m.raw, c); len(errs) > 0 {
			return nil, fieldProblems(m, errs)
		}
		clusters = append(clusters, c)
	}
	return clusters, nil
}

// loadPrevious reads the binding whose spec.clusters is the previous
// result; its eviction tasks and affinity group count too, so planning on
// a binding read from the hub gives the hub's answer.
func loadPrevious(inv *invocation, path string) (*v1alpha1.ResourceBinding, error) {
	manifests, err := readPlanFile(inv, "--previous", path)
	if err != nil {
		return nil, err
	}
	m, err := only("--previous", manifests)
	if err != nil {
		return nil, err
	}
	if m.kind != v1alpha1.KindResourceBinding && m.kind != v1alpha1.KindClusterResourceBinding {
		return nil, fmt.Errorf("%s: kind %q: want ResourceBinding or ClusterResourceBinding", m.where(), m.kind)
	}
	b := &v1alpha1.ResourceBinding{}
	if errs := validation.DecodeStrict(m.raw, b); len(errs) > 0 {
		return nil, fieldProblems(m, errs)
	}
	return b, nil
}
