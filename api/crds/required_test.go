package crds_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
)

// requiredFields lists, per CRD, every field its schema requires (list
// items as []), other than those of the Kubernetes types it embeds
// (conditions, taints, selectors). A field without omitempty in the Go
// type is required unless marked +optional: each one here was reviewed as
// something every writer sets. A new field lands here, or gets omitempty
// or +optional, by decision.
var requiredFields = map[string][]string{
	"clusters.flotilla.io": {
		"spec",
		"status.apiEnablements[].groupVersion",
		"status.apiEnablements[].resources[].kind",
		"status.apiEnablements[].resources[].name",
		"status.nodeSummary.readyNum",
		"status.nodeSummary.totalNum",
	},
	"propagationpolicies.flotilla.io":        policyRequired,
	"clusterpropagationpolicies.flotilla.io": policyRequired,
	"resourcebindings.flotilla.io":           bindingRequired,
	"clusterresourcebindings.flotilla.io":    bindingRequired,
	"purgerequests.flotilla.io":              {"spec", "spec.binding", "spec.binding.name", "spec.cluster"},
	"clustertaintpolicies.flotilla.io": {"spec",
		"spec.addOnConditions[].conditionType", "spec.addOnConditions[].operator", "spec.addOnConditions[].statusValues",
		"spec.removeOnConditions[].conditionType", "spec.removeOnConditions[].operator", "spec.removeOnConditions[].statusValues",
		"spec.taints"},
	"works.flotilla.io": {
		"spec",
		"spec.fencing.stopAfterSeconds",
		"spec.workload",
		"status.manifestStatuses[].identifier",
		"status.manifestStatuses[].identifier.kind",
		"status.manifestStatuses[].identifier.name",
		"status.manifestStatuses[].identifier.ordinal",
		"status.manifestStatuses[].identifier.version",
	},
	"workloadrebalancers.apps.flotilla.io": {
		"spec",
		"spec.workloads",
		"spec.workloads[].apiVersion",
		"spec.workloads[].kind",
		"spec.workloads[].name",
		"status.observedWorkloads[].workload",
		"status.observedWorkloads[].workload.apiVersion",
		"status.observedWorkloads[].workload.kind",
		"status.observedWorkloads[].workload.name",
	},
}

// policyRequired: as Karmada requires them; weight is required although
// the validation allows 0 (Karmada requires at least 1).
var policyRequired = []string{
	"spec",
	"spec.failover.application.statePreservation.rules",
	"spec.failover.application.statePreservation.rules[].aliasLabelName",
	"spec.failover.application.statePreservation.rules[].jsonPath",
	"spec.failover.cluster.fencing.stopAfterSeconds",
	"spec.failover.cluster.statePreservation.rules",
	"spec.failover.cluster.statePreservation.rules[].aliasLabelName",
	"spec.failover.cluster.statePreservation.rules[].jsonPath",
	"spec.placement.clusterAffinities[].affinityName",
	"spec.placement.clusterAffinities[].overflowAffinities[].affinityName",
	"spec.placement.replicaScheduling.weightPreference.staticWeightList[].targetCluster",
	"spec.placement.replicaScheduling.weightPreference.staticWeightList[].weight",
	"spec.resourceSelectors",
	"spec.resourceSelectors[].apiVersion",
	"spec.resourceSelectors[].kind",
}

var bindingRequired = []string{
	"spec",
	"spec.clusters[].name",
	"spec.failover.application.statePreservation.rules",
	"spec.failover.application.statePreservation.rules[].aliasLabelName",
	"spec.failover.application.statePreservation.rules[].jsonPath",
	"spec.failover.cluster.fencing.stopAfterSeconds",
	"spec.failover.cluster.statePreservation.rules",
	"spec.failover.cluster.statePreservation.rules[].aliasLabelName",
	"spec.failover.cluster.statePreservation.rules[].jsonPath",
	"spec.gracefulEvictionTasks[].fromCluster",
	"spec.gracefulEvictionTasks[].producer",
	"spec.gracefulEvictionTasks[].reason",
	"spec.placement.clusterAffinities[].affinityName",
	"spec.placement.clusterAffinities[].overflowAffinities[].affinityName",
	"spec.placement.replicaScheduling.weightPreference.staticWeightList[].targetCluster",
	"spec.placement.replicaScheduling.weightPreference.staticWeightList[].weight",
	"spec.resource",
	"spec.resource.apiVersion",
	"spec.resource.kind",
	"spec.resource.name",
	"status.aggregatedStatus[].clusterName",
	"status.failbackClusters[].evictedAt",
	"status.failbackClusters[].name",
}

// embeddedTypes are the schema paths (suffixes) of Kubernetes types whose
// required fields are theirs, not Flotilla's.
var embeddedTypes = []string{"conditions[]", "taints[]", "clusterTolerations[]", "matchExpressions[]"}

func TestRequiredFieldsAreDeliberate(t *testing.T) {
	for name, crd := range loadCRDs(t) {
		t.Run(name, func(t *testing.T) {
			var got []string
			collectRequired(serve(t, crd).props, "", &got)
			slices.Sort(got)
			if diff := cmp.Diff(requiredFields[name], got); diff != "" {
				t.Errorf("required fields (-reviewed +schema):\n%s", diff)
			}
		})
	}
}

func collectRequired(s *apiextensions.JSONSchemaProps, path string, out *[]string) {
	for _, suffix := range embeddedTypes {
		if strings.HasSuffix(path, suffix) {
			return
		}
	}
	prefix := path
	if prefix != "" {
		prefix += "."
	}
	for _, r := range s.Required {
		*out = append(*out, prefix+r)
	}
	for name, prop := range s.Properties {
		collectRequired(&prop, prefix+name, out)
	}
	if s.Items != nil && s.Items.Schema != nil {
		collectRequired(s.Items.Schema, path+"[]", out)
	}
}
