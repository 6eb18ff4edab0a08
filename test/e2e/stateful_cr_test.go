package e2e

import (
	"fmt"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/flotilla-io/flotilla/test/membercluster"
)

// streamJobs is a custom resource like Flink's FlinkDeployment: a kind
// the agent knows nothing of, whose state lives deep in its status.
var streamJobs = schema.GroupVersionResource{Group: "stream.example.com", Version: "v1", Resource: "streamjobs"}

// streamJobYAML: one StreamJob on one of member-1 and member-2, whose
// job id and latest checkpoint are kept across a failover as labels.
const streamJobYAML = `apiVersion: stream.example.com/v1
kind: StreamJob
metadata: {name: wordcount, namespace: streaming}
spec: {parallelism: 2}
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: wordcount, namespace: streaming}
spec:
  resourceSelectors: [{apiVersion: stream.example.com/v1, kind: StreamJob, name: wordcount}]
  placement:
    clusterAffinity: {clusterNames: [member-1, member-2]}
    replicaScheduling: {replicaSchedulingType: Duplicated}
    spreadConstraints: [{spreadByField: cluster, minGroups: 1, maxGroups: 1}]
  failover:
    cluster:
      purgeMode: Directly
      statePreservation:
        rules:
        - {aliasLabelName: example.com/job-id, jsonPath: "{.jobStatus.jobId}"}
        - {aliasLabelName: example.com/checkpoint, jsonPath: "{.jobStatus.checkpointInfo.lastCheckpoint.id}"}
`

// TestStatefulFailoverCustomResource: state preservation reads any field
// of any kind. A custom resource's nested status fields (set here through
// the member's status subresource, as its operator would) are read by the
// agent for the policy's templates and reported; when the cluster is cut
// off, the eviction keeps them, and the copy in the other cluster carries
// them as labels.
func TestStatefulFailoverCustomResource(t *testing.T) {
	// The CRD is in the member clusters before their agents start: an
	// agent reads the served APIs once a minute.
	dyn := map[string]dynamic.Interface{}
	f := startFleetPrepared(t, 2, func(c *membercluster.Cluster) {
		cfg, err := c.RESTConfig()
		if err != nil {
			t.Fatal(err)
		}
		installStreamJobCRD(t, cfg)
		if dyn[c.Name], err = dynamic.NewForConfig(cfg); err != nil {
			t.Fatal(err)
		}
	}, nil, failoverFlags...)
	installStreamJobCRD(t, f.hub.restConfig(t))
	f.apply("streamjob.yaml", streamJobYAML)
	var first string
	waitFor(t, 60*time.Second, "wordcount in one cluster", func() (bool, string) {
		for _, c := range []string{"member-1", "member-2"} {
			if _, err := dyn[c].Resource(streamJobs).Namespace("streaming").Get(t.Context(), "wordcount", metav1.GetOptions{}); err == nil {
				first = c
			}
		}
		return first != "", "not in any"
	})
	second := map[string]string{"member-1": "member-2", "member-2": "member-1"}[first]
	job, err := dyn[first].Resource(streamJobs).Namespace("streaming").Get(t.Context(), "wordcount", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]any{"jobStatus": map[string]any{"jobId": "5f2c9a1e", "state": "RUNNING",
		"checkpointInfo": map[string]any{"lastCheckpoint": map[string]any{"id": "chk-42", "timestamp": int64(1764950400000)}}}}
	if err := unstructured.SetNestedMap(job.Object, status, "status"); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn[first].Resource(streamJobs).Namespace("streaming").UpdateStatus(t.Context(), job, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("set the StreamJob's status in %s: %v", first, err)
	}
	want := map[string]string{"example.com/job-id": "5f2c9a1e", "example.com/checkpoint": "chk-42"}
	waitFor(t, 30*time.Second, "the values read by "+first+"'s agent in the binding's status", func() (bool, string) {
		for _, it := range f.binding("streaming", "wordcount-streamjob").Status.AggregatedStatus {
			if it.ClusterName == first && it.StateValues["{.jobStatus.checkpointInfo.lastCheckpoint.id}"] == "chk-42" &&
				it.StateValues["{.jobStatus.jobId}"] == "5f2c9a1e" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("aggregated status %+v", f.binding("streaming", "wordcount-streamjob").Status.AggregatedStatus)
	})

	task := f.killAndAwaitEviction(t, "streaming", "wordcount-streamjob", first)
	for k, v := range want {
		if task.PreservedLabelState[k] != v {
			t.Errorf("eviction task keeps %v, want %s=%s (message %q)", task.PreservedLabelState, k, v, task.Message)
		}
	}
	// Directly: the new copy is made once the old one is gone, which the
	// agent does when it is back.
	if err := f.agents[first].Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "wordcount gone from "+first+" and made in "+second+" with the preserved labels", func() (bool, string) {
		_, errOld := dyn[first].Resource(streamJobs).Namespace("streaming").Get(t.Context(), "wordcount", metav1.GetOptions{})
		moved, err := dyn[second].Resource(streamJobs).Namespace("streaming").Get(t.Context(), "wordcount", metav1.GetOptions{})
		if err != nil {
			return false, fmt.Sprintf("old: %v; new: %v", errOld, err)
		}
		labels := moved.GetLabels()
		return apierrors.IsNotFound(errOld) && labels["example.com/job-id"] == want["example.com/job-id"] &&
			labels["example.com/checkpoint"] == want["example.com/checkpoint"], fmt.Sprintf("old: %v; new labels %v", errOld, labels)
	})
}

// installStreamJobCRD creates the StreamJob CRD (status subresource, any
// fields) in an API server and waits until it is established.
func installStreamJobCRD(t *testing.T, cfg *rest.Config) {
	t.Helper()
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	preserve := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: streamJobs.Resource + "." + streamJobs.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: streamJobs.Group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: streamJobs.Resource, Singular: "streamjob", Kind: "StreamJob", ListKind: "StreamJobList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: streamJobs.Version, Served: true, Storage: true,
				Schema:       &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}}},
		},
	}
	if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(t.Context(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the StreamJob CRD at %s: %v", cfg.Host, err)
	}
	waitFor(t, 30*time.Second, "the StreamJob CRD established at "+cfg.Host, func() (bool, string) {
		got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(t.Context(), crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, ""
			}
		}
		return false, fmt.Sprintf("conditions %v", got.Status.Conditions)
	})
}
