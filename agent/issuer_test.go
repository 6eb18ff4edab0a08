package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/protocol"
)

// TestCertificatesOfTheAgentCA: a hub signs agent certificates with an
// agent CA of its own and sends it after the certificate; the agent, which
// trusts the hub CA only, accepts them at a join and at a renewal, as it
// accepts certificates of the hub CA (hubs from before the agent CA). A
// certificate of a CA the hub did not send is refused.
func TestCertificatesOfTheAgentCA(t *testing.T) {
	hub, agentCA, other := newTestPKI(t), newTestPKI(t), newTestPKI(t)
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	cn := protocol.ClusterCommonName(testCluster)
	certOf := func(p *testPKI) []byte {
		cert, _ := p.certFor(t, key.Public(), cn, now.Add(-time.Minute), now.Add(time.Hour))
		return cert
	}
	for _, tt := range []struct {
		name    string
		chain   []byte
		wantErr string
	}{
		{name: "agent CA sent after the certificate", chain: append(certOf(agentCA), agentCA.ca.CertPEM()...)},
		{name: "hub CA, alone", chain: certOf(hub)},
		{name: "agent CA not sent", chain: certOf(agentCA), wantErr: "unknown authority"},
		{name: "another CA sent than the signer", chain: append(certOf(agentCA), other.ca.CertPEM()...), wantErr: "unknown authority"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			join := &protocol.JoinResponse{Certificate: tt.chain, CACertificate: hub.ca.CertPEM()}
			_, joinErr := checkJoinResponse(key, testCluster, pki.Pin(hub.ca.Cert), join, now)
			renew := &protocol.CertificateRenewResponse{Certificate: tt.chain, CACertificate: hub.ca.CertPEM()}
			_, renewErr := checkRenewed(key, testCluster, hub.pool, renew, now)
			for what, err := range map[string]error{"join": joinErr, "renewal": renewErr} {
				switch {
				case tt.wantErr == "" && err != nil:
					t.Errorf("%s refused: %v", what, err)
				case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
					t.Errorf("%s: %v, want an error with %q", what, err, tt.wantErr)
				}
			}
		})
	}
}
