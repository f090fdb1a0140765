package ratelimit

import (
	"net"
	"net/http"
)

// RemoteIP is the host part of r.RemoteAddr: the key services rate-limit
// clients by when nothing better is known. Behind a proxy, pass the
// services a ClientIP function that trusts only the proxy's forwarding
// headers instead (Caddy's client_ip variable does).
func RemoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
