// Package freeport finds free loopback ports for the servers tests start.
// A port is free when returned; a server that then loses it to another
// process fails to bind and should be started again on a new port.
package freeport

import (
	"fmt"
	"net"
	"strconv"
	"sync"
)

// handedOut are the ports this process was given. The kernel may give a
// port that was just closed to the next bind to port 0, and a test that
// picks several ports before it starts anything (an etcd cluster's client
// and peer ports) must not get the same one twice. Process-wide on
// purpose: the ports are.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// maxTries bounds the picks that return ports handed out before.
const maxTries = 100

// fresh calls pick until it returns a port this process was not given
// before, and records it.
func fresh(kind string, pick func() (int, error)) (int, error) {
	for range maxTries {
		port, err := pick()
		if err != nil {
			return 0, err
		}
		handedOut.Lock()
		seen := handedOut.ports[port]
		handedOut.ports[port] = true
		handedOut.Unlock()
		if !seen {
			return port, nil
		}
	}
	return 0, fmt.Errorf("find a free %s port: %d tries gave only ports handed out before", kind, maxTries)
}

// TCP returns a free TCP port on 127.0.0.1.
func TCP() (int, error) { return fresh("TCP", pickTCP) }

func pickTCP() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free TCP port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// UDP returns a free UDP port on 127.0.0.1.
func UDP() (int, error) { return fresh("UDP", pickUDP) }

func pickUDP() (int, error) {
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
func TCPAndUDP() (int, error) { return fresh("TCP and UDP", pickTCPAndUDP) }

func pickTCPAndUDP() (int, error) {
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
