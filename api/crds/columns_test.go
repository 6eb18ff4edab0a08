package crds_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestPrinterColumnsShowValues renders objects as the API server renders
// them for kubectl get (-o wide), checking the columns find their values.
func TestPrinterColumnsShowValues(t *testing.T) {
	byName := loadCRDs(t)
	created := metav1.NewTime(now.Add(-90 * time.Minute))
	tests := []struct {
		crd  string
		obj  runtime.Object
		want map[string]any // column name → cell; columns not named must not be empty
	}{
		{"clusters.flotilla.io", clusterReady(), map[string]any{
			"Ready": "True", "Taints": "cluster.flotilla.io/unschedulable", "Version": "v1.37.2",
			"Zone": "eu-west-1a", "Region": "eu-west-1", "Provider": "aws"}},
		{"propagationpolicies.flotilla.io", propagationPolicy(), map[string]any{"Priority": int64(0), "Scheduling": "Divided"}},
		{"clusterpropagationpolicies.flotilla.io", clusterPropagationPolicy(), map[string]any{"Priority": int64(0)}},
		{"resourcebindings.flotilla.io", bindingScheduled(), map[string]any{
			"Scheduled": "True", "FullyApplied": "False", "Kind": "Deployment", "Resource": "nginx", "Replicas": int64(3)}},
		{"clusterresourcebindings.flotilla.io", clusterResourceBinding(), map[string]any{
			"Scheduled": "True", "FullyApplied": "False", "Kind": "ClusterRole", "Resource": "reader", "Replicas": nil}},
		{"works.flotilla.io", workApplied(), map[string]any{"Applied": "True", "Generation": int64(1), "Acked": int64(1)}},
		{"workloadrebalancers.apps.flotilla.io", rebalancerFinished(), map[string]any{}},
	}
	for _, tc := range tests {
		t.Run(tc.crd, func(t *testing.T) {
			crd := byName[tc.crd]
			if crd == nil {
				t.Fatalf("no CRD %s", tc.crd)
			}
			convertor, err := tableconvertor.New(crd.Spec.Versions[0].AdditionalPrinterColumns)
			if err != nil {
				t.Fatalf("table convertor: %v", err)
			}
			u := &unstructured.Unstructured{Object: toUnstructured(t, tc.obj)}
			u.SetCreationTimestamp(created)
			table, err := convertor.ConvertToTable(t.Context(), u, nil)
			if err != nil {
				t.Fatalf("ConvertToTable: %v", err)
			}
			if len(table.Rows) != 1 || len(table.Rows[0].Cells) != len(table.ColumnDefinitions) {
				t.Fatalf("got %d rows for %d columns: %+v", len(table.Rows), len(table.ColumnDefinitions), table.Rows)
			}
			for i, col := range table.ColumnDefinitions {
				cell := table.Rows[0].Cells[i]
				want, named := tc.want[col.Name]
				switch {
				case col.Name == "Name" || col.Name == "Age":
					continue
				case named:
					if diff := cmp.Diff(want, cell); diff != "" {
						t.Errorf("column %s (-want +got):\n%s", col.Name, diff)
					}
				case cell == nil:
					t.Errorf("column %s is empty", col.Name)
				}
			}
		})
	}
}
