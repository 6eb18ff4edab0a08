package freeport

import "testing"

// TestNeverTheSamePortTwice: the ports handed out in one process are all
// different, whatever the kernel gives back for port 0 (an etcd cluster's
// client and peer ports once collided in CI).
func TestNeverTheSamePortTwice(t *testing.T) {
	seen := map[int]string{}
	for i := range 300 {
		kind, pick := "TCP", TCP
		switch i % 3 {
		case 1:
			kind, pick = "UDP", UDP
		case 2:
			kind, pick = "TCP and UDP", TCPAndUDP
		}
		port, err := pick()
		if err != nil {
			t.Fatal(err)
		}
		if before, ok := seen[port]; ok {
			t.Fatalf("pick %d (%s) gave port %d, handed out before (%s)", i, kind, port, before)
		}
		seen[port] = kind
	}
}
