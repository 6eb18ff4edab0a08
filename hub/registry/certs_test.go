package registry

import (
	"math/big"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/agentcert"
)

// After a rotation, the renewed certificate is accepted until the first
// session with the new one; then only the new one is.
func TestPreviousCertificateAcceptedUntilTheNewOneIsUsed(t *testing.T) {
	now := time.Now()
	f := newRegistryFixture(t, clocktesting.NewFakeClock(now), now)
	clusters := f.api.Flotilla.FlotillaV1alpha1().Clusters()
	const name = "rotated-1"
	_, err := clusters.Create(t.Context(), &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
		v1alpha1.AnnotationAgentCertificateSerial: "b", v1alpha1.AnnotationAgentCertificatePreviousSerial: "a"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = clusters.Delete(t.Context(), name, metav1.DeleteOptions{}) })
	a, b, c := big.NewInt(0xa), big.NewInt(0xb), big.NewInt(0xc)
	for _, serial := range []*big.Int{a, b} {
		if err := f.reg.CheckCertificate(t.Context(), name, serial); err != nil {
			t.Errorf("certificate %s refused: %v", serial.Text(16), err)
		}
	}
	if err := f.reg.CheckCertificate(t.Context(), name, c); err == nil || !strings.Contains(err.Error(), "superseded by b") {
		t.Errorf("certificate c: %v, want superseded by b", err)
	}

	// A session with the previous certificate clears nothing.
	if err := f.reg.CertificateInUse(t.Context(), name, a); err != nil {
		t.Fatal(err)
	}
	if got := f.stored(name).Annotations[v1alpha1.AnnotationAgentCertificatePreviousSerial]; got != "a" {
		t.Fatalf("previous serial %q after a session with it, want a", got)
	}
	// The first session with the new one does.
	if err := f.reg.CertificateInUse(t.Context(), name, b); err != nil {
		t.Fatal(err)
	}
	stored := f.stored(name)
	if _, ok := stored.Annotations[v1alpha1.AnnotationAgentCertificatePreviousSerial]; ok || stored.Annotations[v1alpha1.AnnotationAgentCertificateSerial] != "b" {
		t.Fatalf("annotations %v, want serial b and no previous", stored.Annotations)
	}
	if err := agentcert.Allowed(stored, a); err == nil || !strings.Contains(err.Error(), "certificate a of cluster rotated-1 is superseded by b") {
		t.Errorf("previous certificate after the new one was used: %v, want superseded", err)
	}
	if err := agentcert.Allowed(stored, b); err != nil {
		t.Errorf("new certificate: %v", err)
	}
	// Later sessions write nothing.
	if err := f.reg.CertificateInUse(t.Context(), name, b); err != nil {
		t.Fatal(err)
	}
	if again := f.stored(name); again.ResourceVersion != stored.ResourceVersion {
		t.Errorf("a second session with the new certificate wrote the Cluster (resource version %s -> %s)", stored.ResourceVersion, again.ResourceVersion)
	}
}

// stored reads a Cluster from the API server.
func (f *registryFixture) stored(name string) *v1alpha1.Cluster {
	f.t.Helper()
	c, err := f.api.Flotilla.FlotillaV1alpha1().Clusters().Get(f.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}
