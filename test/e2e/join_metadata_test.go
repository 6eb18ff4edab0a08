package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/test/membercluster"
)

// selectorsYAML places a Secret on the clusters labelled secrets=yes, and
// a ConfigMap on those labelled tier=edge: the second shows placement by
// label works, so the Secret's absence is no mere delay.
const selectorsYAML = `apiVersion: v1
kind: Secret
metadata: {name: vault-key, namespace: sensitive}
stringData: {key: hunter2}
---
apiVersion: flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: vault-key, namespace: sensitive}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Secret, name: vault-key}]
  placement: {clusterAffinity: {labelSelector: {matchLabels: {secrets: "yes"}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: edge-settings, namespace: sensitive}
data: {a: b}
---
apiVersion: flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: edge-settings, namespace: sensitive}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap, name: edge-settings}]
  placement: {clusterAffinity: {labelSelector: {matchLabels: {tier: edge}}}}
`

// TestLabelChoosingJoin (the attack of a label-choosing agent): the token was made with
// --region r1 --zone z1 --label tier=edge; the joining agent asks for
// region evil, zone z9 and labels secrets=yes and agent.flotilla.io/site=a.
// The Cluster gets the token's region, zone and label and the agent's
// label under its own prefix, nothing else; an event on the Cluster says
// what was ignored; a policy that places a Secret on secrets=yes does not
// select the cluster.
func TestLabelChoosingJoin(t *testing.T) {
	env := membercluster.StartForTest(t, membercluster.ClusterSpec{Name: "edge-1", Nodes: 1})
	member := env.Cluster("edge-1")
	h := startHub(t)
	dir := t.TempDir()

	token := h.createToken(t, "--cluster", "edge-1", "--region", "r1", "--zone", "z1", "--label", "tier=edge")
	list := squeezeSpaces(mustFlotilla(t, h, "token", "list", "-o", "wide"))
	if want := token[:6] + " "; !strings.Contains(list, want) || !strings.Contains(list, "- r1 z1 tier=edge") {
		t.Errorf("token list -o wide:\n%s\nwant %s with region r1, zone z1, label tier=edge", list, token[:6])
	}

	args := append(joinArgs(h, member, filepath.Join(dir, "certs"), token, h.pin(t)),
		"--cluster-region=evil", "--cluster-zone=z9", "--cluster-labels=secrets=yes,agent.flotilla.io/site=a")
	a := runAgent(t, "edge-1", filepath.Join(dir, "agent.log"), args...)
	waitReady(t, h, "edge-1", 60*time.Second)

	cl := h.cluster(t, "edge-1")
	t.Logf("registered: region %q, zone %q, labels %v", cl.Spec.Region, cl.Spec.Zone, cl.Labels)
	if diff := cmp.Diff(v1alpha1.ClusterSpec{Region: "r1", Zone: "z1"}, v1alpha1.ClusterSpec{Provider: cl.Spec.Provider, Region: cl.Spec.Region, Zone: cl.Spec.Zone}); diff != "" {
		t.Errorf("registered spec (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"tier": "edge", "agent.flotilla.io/site": "a"}, cl.Labels); diff != "" {
		t.Errorf("registered labels (-want +got):\n%s", diff)
	}

	var ignored string
	waitFor(t, 30*time.Second, "the AgentMetadataIgnored event", func() (bool, string) {
		ignored = eventMessage(t, h, "edge-1", "AgentMetadataIgnored")
		return ignored != "", "none yet"
	})
	t.Logf("event: %s", ignored)
	for _, want := range []string{`region "evil"`, `zone "z9"`, "label secrets=yes", "agent.flotilla.io/"} {
		if !strings.Contains(ignored, want) {
			t.Errorf("the event says %q; want it to name %s", ignored, want)
		}
	}
	if strings.Contains(ignored, "site=a") {
		t.Errorf("the event lists the agent's own label as ignored: %q", ignored)
	}
	if log := readFile(t, a.LogPath); !strings.Contains(log, "the hub takes provider, region, zone and labels from the token") {
		t.Errorf("the agent did not warn that the hub ignores its metadata:\n%s", log)
	}

	f := &fleet{t: t, hub: h, env: env, dir: dir}
	f.apply("selectors.yaml", selectorsYAML)
	client, err := member.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the tier=edge ConfigMap on edge-1", func() (bool, string) {
		_, err := client.CoreV1().ConfigMaps("sensitive").Get(t.Context(), "edge-settings", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	waitFor(t, 30*time.Second, "the secrets=yes binding scheduled", func() (bool, string) {
		b := f.binding("sensitive", "vault-key-secret")
		return b != nil && meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BindingConditionScheduled) != nil, "no Scheduled condition yet"
	})
	b := f.binding("sensitive", "vault-key-secret")
	_, err = client.CoreV1().Secrets("sensitive").Get(t.Context(), "vault-key", metav1.GetOptions{})
	t.Logf("secrets=yes policy: binding clusters %v, Scheduled %+v; Secret on edge-1: %v", b.Spec.Clusters,
		meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BindingConditionScheduled), err)
	if len(b.Spec.Clusters) > 0 || err == nil {
		t.Errorf("the secrets=yes policy placed its Secret on %v (Secret on edge-1: %v); want it on no cluster", b.Spec.Clusters, err)
	}
}

// eventMessage is the message of the hub's event reason about Cluster
// name ("" if none).
func eventMessage(t *testing.T, h *hub, name, reason string) string {
	t.Helper()
	var events corev1.EventList
	h.getJSON(t, "/api/v1/namespaces/default/events?fieldSelector=involvedObject.kind%3DCluster,involvedObject.name%3D"+name+",reason%3D"+reason, &events)
	if len(events.Items) == 0 {
		return ""
	}
	return events.Items[0].Message
}
