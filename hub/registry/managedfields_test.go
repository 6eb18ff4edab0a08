package registry

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/protocol"
)

// TestRegistryDropsManagedFields: once the registry has written a Cluster
// and its Lease, neither carries managedFields, and later status writes
// add none back; a Cluster someone applied server-side keeps them.
func TestRegistryDropsManagedFields(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	clusters := f.api.Flotilla.FlotillaV1alpha1().Clusters()
	applied := []byte(`{"apiVersion":"flotilla.io/v1alpha1","kind":"Cluster","metadata":{"name":"mf-applied","labels":{"site":"a"}},"spec":{}}`)
	force := true
	if _, err := clusters.Patch(t.Context(), "mf-applied", types.ApplyPatchType, applied, metav1.PatchOptions{FieldManager: "gitops", Force: &force}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"mf-plain", "mf-applied"} {
		f.connect(name)
		f.renew(name)
	}
	f.flush()
	// A second write of each: a status change, and the leases again.
	clk.Step(time.Second)
	for _, name := range []string{"mf-plain", "mf-applied"} {
		if err := f.reg.Status(name, &protocol.ClusterStatus{ObservedAt: clk.Now(), KubernetesVersion: "v1.37.2", APIServerHealthy: true, NodesTotal: 1, NodesReady: 1}); err != nil {
			t.Fatal(err)
		}
		f.renew(name)
	}
	f.flush()

	managers := func(name string) []string {
		t.Helper()
		c, err := clusters.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c.Status.KubernetesVersion != "v1.37.2" {
			t.Errorf("cluster %s: status not stored (kubernetesVersion %q)", name, c.Status.KubernetesVersion)
		}
		var out []string
		for _, e := range c.ManagedFields {
			out = append(out, e.Manager+"/"+string(e.Operation)+"/"+e.Subresource)
		}
		return out
	}
	if got := managers("mf-plain"); len(got) != 0 {
		t.Errorf("cluster mf-plain keeps managedFields %v, want none", got)
	}
	want := []string{"gitops/Apply/", "flotilla-hub/Update/status"}
	if diff := cmp.Diff(want, managers("mf-applied")); diff != "" {
		t.Errorf("cluster mf-applied's managers (-want +got):\n%s", diff)
	}
	for _, name := range []string{"mf-plain", "mf-applied"} {
		l, err := f.reg.leases.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.ManagedFields) != 0 {
			t.Errorf("lease %s keeps managedFields %+v, want none", name, l.ManagedFields)
		}
		if got := l.Spec.RenewTime.Time; !got.Equal(clk.Now()) {
			t.Errorf("lease %s renewTime %v, want the last renewal %v", name, got, clk.Now())
		}
	}
}
