package bootstraptoken

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/internal/pki"
)

// The ConfigMap the hub publishes its join information in.
const (
	InfoNamespace = metav1.NamespacePublic
	InfoName      = "flotilla-hub-info"

	infoAgentAddress = "agentAddress"
	infoCAPin        = "caCertHash"
	infoCACert       = "ca.crt"
)

// Info is what a join command needs to know of the hub.
type Info struct {
	// AgentAddress is the host:port agents dial (QUIC).
	AgentAddress string
	// CAPin is the hub CA's pin (pki.Pin).
	CAPin string
	// CACert is the hub CA certificate, PEM.
	CACert []byte
}

// NewInfo describes a hub reached at agentAddress whose CA is ca.
func NewInfo(agentAddress string, ca *x509.Certificate) (Info, error) {
	if err := checkAddress(agentAddress); err != nil {
		return Info{}, fmt.Errorf("--agent-address %q: %w", agentAddress, err)
	}
	return Info{
		AgentAddress: agentAddress,
		CAPin:        pki.Pin(ca),
		CACert:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}),
	}, nil
}

// checkAddress wants host:port with a host and a port number.
func checkAddress(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want host:port: %w", err)
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return fmt.Errorf("port %q: want 1-65535", port)
	}
	if host == "" || net.ParseIP(host).IsUnspecified() {
		return fmt.Errorf("host %q: agents need an address they can dial, not a wildcard", host)
	}
	return nil
}

// PublishInfo writes info into the hub's API (creating or replacing the
// ConfigMap), so join commands made anywhere agree with the hub.
func PublishInfo(ctx context.Context, client kubernetes.Interface, info Info) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: InfoName, Namespace: InfoNamespace},
		Data: map[string]string{
			infoAgentAddress: info.AgentAddress,
			infoCAPin:        info.CAPin,
			infoCACert:       string(info.CACert),
		},
	}
	maps := client.CoreV1().ConfigMaps(InfoNamespace)
	_, err := maps.Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = maps.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("publish the hub's join information (configmap %s/%s): %w", InfoNamespace, InfoName, err)
	}
	return nil
}

// ReadInfo reads the join information the hub published.
func ReadInfo(ctx context.Context, client kubernetes.Interface) (Info, error) {
	cm, err := client.CoreV1().ConfigMaps(InfoNamespace).Get(ctx, InfoName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Info{}, fmt.Errorf("the hub has not published its join information (configmap %s/%s): is it older than this client?", InfoNamespace, InfoName)
	}
	if err != nil {
		return Info{}, fmt.Errorf("read the hub's join information: %w", err)
	}
	info := Info{AgentAddress: cm.Data[infoAgentAddress], CAPin: cm.Data[infoCAPin], CACert: []byte(cm.Data[infoCACert])}
	if _, err := pki.ParsePin(info.CAPin); err != nil {
		return Info{}, fmt.Errorf("configmap %s/%s: %w", InfoNamespace, InfoName, err)
	}
	return info, nil
}
