// Package freeport finds free loopback ports for the servers tests start.
// A port is free when returned; a server that then loses it to another
// process fails to bind and should be started again on a new port.
package freeport

import (
	"fmt"
	"net"
	"strconv"
)

// TCP returns a free TCP port on 127.0.0.1.
func TCP() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free TCP port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// UDP returns a free UDP port on 127.0.0.1.
func UDP() (int, error) {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free UDP port: %w", err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}

// TCPInUse reports whether something listens on 127.0.0.1:port.
func TCPInUse(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return true
	}
	l.Close()
	return false
}

// TCPAndUDP returns a port free on 127.0.0.1 for both TCP and UDP (for a
// server that binds both, like a memberlist member).
func TCPAndUDP() (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("find a free TCP and UDP port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		c, err := net.ListenPacket("udp", l.Addr().String())
		l.Close()
		if err == nil {
			c.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("find a free TCP and UDP port: none of 50 TCP ports was free on UDP too")
}
