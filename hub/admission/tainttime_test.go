package admission

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestTaintTime(t *testing.T) {
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.FixedZone("CEST", 2*3600))
	const stamp = "2026-07-01T10:00:00Z"   // now, as metav1.Time writes it
	const earlier = "2026-06-30T08:00:00Z" // a time already on a taint
	cluster := func(taints string) string {
		return "apiVersion: flotilla.io/v1alpha1\nkind: Cluster\nmetadata: {name: member1}\nspec:\n  region: eu\n  taints: " + taints + "\n"
	}
	tests := []struct {
		name     string
		op       admission.Operation
		gvk      schema.GroupVersionKind
		sub      string
		doc, old string
		want     string // the object after admission; "" = doc unchanged
	}{
		{name: "new taints", op: admission.Create, gvk: clusterGVK,
			doc:  cluster(`[{key: a, effect: NoSchedule}, {key: b, effect: NoExecute, timeAdded: "` + earlier + `"}, {key: c, effect: PreferNoSchedule, timeAdded: null}]`),
			want: cluster(`[{key: a, effect: NoSchedule, timeAdded: "` + stamp + `"}, {key: b, effect: NoExecute, timeAdded: "` + earlier + `"}, {key: c, effect: PreferNoSchedule, timeAdded: "` + stamp + `"}]`)},
		{name: "taint kept without its time", op: admission.Update, gvk: clusterGVK,
			old:  cluster(`[{key: a, value: x, effect: NoSchedule, timeAdded: "` + earlier + `"}]`),
			doc:  cluster(`[{key: a, value: y, effect: NoSchedule}, {key: a, effect: NoExecute}, {key: b, effect: NoSchedule}]`),
			want: cluster(`[{key: a, value: y, effect: NoSchedule, timeAdded: "` + earlier + `"}, {key: a, effect: NoExecute, timeAdded: "` + stamp + `"}, {key: b, effect: NoSchedule, timeAdded: "` + stamp + `"}]`)},
		{name: "all stamped", op: admission.Update, gvk: clusterGVK, old: cluster(`[]`),
			doc: cluster(`[{key: a, effect: NoSchedule, timeAdded: "` + earlier + `"}]`)},
		{name: "no taints", op: admission.Create, gvk: clusterGVK, doc: "apiVersion: flotilla.io/v1alpha1\nkind: Cluster\nmetadata: {name: member1}\nspec: {}\n"},
		{name: "no spec", op: admission.Create, gvk: clusterGVK, doc: "apiVersion: flotilla.io/v1alpha1\nkind: Cluster\nmetadata: {name: member1}\n"},
		{name: "taints not a list", op: admission.Create, gvk: clusterGVK, doc: cluster(`none`)},
		{name: "malformed taints", op: admission.Update, gvk: clusterGVK,
			old:  cluster(`[{key: {a: b}, effect: [NoSchedule], timeAdded: "` + earlier + `"}, 7]`),
			doc:  cluster(`[{key: {a: b}, effect: [NoSchedule]}, 7, [x], {key: a, effect: NoSchedule, timeAdded: 5}]`),
			want: cluster(`[{key: {a: b}, effect: [NoSchedule], timeAdded: "` + stamp + `"}, 7, [x], {key: a, effect: NoSchedule, timeAdded: 5}]`)},
		{name: "status update", op: admission.Update, gvk: clusterGVK, sub: "status",
			old: cluster(`[]`), doc: cluster(`[{key: a, effect: NoSchedule}]`)},
		{name: "other kind", op: admission.Create, gvk: ppKind,
			doc: "apiVersion: flotilla.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: p, namespace: default}\nspec: {taints: [{key: a, effect: NoSchedule}]}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := request{op: tt.op, gvk: tt.gvk, resource: "clusters", subresource: tt.sub, obj: object(t, tt.doc)}
			if tt.old != "" && tt.op == admission.Update {
				r.old = object(t, tt.old)
			}
			want := object(t, tt.doc)
			if tt.want != "" {
				want = object(t, tt.want)
			}
			p := NewTaintTime(clocktesting.NewFakePassiveClock(now))
			if !p.Handles(tt.op) {
				t.Fatalf("does not handle %s", tt.op)
			}
			if err := p.Admit(context.Background(), r.attributes(), nil); err != nil {
				t.Fatalf("refused: %v", err)
			}
			if diff := cmp.Diff(want, r.obj); diff != "" {
				t.Errorf("object (-want +got):\n%s", diff)
			}
		})
	}
}
