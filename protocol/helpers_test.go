package protocol

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"testing"
	"time"

	"github.com/flotilla-io/flotilla/internal/pki"
)

// testTime has nanoseconds and a non-UTC zone so round trips prove that
// RFC 3339 with nanoseconds and offsets survives.
var testTime = time.Date(2026, 11, 22, 21, 4, 5, 123456789, time.FixedZone("CET", 3600))

// sampleMessages returns one valid message of every type.
func sampleMessages() []Message {
	return []Message{
		&Hello{ProtocolVersion: Version, ClusterName: "member-1", AgentVersion: "v0.1.0", LeaseDurationSeconds: 40},
		&Welcome{ProtocolVersion: Version, HubID: "hub-0", HubTime: testTime, LeaseDurationSeconds: 40, RenewIntervalMillis: 10000},
		&LeaseRenew{Seq: 7, AgentTime: testTime},
		&LeaseAck{Seq: 1<<64 - 1, HubTime: testTime.Add(time.Millisecond)},
		&ClusterStatus{
			ObservedAt:        testTime,
			KubernetesVersion: "v1.37.2",
			APIServerHealthy:  true,
			HealthMessage:     "ok <all> & \"quoted\"",
			NodesTotal:        3,
			NodesReady:        2,
			Allocatable:       map[string]string{"cpu": "24", "memory": "96Gi", "pods": "330", "nvidia.com/gpu": "2"},
			Allocated:         map[string]string{"cpu": "1500m", "memory": "0"},
			ServedAPIs:        &ServedAPIs{Items: []APIEnablement{{GroupVersion: "apps/v1", Resources: []APIResource{{Name: "deployments", Kind: "Deployment"}}}}},
		},
		&GoAway{Reason: "hub shutting down"},
		&Error{Code: CodeUnauthorized, Message: "certificate names cluster member-2"},
		&WorkInventory{Works: []WorkRef{{Name: "nginx-deployment-5f6c", Generation: 3}, {Name: "solo-deployment-0a1b", Generation: 2, Fenced: true}}},
		&WorkUpsert{Name: "nginx-deployment-5f6c", Generation: 4, Binding: "default/nginx-deployment",
			Manifests:        []json.RawMessage{json.RawMessage(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"default"}}`)},
			StopAfterSeconds: 300, StatePaths: []string{"{.jobStatus.jobId}", "{.updateRevision}"}},
		&WorkDelete{Name: "nginx-deployment-5f6c"},
		&WorkApplied{Name: "nginx-deployment-5f6c", Generation: 4, Applied: true, Manifests: []ManifestResult{
			{Ordinal: 0, Group: "apps", Version: "v1", Kind: "Deployment", Resource: "deployments", Namespace: "default", Name: "nginx", Health: HealthUnknown, Status: json.RawMessage(`{"readyReplicas":1}`),
				StateValues: map[string]string{"{.updateRevision}": "nginx-5f6c"}},
		}},
		&WorkDeleted{Name: "nginx-deployment-5f6c"},
		&WorkStatus{Name: "nginx-deployment-5f6c", Generation: 4, Manifests: []ManifestResult{{Ordinal: 0, Version: "v1", Kind: "ConfigMap", Name: "c", Health: HealthHealthy}}},
		validJoinRequest(),
		&JoinResponse{Certificate: []byte("-----BEGIN CERTIFICATE-----\n"), CACertificate: []byte("-----BEGIN CERTIFICATE-----\n")},
		&JoinResponse{Pending: true, CACertificate: []byte("ca"), Message: "kubectl certificate approve flotilla-agent-edge-1-ab12cd34"},
		&CertificateRenewRequest{CSR: []byte("-----BEGIN CERTIFICATE REQUEST-----\n")},
		&CertificateRenewResponse{Certificate: []byte("-----BEGIN CERTIFICATE-----\n"), CACertificate: []byte("-----BEGIN CERTIFICATE-----\n")},
	}
}

func validJoinRequest() *JoinRequest {
	return &JoinRequest{ProtocolVersion: Version, ClusterName: "edge-1", BootstrapToken: "abcdef.0123456789abcdef",
		CSR: []byte("-----BEGIN CERTIFICATE REQUEST-----\n"), AgentVersion: "v0.2.0",
		Provider: "aws", Region: "eu-west-1", Zone: "eu-west-1a", Labels: map[string]string{"site": "store-7", "example.com/tier": "edge"}}
}

// rawFrame builds a frame by hand, for input WriteMessage would not produce.
func rawFrame(t MessageType, payload string) []byte {
	frame := binary.BigEndian.AppendUint32(nil, uint32(1+len(payload)))
	frame = append(frame, byte(t))
	return append(frame, payload...)
}

// testPKI is a CA with the pools both sides need.
type testPKI struct {
	ca   *pki.CA
	pool *x509.CertPool
}

const hubServerName = "hub.flotilla.test"

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	ca, err := pki.NewCA("flotilla test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return &testPKI{ca: ca, pool: pool}
}

func (p *testPKI) issue(t *testing.T, commonName string, usage pki.Usage) tls.Certificate {
	t.Helper()
	req := pki.Request{CommonName: commonName, Usage: usage, ValidFor: time.Hour}
	if usage == pki.ServerAuth {
		req.DNSNames = []string{hubServerName}
	}
	kp, err := p.ca.Issue(req)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := kp.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
