package validation

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestClusterTaints(t *testing.T) {
	tests := []struct {
		name   string
		taints string
		want   []string // error strings; none for a valid cluster
	}{
		{name: "no taints", taints: "[]"},
		{name: "valid taints", taints: `[{key: example.com/maintenance, value: "true", effect: NoSchedule},
			{key: dedicated, effect: PreferNoSchedule}, {key: cluster.flotilla.io/not-ready, effect: NoExecute, timeAdded: "2024-04-17T15:04:05Z"}]`},
		{name: "bad key", taints: `[{key: "bad key!", effect: NoSchedule}]`, want: []string{
			`spec.taints[0].key: Invalid value: "bad key!": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
		}},
		{name: "empty key", taints: `[{key: "", effect: NoSchedule}]`, want: []string{
			`spec.taints[0].key: Invalid value: "": name part must be non-empty`,
			`spec.taints[0].key: Invalid value: "": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
		}},
		{name: "bad value", taints: `[{key: a, value: "no spaces", effect: NoSchedule}]`, want: []string{
			`spec.taints[0].value: Invalid value: "no spaces": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
		}},
		{name: "bad effect", taints: `[{key: a, effect: NoSchedule}, {key: b, effect: Evict}]`, want: []string{
			`spec.taints[1].effect: Unsupported value: "Evict": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute", "PreferNoExecute"`,
		}},
		{name: "no effect", taints: `[{key: a}]`, want: []string{
			`spec.taints[0].effect: Unsupported value: "": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute", "PreferNoExecute"`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := "apiVersion: flotilla.io/v1alpha1\nkind: Cluster\nmetadata: {name: member1}\nspec:\n  region: eu\n  taints: " + tt.taints +
				"\nstatus: {kubernetesVersion: v1.37.2, somethingNewer: 1}\n"
			c, errs := Cluster(jsonOf(t, doc))
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if c == nil || c.Name != "member1" || c.Spec.Region != "eu" || c.Status.KubernetesVersion != "v1.37.2" {
				t.Errorf("decoded %+v", c)
			}
		})
	}
}

func TestClusterMetadata(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"not JSON of a cluster", `{"spec": {"taints": "none"}}`, ": Invalid value"},
		{"namespace", `{"metadata": {"name": "a", "namespace": "default"}, "spec": {}}`, "metadata.namespace: Forbidden: the kind is cluster-scoped"},
		{"bad name", `{"metadata": {"name": "Member_1"}, "spec": {}}`, `metadata.name: Invalid value: "Member_1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errs := Cluster([]byte(tt.doc))
			if got := errs.ToAggregate(); got == nil || !strings.Contains(got.Error(), tt.want) {
				t.Errorf("errors = %v, want one containing %q", got, tt.want)
			}
		})
	}
}
