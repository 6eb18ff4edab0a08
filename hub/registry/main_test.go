package registry

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/internal/testapi"
)

// The package's tests share one embedded API server.
func TestMain(m *testing.M) { testapi.Main(m) }

// sharedAPI returns the package's API server and deletes every cluster and
// lease at the end of the test.
func sharedAPI(t *testing.T) API {
	t.Helper()
	c := testapi.Shared(t)
	return API{Flotilla: c.Flotilla, Kube: c.Kube}
}

// eventReasons lists the reasons of the events about a cluster, waiting
// until want are all there (the recorder writes asynchronously).
func eventReasons(t *testing.T, cluster string, want ...string) []string {
	t.Helper()
	kube := testapi.Shared(t).Kube
	var reasons []string
	_ = wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := kube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
			FieldSelector: fmt.Sprintf("involvedObject.kind=%s,involvedObject.name=%s", v1alpha1.KindCluster, cluster)})
		if err != nil {
			return false, err
		}
		reasons = reasons[:0]
		for _, ev := range list.Items {
			reasons = append(reasons, ev.Reason)
		}
		for _, w := range want {
			if !slices.Contains(reasons, w) {
				return false, nil
			}
		}
		return true, nil
	})
	return reasons
}
