package apiserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/keyutil"

	"github.com/flotilla-io/flotilla/internal/atomicfile"
	"github.com/flotilla-io/flotilla/internal/bootstraptoken"
	"github.com/flotilla-io/flotilla/internal/pki"
)

// Identities of the certificates the hub issues itself. Both are in
// system:masters: the admin kubeconfig is the operator's way in before any
// RBAC exists, and the hub's controllers manage every Flotilla object.
const (
	AdminUser = "flotilla-admin"
	HubUser   = "flotilla:hub"
	masters   = "system:masters"
)

// certValidity of the serving and client certificates issued at each start.
const certValidity = 365 * 24 * time.Hour

// files are the paths the API server's flags name.
type files struct {
	caFile            string
	servingCert       string
	servingKey        string
	serviceAccountKey string
	auditPolicy       string
	adminKubeconfig   string
	hubCert, hubKey   []byte
}

// ensureFiles writes the CA, a fresh serving certificate, the audit policy
// and the admin kubeconfig, and creates the ServiceAccount signing key on
// first use (it must survive restarts: tokens signed with it stay valid).
func ensureFiles(dir string, cfg Config) (files, error) {
	if cfg.CA == nil {
		return files{}, errors.New("API server: no CA")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return files{}, fmt.Errorf("API server files: %w", err)
	}
	f := files{
		caFile:            filepath.Join(dir, "ca.crt"),
		servingCert:       filepath.Join(dir, "serving.crt"),
		servingKey:        filepath.Join(dir, "serving.key"),
		serviceAccountKey: filepath.Join(dir, "service-account.key"),
		auditPolicy:       filepath.Join(dir, "audit-policy.yaml"),
		adminKubeconfig:   AdminKubeconfigPath(cfg.DataDir),
	}
	serving, err := cfg.CA.Issue(servingRequest(cfg))
	if err != nil {
		return files{}, fmt.Errorf("API server serving certificate: %w", err)
	}
	hub, err := cfg.CA.Issue(pki.Request{CommonName: HubUser, Organization: []string{masters}, Usage: pki.ClientAuth, ValidFor: certValidity})
	if err != nil {
		return files{}, fmt.Errorf("hub client certificate: %w", err)
	}
	f.hubCert, f.hubKey = hub.CertPEM, hub.KeyPEM
	if err := writeFile(f.caFile, cfg.CA.CertPEM()); err != nil {
		return files{}, err
	}
	if err := writeFile(f.servingCert, serving.CertPEM); err != nil {
		return files{}, err
	}
	if err := writeFile(f.servingKey, serving.KeyPEM); err != nil {
		return files{}, err
	}
	if err := writeFile(f.auditPolicy, []byte(defaultAuditPolicy)); err != nil {
		return files{}, err
	}
	if err := ensureServiceAccountKey(f.serviceAccountKey); err != nil {
		return files{}, err
	}
	return f, nil
}

// servingRequest names every address clients may use: loopback, this host,
// the in-cluster names of the kubernetes Service, and the operator's SANs.
func servingRequest(cfg Config) pki.Request {
	dns := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 96, 0, 1)}
	if host, err := os.Hostname(); err == nil {
		dns = append(dns, host)
	}
	if host, _, err := net.SplitHostPort(cfg.Addr); err == nil {
		if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
			ips = append(ips, ip)
		}
	}
	for _, san := range cfg.SANs {
		if ip := net.ParseIP(san); ip != nil {
			ips = append(ips, ip)
		} else {
			dns = append(dns, san)
		}
	}
	return pki.Request{CommonName: "flotilla-hub-apiserver", DNSNames: dns, IPAddresses: ips, Usage: pki.ServerAuth, ValidFor: certValidity}
}

// EnsureServiceAccountKey creates the ServiceAccount signing key in
// dataDir unless it exists (hub replicas share it: sharedfiles).
func EnsureServiceAccountKey(dataDir string) error {
	return ensureServiceAccountKey(filepath.Join(dataDir, "apiserver", "service-account.key"))
}

func ensureServiceAccountKey(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("ServiceAccount signing key: %w", err)
	}
	_, err := os.Stat(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("ServiceAccount signing key: %w", err)
	}
	// SEC 1 ("EC PRIVATE KEY"): kube-apiserver reads the public key from it.
	pem, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return fmt.Errorf("ServiceAccount signing key: %w", err)
	}
	return writeFile(path, pem)
}

// WriteAdminKubeconfig issues an admin client certificate and writes a
// kubeconfig for url to path (mode 0600).
func WriteAdminKubeconfig(path, url string, ca *pki.CA) error {
	admin, err := ca.Issue(pki.Request{CommonName: AdminUser, Organization: []string{masters}, Usage: pki.ClientAuth, ValidFor: certValidity})
	if err != nil {
		return fmt.Errorf("admin client certificate: %w", err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["flotilla"] = &clientcmdapi.Cluster{Server: url, CertificateAuthorityData: ca.CertPEM()}
	kc.AuthInfos[AdminUser] = &clientcmdapi.AuthInfo{ClientCertificateData: admin.CertPEM, ClientKeyData: admin.KeyPEM}
	kc.Contexts["flotilla"] = &clientcmdapi.Context{Cluster: "flotilla", AuthInfo: AdminUser}
	kc.CurrentContext = "flotilla"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return fmt.Errorf("admin kubeconfig: %w", err)
	}
	return writeFile(path, data)
}

// clientConfig is a client of url authenticated by a certificate.
func clientConfig(url string, ca, cert, key []byte) *rest.Config {
	return &rest.Config{
		Host:            url,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca, CertData: cert, KeyData: key},
		// The hub's controllers write in bursts (a failover evicts many
		// bindings at once); the API server's own fairness queues apply.
		QPS:   500,
		Burst: 1000,
		// Deprecation warnings (v1 Endpoints...) come from the hub's own
		// informers over every kind, not from anything an operator wrote.
		WarningHandler: rest.NoWarnings{},
	}
}

// writeFile replaces path atomically with data, readable only by its owner.
func writeFile(path string, data []byte) error {
	return atomicfile.Write(path, data, 0o600)
}

// defaultAuditPolicy records every write with its user (Metadata: who, what,
// when, the response code; never bodies, so no Secret data lands in the
// log). Reads are not recorded, except of the Secrets in the namespace of
// the bootstrap tokens (reading a token is being able to join a cluster),
// nor the hub's own high-rate writes of leases and status, which follow
// from agents' heartbeats and reports.
const defaultAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["get", "list", "watch"]
  namespaces: ["` + bootstraptoken.Namespace + `"]
  resources:
  - group: ""
    resources: ["secrets"]
- level: None
  verbs: ["get", "list", "watch"]
- level: None
  users: ["` + HubUser + `"]
  resources:
  - group: coordination.k8s.io
    resources: ["leases"]
  - group: flotilla.io
    resources: ["clusters/status", "works/status", "resourcebindings/status", "clusterresourcebindings/status"]
  - group: ""
    resources: ["events"]
  - group: events.k8s.io
    resources: ["events"]
- level: None
  nonResourceURLs: ["/healthz*", "/livez*", "/readyz*", "/version"]
- level: Metadata
`

// AsHub is a client configuration, from the admin kubeconfig in dataDir,
// that acts as the hub itself (user HubUser, group system:masters) by
// impersonation: the few writes only the hub may make (the agent
// certificate serials on Clusters, package admission), made on the hub's
// machine by a command that holds its data directory and CA
// (flotilla-hub certs issue). The audit log records the admin behind them.
func AsHub(dataDir string) (*rest.Config, error) {
	path := AdminKubeconfigPath(dataDir)
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	cfg.Impersonate = rest.ImpersonationConfig{UserName: HubUser, Groups: []string{masters}}
	return cfg, nil
}

// AdminKubeconfigPath is where the hub with data directory dataDir writes
// its admin kubeconfig.
func AdminKubeconfigPath(dataDir string) string { return filepath.Join(dataDir, "admin.kubeconfig") }
