package agent

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/agent/work"
)

// recordConfigMap is a Work record as the engine writes it; fenced sets
// fencedAt.
func recordConfigMap(name string, fenced bool) *corev1.ConfigMap {
	data := map[string]string{"generation": "1", "binding": "default/" + name}
	if fenced {
		data["fencedAt"] = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339Nano)
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: work.DefaultSystemNamespace,
		Labels: map[string]string{work.LabelWorkRecord: "true"}}, Data: data}
}

// TestFencedWorksGauge: flotilla_agent_fenced_works counts the Works the
// engine's records say are fenced.
func TestFencedWorksGauge(t *testing.T) {
	client := fakeCluster(1)
	for _, cm := range []*corev1.ConfigMap{recordConfigMap("web", true), recordConfigMap("db", true), recordConfigMap("cache", false)} {
		if _, err := client.CoreV1().ConfigMaps(cm.Namespace).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	a := newFakeAgent(t, Config{Hub: "127.0.0.1:1", ClusterName: testCluster, CertDir: t.TempDir(), Logger: testLogger(t)}, nil, client, healthy)
	if got := a.cfg.metrics.fencedWorks(); got != 0 {
		t.Errorf("fenced Works before the records are loaded = %v, want 0", got)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = a.works.Run(t.Context())
	}()
	t.Cleanup(func() { <-done })
	select {
	case <-a.works.Loaded():
	case <-time.After(waitTimeout):
		t.Fatal("the Work engine did not load its records")
	}
	families, err := a.cfg.metrics.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "flotilla_agent_fenced_works" {
			if got := f.GetMetric()[0].GetGauge().GetValue(); got != 2 {
				t.Errorf("flotilla_agent_fenced_works = %v, want 2", got)
			}
			return
		}
	}
	t.Error("no flotilla_agent_fenced_works in the registry")
}
