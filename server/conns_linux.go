package server

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// peerGone reports whether the other end of a held TCP connection has
// closed it (or reset it): anything but an established connection.
func peerGone(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	rc.Control(func(fd uintptr) {
		info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		gone = err == nil && info.State != unix.BPF_TCP_ESTABLISHED
	})
	return gone
}
