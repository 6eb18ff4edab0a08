package hub

import (
	"context"
	"crypto/x509"
	"net"
	"os"
	"strconv"

	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/internal/bootstraptoken"
)

// publishJoinInfo writes where agents dial this hub and its CA's pin into
// the API, for `flotilla token create` to print join commands with.
func publishJoinInfo(ctx context.Context, client kubernetes.Interface, agentAddress string, bound net.Addr, ca *x509.Certificate) error {
	if agentAddress == "" {
		agentAddress = defaultAgentAddress(bound)
	}
	info, err := bootstraptoken.NewInfo(agentAddress, ca)
	if err != nil {
		return err
	}
	return bootstraptoken.PublishInfo(ctx, client, info)
}

// defaultAgentAddress is the bound UDP address, with this host's name in
// place of a wildcard IP.
func defaultAgentAddress(bound net.Addr) string {
	udp, ok := bound.(*net.UDPAddr)
	if !ok {
		return bound.String()
	}
	host := udp.IP.String()
	if udp.IP == nil || udp.IP.IsUnspecified() {
		host = "localhost"
		if name, err := os.Hostname(); err == nil && name != "" {
			host = name
		}
	}
	return net.JoinHostPort(host, strconv.Itoa(udp.Port))
}
