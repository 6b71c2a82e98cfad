package tunnels

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// socketBytes returns what the kernel counts for the TCP connection c:
// the bytes of data it sent (retransmissions aside; not the SYN and FIN,
// which Bytes_acked would count), and the bytes it received. For a tunnel's target side, which carries nothing but the
// tunnel's bytes, these are the bytes moved each way, known at every
// moment without the copies counting (which would keep them from
// splicing). ok is false if c is not a TCP socket or is closed.
func socketBytes(c net.Conn) (sent, received int64, ok bool) {
	sc, isSys := c.(syscall.Conn)
	if !isSys {
		return 0, 0, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, 0, false
	}
	var info *unix.TCPInfo
	var infoErr error
	err = raw.Control(func(fd uintptr) {
		info, infoErr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	})
	if err != nil || infoErr != nil {
		return 0, 0, false
	}
	return int64(info.Bytes_sent - info.Bytes_retrans), int64(info.Bytes_received), true
}
