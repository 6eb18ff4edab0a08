package agentserver

import (
	"net"

	"golang.org/x/sys/unix"
)

// growReceiveBuffer asks the kernel for size bytes of receive buffer on
// the agents' UDP socket and returns what it granted. Beyond
// net.core.rmem_max only a privileged process gets it (SO_RCVBUFFORCE);
// otherwise the ordinary request is capped there.
func growReceiveBuffer(conn *net.UDPConn, size int) (int, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return 0, err
	}
	var granted int
	var sockErr error
	err = raw.Control(func(fd uintptr) {
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, size) != nil {
			if sockErr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, size); sockErr != nil {
				return
			}
		}
		// The kernel reports twice what it accounts for payload.
		granted, sockErr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
		granted /= 2
	})
	if err != nil {
		return 0, err
	}
	return granted, sockErr
}
