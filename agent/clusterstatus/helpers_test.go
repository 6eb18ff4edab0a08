package clusterstatus

import (
	"context"
	"io"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// waitTimeout bounds every wait in these tests; they pass in well under a
// second each, but the machine may be busy.
const waitTimeout = 20 * time.Second

// discard is a logger for tests that do not look at logs.
var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// healthy is a probe of an API server that is always healthy.
func healthy(context.Context) error { return nil }

func testNode(name string, ready bool, cpu, memory, pods string) *corev1.Node {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(cpu),
				corev1.ResourceMemory: resource.MustParse(memory),
				corev1.ResourcePods:   resource.MustParse(pods),
			},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}},
		},
	}
}
