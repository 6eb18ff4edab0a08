package work

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/flotilla-io/flotilla/protocol"
)

var jobKind = schema.GroupKind{Group: "batch", Kind: "Job"}

// health judges an object as Healthy, Unhealthy or Unknown, with a message
// saying why when it is not Healthy. kstatus decides, except that a Job is
// judged by whether it finished: kstatus counts a running Job as Current.
func health(obj *unstructured.Unstructured) (string, string) {
	if obj.GroupVersionKind().GroupKind() == jobKind && obj.GetDeletionTimestamp() == nil {
		if h, msg, ok := jobHealth(obj); ok {
			return h, msg
		}
	}
	res, err := status.Compute(obj)
	if err != nil {
		return protocol.HealthUnknown, fmt.Sprintf("cannot compute status: %v", err)
	}
	switch res.Status {
	case status.CurrentStatus:
		return protocol.HealthHealthy, ""
	case status.InProgressStatus, status.FailedStatus:
		return protocol.HealthUnhealthy, res.Message
	default: // Terminating, NotFound, Unknown
		return protocol.HealthUnknown, res.Message
	}
}

// jobHealth judges a finished Job; ok is false while it runs.
func jobHealth(obj *unstructured.Unstructured) (h, msg string, ok bool) {
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conditions {
		cond, _ := c.(map[string]any)
		if cond["status"] != "True" {
			continue
		}
		switch cond["type"] {
		case "Complete":
			return protocol.HealthHealthy, "complete", true
		case "Failed":
			return protocol.HealthUnhealthy, fmt.Sprintf("failed: %v: %v", cond["reason"], cond["message"]), true
		}
	}
	return "", "", false
}
