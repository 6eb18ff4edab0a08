package agentcert

import (
	"math/big"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

func TestAllowedAndCurrent(t *testing.T) {
	deleting := metav1.NewTime(time.Unix(1, 0))
	cluster := func(current, previous string) *v1alpha1.Cluster {
		c := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "edge-1", Annotations: map[string]string{}}}
		if current != "" {
			c.Annotations[v1alpha1.AnnotationAgentCertificateSerial] = current
		}
		if previous != "" {
			c.Annotations[v1alpha1.AnnotationAgentCertificatePreviousSerial] = previous
		}
		return c
	}
	beingDeleted := cluster("b", "")
	beingDeleted.DeletionTimestamp = &deleting
	tests := []struct {
		name        string
		cluster     *v1alpha1.Cluster
		serial      int64
		wantErr     string // "" : allowed
		wantCurrent bool
	}{
		{name: "nothing recorded", cluster: cluster("", ""), serial: 0xa,
			wantErr: "cluster edge-1 records no agent certificate (annotation flotilla.io/agent-certificate-serial; it was created by hand, or again after a delete, which revoked its certificates): " +
				"it accepts none. Give its agent a certificate with flotilla-hub certs issue --cluster edge-1 on the hub, or join it with a token (flotilla token create --cluster edge-1)"},
		{name: "only a previous one recorded", cluster: cluster("", "a"), serial: 0xa, wantErr: "records no agent certificate"},
		{name: "the current one", cluster: cluster("b", ""), serial: 0xb, wantCurrent: true},
		{name: "superseded", cluster: cluster("b", ""), serial: 0xa, wantErr: "certificate a of cluster edge-1 is superseded by b"},
		{name: "renewed, during a rotation", cluster: cluster("b", "a"), serial: 0xa},
		{name: "the new one, before its first session", cluster: cluster("b", "a"), serial: 0xb},
		{name: "neither in a rotation", cluster: cluster("b", "a"), serial: 0xc, wantErr: "superseded by b"},
		{name: "being deleted", cluster: beingDeleted, serial: 0xb, wantErr: "being deleted", wantCurrent: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			serial := big.NewInt(tt.serial)
			err := Allowed(tt.cluster, serial)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Allowed: %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Allowed: %v, want an error containing %q", err, tt.wantErr)
			}
			if got := Current(tt.cluster, serial); got != tt.wantCurrent {
				t.Errorf("Current = %v, want %v", got, tt.wantCurrent)
			}
		})
	}
}

func TestAnnotationPath(t *testing.T) {
	if got, want := annotationPath("flotilla.io/a~b"), "/metadata/annotations/flotilla.io~1a~0b"; got != want {
		t.Errorf("annotationPath = %q, want %q", got, want)
	}
}
