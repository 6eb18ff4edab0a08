package podlabel

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/test/hubapi"
)

func TestMain(m *testing.M) { os.Exit(hubapi.Main(m)) }

// TestLabelFollowsLeadership: on a real API server, Run takes a label left
// from a previous life off at once, puts it on when the replica leads,
// takes it off when it stops leading, and off again on the way out.
func TestLabelFollowsLeadership(t *testing.T) {
	env := hubapi.Start(t)
	client, err := kubernetes.NewForConfig(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hub-0", Namespace: ns, Labels: map[string]string{Label: "true", "app": "hub"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "hub", Image: "flotilla-hub"}}},
	}
	if _, err := client.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labelled := func() (bool, map[string]string) {
		p, err := client.CoreV1().Pods(ns).Get(t.Context(), "hub-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p.Labels[Label] == "true", p.Labels
	}
	waitLabel := func(want bool, what string) {
		t.Helper()
		var labels map[string]string
		err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			var got bool
			got, labels = labelled()
			return got == want, nil
		})
		if err != nil {
			t.Fatalf("%s: labels %v, want %s=%v", what, labels, Label, want)
		}
		if labels["app"] != "hub" {
			t.Errorf("%s: the pod's other labels changed: %v", what, labels)
		}
	}

	l := New(client, ns, "hub-0", slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx)
	}()
	waitLabel(false, "a restarted replica, standing by")
	l.Want(true)
	waitLabel(true, "leading")
	l.Want(false)
	waitLabel(false, "no longer leading")
	l.Want(true)
	waitLabel(true, "leading again")
	cancel()
	<-done
	if got, _ := labelled(); got {
		t.Error("the label stayed on the pod after Run ended")
	}
}
