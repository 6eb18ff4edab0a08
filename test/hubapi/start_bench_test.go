package hubapi

import "testing"

// BenchmarkStart measures start-up to ready with the CRDs installed: a new
// etcd and kube-apiserver each time (not the shared ones), stop excluded.
//
//	go test -run '^$' -bench Start -benchtime 5x ./test/hubapi/
func BenchmarkStart(b *testing.B) {
	for b.Loop() {
		env, err := start(b.Context(), "")
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := env.stop(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
