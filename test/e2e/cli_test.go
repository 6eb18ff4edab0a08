package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/test/membercluster"
)

// flotilla runs the CLI against the hub and returns its output.
func flotilla(t *testing.T, h *hub, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "flotilla"), append([]string{"--kubeconfig", h.kubeconfig()}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mustFlotilla(t *testing.T, h *hub, args ...string) string {
	t.Helper()
	out, err := flotilla(t, h, args...)
	if err != nil {
		t.Fatalf("flotilla %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// TestCLIAgainstHub drives the real hub with the real CLI: list and
// describe, taints with timeAdded, cordon and uncordon, and bad input.
func TestCLIAgainstHub(t *testing.T) {
	env := membercluster.StartForTest(t, membercluster.Specs(1)...)
	h := startHub(t)
	startAgent(t, h, env.Cluster("member-1"))
	waitReady(t, h, "member-1", 30*time.Second)

	t.Run("get clusters -o json is a List with taints and conditions", func(t *testing.T) {
		var list v1alpha1.ClusterList
		if err := json.Unmarshal([]byte(mustFlotilla(t, h, "get", "clusters", "-o", "json")), &list); err != nil {
			t.Fatal(err)
		}
		if list.Kind != "ClusterList" || len(list.Items) != 1 || readyOf(&list.Items[0]) != metav1.ConditionTrue {
			t.Fatalf("list = %+v", list)
		}
	})

	t.Run("taint, overwrite and remove", func(t *testing.T) {
		out := mustFlotilla(t, h, "taint", "cluster", "member-1", "example.com/maintenance=planned:NoSchedule")
		if !strings.Contains(out, "tainted") {
			t.Errorf("output %q", out)
		}
		c := h.cluster(t, "member-1")
		if !hasTaint(c, "example.com/maintenance", corev1.TaintEffectNoSchedule) || c.Spec.Taints[0].TimeAdded == nil {
			t.Fatalf("after taint: %+v", c.Spec.Taints)
		}
		if out, err := flotilla(t, h, "taint", "cluster", "member-1", "example.com/maintenance=other:NoSchedule"); err == nil || !strings.Contains(out, "overwrite") {
			t.Errorf("changing a value without --overwrite: err %v, output %q", err, out)
		}
		mustFlotilla(t, h, "taint", "cluster", "member-1", "example.com/maintenance-")
		if c := h.cluster(t, "member-1"); hasTaint(c, "example.com/maintenance", corev1.TaintEffectNoSchedule) {
			t.Errorf("taint not removed: %s", describe(c))
		}
	})

	t.Run("bad taint is refused and changes nothing", func(t *testing.T) {
		// The hub writes the Cluster's status meanwhile: compare the spec,
		// not the resourceVersion.
		before := h.cluster(t, "member-1").Spec
		out, err := flotilla(t, h, "taint", "cluster", "member-1", "bad key:Sometimes")
		if err == nil || !strings.Contains(out, "bad key") {
			t.Errorf("err %v, output %q", err, out)
		}
		if after := h.cluster(t, "member-1").Spec; !equality.Semantic.DeepEqual(after, before) {
			t.Errorf("spec %+v -> %+v after a refused taint", before, after)
		}
	})

	t.Run("cordon and uncordon", func(t *testing.T) {
		mustFlotilla(t, h, "cordon", "member-1")
		// The hub hears of the cordon through its informer and adds its
		// taint a moment later.
		waitFor(t, 10*time.Second, "the unschedulable taint", func() (bool, string) {
			c := h.cluster(t, "member-1")
			return c.Spec.Unschedulable && hasTaint(c, v1alpha1.TaintClusterUnschedulable, corev1.TaintEffectNoSchedule),
				fmt.Sprintf("%s unschedulable=%v", describe(c), c.Spec.Unschedulable)
		})
		mustFlotilla(t, h, "uncordon", "member-1")
		waitFor(t, 10*time.Second, "no taints after uncordon", func() (bool, string) {
			c := h.cluster(t, "member-1")
			return !c.Spec.Unschedulable && len(c.Spec.Taints) == 0, describe(c)
		})
	})

	// The hub stores renewals in batches (--lease-flush-interval 1s here)
	// and a 2 s lease is fresh for 1 s: at a given moment the stored lease
	// may read late, so the freshness is awaited, not sampled once.
	t.Run("describe shows conditions, lease and events", func(t *testing.T) {
		waitFor(t, 10*time.Second, "describe with every part and a fresh lease", func() (bool, string) {
			out := mustFlotilla(t, h, "describe", "cluster", "member-1")
			for _, want := range []string{"member-1", "Ready", "Lease", "fresh", "AgentConnected", "Cordoned", "v1.37.2"} {
				if !strings.Contains(out, want) {
					return false, fmt.Sprintf("describe output lacks %q:\n%s", want, out)
				}
			}
			return true, ""
		})
	})

	t.Run("get leases shows freshness", func(t *testing.T) {
		waitFor(t, 10*time.Second, "get leases with member-1 fresh", func() (bool, string) {
			out := mustFlotilla(t, h, "get", "leases")
			return strings.Contains(out, "member-1") && strings.Contains(out, "fresh"), "get leases:\n" + out
		})
	})

	t.Run("unknown cluster", func(t *testing.T) {
		out, err := flotilla(t, h, "describe", "cluster", "nope")
		if err == nil || !strings.Contains(out, "not found") {
			t.Errorf("err %v, output %q", err, out)
		}
	})
}
