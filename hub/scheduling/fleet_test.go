package scheduling

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
)

// listSource is a Source over a fixed list, for the fleet cache alone.
type listSource struct{ clusters []*v1alpha1.Cluster }

func (s *listSource) Run(context.Context)                              {}
func (s *listSource) Synced() <-chan struct{}                          { return nil }
func (s *listSource) Get(string) *v1alpha1.Cluster                     { return nil }
func (s *listSource) List() []*v1alpha1.Cluster                        { return s.clusters }
func (s *listSource) AddHandler(controller.Handler[*v1alpha1.Cluster]) {}

// TestFleetCache checks which cluster changes make the scheduling
// controller build a new Fleet: every change the scheduler reads, and not
// the agents' heartbeats and conditions.
func TestFleetCache(t *testing.T) {
	base := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member-1", Labels: map[string]string{"env": "prod"}}}
	base.Status.ResourceSummary = &v1alpha1.ResourceSummary{Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}}
	change := func(edit func(c *v1alpha1.Cluster)) *v1alpha1.Cluster {
		c := base.DeepCopy()
		edit(c)
		return c
	}
	for _, tc := range []struct {
		name        string
		old, cur    *v1alpha1.Cluster
		wantRebuilt bool
	}{
		{"added", nil, base, true},
		{"deleted", base, nil, true},
		{"conditions", base, change(func(c *v1alpha1.Cluster) {
			c.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ClusterConditionReady, Status: metav1.ConditionTrue}}
		}), false},
		{"room", base, change(func(c *v1alpha1.Cluster) {
			c.Status.ResourceSummary.Allocated = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("3")}
		}), true},
		{"labels", base, change(func(c *v1alpha1.Cluster) { c.Labels["env"] = "dev" }), true},
		{"taints", base, change(func(c *v1alpha1.Cluster) {
			c.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
		}), true},
		{"served APIs", base, change(func(c *v1alpha1.Cluster) {
			c.Status.APIEnablements = []v1alpha1.APIEnablement{{GroupVersion: "v1"}}
		}), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fleetCache{clusters: &listSource{clusters: []*v1alpha1.Cluster{base}}}
			first, err := f.get()
			if err != nil {
				t.Fatal(err)
			}
			if again, _ := f.get(); again != first {
				t.Fatal("a second get built a new Fleet without a change")
			}
			f.clusterChanged(tc.old, tc.cur)
			next, err := f.get()
			if err != nil {
				t.Fatal(err)
			}
			if rebuilt := next != first; rebuilt != tc.wantRebuilt {
				t.Errorf("new Fleet after the change: %t, want %t", rebuilt, tc.wantRebuilt)
			}
		})
	}
}
