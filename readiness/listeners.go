package readiness

import (
	"bufio"
	"encoding/hex"
	"net"
	"os"
	"strconv"
	"strings"
)

// listeningElsewhere returns the addresses port listens on, from
// /proc/net/tcp and tcp6, when none of them is one the probes reach (a
// wildcard, 127.0.0.1 or ::1); else "".
func listeningElsewhere(port int) string {
	var others []string
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		for _, ip := range listeners(file, port) {
			if ip.IsUnspecified() || ip.Equal(net.IPv4(127, 0, 0, 1)) || ip.Equal(net.IPv6loopback) {
				return ""
			}
			others = append(others, ip.String())
		}
	}
	return strings.Join(others, ", ")
}

// listeners returns the local addresses of the LISTEN sockets on port in
// file, a /proc/net/tcp or tcp6 table.
func listeners(file string, port int) []net.IP {
	f, err := os.Open(file)
	if err != nil {
		return nil
	}
	defer f.Close()
	var ips []net.IP
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || fields[3] != "0A" { // 0A: TCP_LISTEN
			continue
		}
		ipHex, portHex, ok := strings.Cut(fields[1], ":")
		if p, err := strconv.ParseUint(portHex, 16, 16); !ok || err != nil || int(p) != port {
			continue
		}
		if ip := parseProcIP(ipHex); ip != nil {
			ips = append(ips, ip)
		}
	}
	return ips
}

// parseProcIP decodes an address of /proc/net/tcp: the IP's 32-bit words
// in hex, each in the machine's (little-endian) byte order.
func parseProcIP(s string) net.IP {
	b, err := hex.DecodeString(s)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return nil
	}
	for i := 0; i < len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	return net.IP(b)
}
