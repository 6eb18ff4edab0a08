// Package crds holds the CustomResourceDefinitions of Flotilla's kinds, one
// YAML file per CRD, generated from the types of api/v1alpha1 and
// api/apps/v1alpha1 by controller-gen (make generate) and embedded in the
// binary, so the hub can install them in its API server at start.
//
// Do not edit the YAML files: change the types or their kubebuilder
// markers and run make generate.
package crds
