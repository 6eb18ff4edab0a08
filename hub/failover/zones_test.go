package failover

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/eviction"
)

func TestFleetCounts(t *testing.T) {
	cluster := func(name, zone string, ready bool) *v1alpha1.Cluster {
		c := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ClusterSpec{Zone: zone}}
		c.Status.Conditions = []metav1.Condition{readyCondition(ready, time.Time{})}
		return c
	}
	type step struct {
		name string
		cur  *v1alpha1.Cluster // nil: deleted
	}
	tests := []struct {
		name  string
		steps []step
		want  map[string]eviction.ZoneCount
	}{
		{"added", []step{{"a", cluster("a", "eu", true)}, {"b", cluster("b", "eu", false)}},
			map[string]eviction.ZoneCount{"eu": {Total: 2, NotReady: 1}}},
		{"went not Ready, then Ready again", []step{{"a", cluster("a", "eu", true)}, {"a", cluster("a", "eu", false)}, {"a", cluster("a", "eu", true)}},
			map[string]eviction.ZoneCount{"eu": {Total: 1}}},
		{"moved zone: the old one, emptied, goes", []step{{"a", cluster("a", "eu", false)}, {"a", cluster("a", "us", false)}},
			map[string]eviction.ZoneCount{"us": {Total: 1, NotReady: 1}}},
		{"deleted", []step{{"a", cluster("a", "", true)}, {"b", cluster("b", "", false)}, {"b", nil}},
			map[string]eviction.ZoneCount{"": {Total: 1}}},
		{"deleted before it was seen", []step{{"a", nil}}, map[string]eviction.ZoneCount{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFleetCounts()
			for _, s := range tt.steps {
				f.set(s.name, s.cur)
			}
			if diff := cmp.Diff(tt.want, f.zones); diff != "" {
				t.Errorf("zone counts (-want +got):\n%s", diff)
			}
		})
	}
}
