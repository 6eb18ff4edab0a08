package membercluster

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/flotilla-io/flotilla/internal/pki"
)

// certValidity covers any test run or demo session.
const certValidity = 30 * 24 * time.Hour

// clusterFiles are the paths of a cluster's generated credentials.
type clusterFiles struct {
	caCert, caKey           string
	servingCert, servingKey string
	adminCert, adminKey     string
	saPublic, saPrivate     string
	kubeconfig              string
}

func newClusterFiles(dir string) clusterFiles {
	p := func(name string) string { return filepath.Join(dir, name) }
	return clusterFiles{
		caCert: p("ca.crt"), caKey: p("ca.key"),
		servingCert: p("apiserver.crt"), servingKey: p("apiserver.key"),
		adminCert: p("admin.crt"), adminKey: p("admin.key"),
		saPublic: p("sa.pub"), saPrivate: p("sa.key"),
		kubeconfig: p("kubeconfig"),
	}
}

// adminCredentials are what a kubeconfig needs to reach the cluster as admin.
type adminCredentials struct {
	caCert, clientCert, clientKey []byte
}

// writeCredentials creates the cluster CA, the API server's serving
// certificate for 127.0.0.1, host and the `kubernetes` Service's address, an admin client certificate in system:masters,
// and the service-account signing key.
func writeCredentials(name string, files clusterFiles, host netip.Addr) (adminCredentials, error) {
	ca, err := pki.NewCA(name+"-ca", certValidity)
	if err != nil {
		return adminCredentials{}, err
	}
	caKey, err := ca.KeyPEM()
	if err != nil {
		return adminCredentials{}, err
	}
	serving, err := ca.Issue(pki.Request{
		CommonName:  "kube-apiserver",
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), host.AsSlice(), serviceIP.AsSlice()},
		Usage:       pki.ServerAuth,
		ValidFor:    certValidity,
	})
	if err != nil {
		return adminCredentials{}, err
	}
	admin, err := ca.Issue(pki.Request{
		CommonName:   "flotilla-test-admin",
		Organization: []string{"system:masters"},
		Usage:        pki.ClientAuth,
		ValidFor:     certValidity,
	})
	if err != nil {
		return adminCredentials{}, err
	}
	saKey, err := pki.NewKey()
	if err != nil {
		return adminCredentials{}, err
	}
	saPrivate, err := pki.EncodeKey(saKey)
	if err != nil {
		return adminCredentials{}, err
	}
	saPublic, err := pki.EncodePublicKey(saKey)
	if err != nil {
		return adminCredentials{}, err
	}
	for path, data := range map[string][]byte{
		files.caCert: ca.CertPEM(), files.caKey: caKey,
		files.servingCert: serving.CertPEM, files.servingKey: serving.KeyPEM,
		files.adminCert: admin.CertPEM, files.adminKey: admin.KeyPEM,
		files.saPrivate: saPrivate, files.saPublic: saPublic,
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return adminCredentials{}, fmt.Errorf("write credentials of %s: %w", name, err)
		}
	}
	return adminCredentials{caCert: ca.CertPEM(), clientCert: admin.CertPEM, clientKey: admin.KeyPEM}, nil
}

// writeKubeconfig writes a self-contained admin kubeconfig for the cluster.
func writeKubeconfig(name, server, path string, creds adminCredentials) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: creds.caCert}
	cfg.AuthInfos[name+"-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: creds.clientCert, ClientKeyData: creds.clientKey}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name + "-admin"}
	cfg.CurrentContext = name
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("kubeconfig of %s: %w", name, err)
	}
	return nil
}
