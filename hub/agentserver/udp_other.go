//go:build !linux

package hub

import "net"

// growReceiveBuffer asks for size bytes of receive buffer on the agents'
// UDP socket; the granted size is not known here.
func growReceiveBuffer(conn *net.UDPConn, size int) (int, error) {
	return 0, conn.SetReadBuffer(size)
}
