package membercluster

import (
	"fmt"
	"net"
	"strconv"
)

// freePort asks the kernel for a free TCP port on loopback. The port is free
// when this returns; a component that loses the race to another process fails
// to bind and is started again on a new port (see startWithPortRetry).
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// portInUse reports whether something listens on 127.0.0.1:port.
func portInUse(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return true
	}
	l.Close()
	return false
}
