package safefetch_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/hearthkit/caddy-hearth/handlers/safefetch"
)

func TestRefusesLoopbackByDefault(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("secret"))
	}))
	defer srv.Close()
	f := safefetch.New(safefetch.Options{})
	for _, u := range []string{srv.URL, strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)} {
		_, err := f.Get(context.Background(), u)
		if !errors.Is(err, safefetch.ErrBlockedAddress) {
			t.Fatalf("Get(%s) error = %v, want ErrBlockedAddress", u, err)
		}
		var be *safefetch.BlockedAddressError
		if !errors.As(err, &be) || !be.Addr.IsLoopback() {
			t.Fatalf("Get(%s) error = %#v, want a BlockedAddressError naming a loopback address", u, err)
		}
	}
}

func TestAllowPrivate(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("User-Agent") != "test-agent" {
			http.Error(w, "no UA", 400)
			return
		}
		w.Header().Set("X-Test", "yes")
		w.WriteHeader(203)
		w.Write([]byte("hello"))
	}))
	defer srv.Close()
	f := safefetch.New(safefetch.Options{AllowPrivate: true, UserAgent: "test-agent"})
	resp, err := f.Get(context.Background(), srv.URL+"/x")
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 203 || string(resp.Body) != "hello" || resp.Header.Get("X-Test") != "yes" || resp.FinalURL != srv.URL+"/x" {
		t.Fatalf("got %+v", resp)
	}
}

func TestRedirectPolicy(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/from", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/to", http.StatusFound) })
	mux.HandleFunc("/to", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("arrived")) })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	_, err := safefetch.New(safefetch.Options{AllowPrivate: true}).Get(context.Background(), srv.URL+"/from")
	var re *safefetch.RedirectError
	if !errors.Is(err, safefetch.ErrRedirect) || !errors.As(err, &re) || re.Status != 302 || re.Location != "/to" {
		t.Fatalf("no-redirect fetch: err = %v", err)
	}

	resp, err := safefetch.New(safefetch.Options{AllowPrivate: true, FollowRedirects: true}).Get(context.Background(), srv.URL+"/from")
	if err != nil || string(resp.Body) != "arrived" || resp.FinalURL != srv.URL+"/to" {
		t.Fatalf("following fetch: %+v, %v", resp, err)
	}
}

func TestTooLarge(t *testing.T) {
	big := strings.Repeat("x", 2000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("chunked") {
			w.(http.Flusher).Flush() // no Content-Length
		}
		w.Write([]byte(big))
	}))
	defer srv.Close()
	f := safefetch.New(safefetch.Options{AllowPrivate: true, MaxBytes: 1000})
	for _, u := range []string{srv.URL, srv.URL + "?chunked=1"} {
		if _, err := f.Get(context.Background(), u); !errors.Is(err, safefetch.ErrTooLarge) {
			t.Fatalf("Get(%s) err = %v, want ErrTooLarge", u, err)
		}
	}
	resp, err := safefetch.New(safefetch.Options{AllowPrivate: true, MaxBytes: 2000}).Get(context.Background(), srv.URL)
	if err != nil || len(resp.Body) != 2000 {
		t.Fatalf("exact-size body: %v", err)
	}
}

func TestTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	f := safefetch.New(safefetch.Options{AllowPrivate: true, Timeout: 50 * time.Millisecond})
	if _, err := f.Get(context.Background(), srv.URL); !errors.Is(err, safefetch.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
}

func TestBadURL(t *testing.T) {
	f := safefetch.New(safefetch.Options{AllowPrivate: true})
	for _, u := range []string{"ftp://example.com/", "file:///etc/passwd", "/relative", "http://user:pw@example.com/", "::"} {
		if _, err := f.Get(context.Background(), u); !errors.Is(err, safefetch.ErrBadURL) {
			t.Errorf("Get(%q) err = %v, want ErrBadURL", u, err)
		}
	}
}

func TestTLSWithDialAddress(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(r.Host))
	}))
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	addr := srv.Listener.Addr().String()
	f := safefetch.New(safefetch.Options{
		AllowPrivate: true,
		TLSConfig:    &tls.Config{RootCAs: pool},
		DialAddress:  func(string) string { return addr },
	})
	// httptest's certificate is valid for example.com.
	resp, err := f.Get(context.Background(), "https://example.com/")
	if err != nil || string(resp.Body) != "example.com" {
		t.Fatalf("resp %+v err %v", resp, err)
	}
	// Without AllowPrivate the rewritten loopback address is refused.
	f = safefetch.New(safefetch.Options{TLSConfig: &tls.Config{RootCAs: pool}, DialAddress: func(string) string { return addr }})
	if _, err := f.Get(context.Background(), "https://example.com/"); !errors.Is(err, safefetch.ErrBlockedAddress) {
		t.Fatalf("err = %v, want ErrBlockedAddress", err)
	}
}

func TestIsPublic(t *testing.T) {
	cases := map[string]bool{
		"8.8.8.8": true, "1.1.1.1": true, "2606:4700:4700::1111": true,
		"127.0.0.1": false, "10.1.2.3": false, "172.16.0.1": false, "192.168.1.1": false,
		"169.254.169.254": false, "0.0.0.0": false, "::": false, "::1": false, "fe80::1": false,
		"fc00::1": false, "224.0.0.1": false, "ff02::1": false, "100.64.0.1": false,
		"255.255.255.255": false, "::ffff:127.0.0.1": false,
		"64:ff9b::7f00:1": false,
		// Deny by default (code.dny.dev/ssrf): ranges the hand-made list
		// missed, and every IPv6 form that embeds an IPv4 address, public or
		// not, since the embedded address is what a gateway would reach.
		"::7f00:1": false, "::808:808": false, // ::/96 IPv4-compatible
		"2002:7f00:1::1": false, "2002:808:808::1": false, // 6to4
		"2001:0:7f00:1::1": false, "2001::1": false, // Teredo 2001::/32
		"fec0::1": false, "feff::1": false, // site-local fec0::/10
		"::ffff:8.8.8.8": false, "::ffff:10.0.0.1": false, // IPv4-mapped
		"64:ff9b::808:808": false, "64:ff9b:1::a00:1": false, // NAT64
		"100::1": false, "2001:db8::1": false, "3fff::1": false,
		"192.88.99.1": false, "198.18.0.1": false, "240.0.0.1": false,
		"fe80::1%eth0": false,
	}
	for s, want := range cases {
		if got := safefetch.IsPublic(netip.MustParseAddr(s)); got != want {
			t.Errorf("IsPublic(%s) = %v, want %v", s, got, want)
		}
	}
}

// TestRefusedRangesAtConnect dials each refused range for real: the check
// runs in the dialer, before any packet leaves, so the error names the
// address whatever is or is not listening there.
func TestRefusedRangesAtConnect(t *testing.T) {
	f := safefetch.New(safefetch.Options{Timeout: 2 * time.Second})
	for _, host := range []string{
		"127.0.0.1", "[::1]", "[::7f00:1]", "[::ffff:127.0.0.1]", "[2002:7f00:1::1]",
		"[2001:0:4136:e378:8000:63bf:3fff:fdd2]", "[fec0::1]", "[64:ff9b::7f00:1]",
		"[64:ff9b::808:808]", "[fc00::1]", "169.254.169.254", "100.64.0.1",
	} {
		_, err := f.Get(context.Background(), "http://"+host+":8080/latest/meta-data/")
		var be *safefetch.BlockedAddressError
		if !errors.Is(err, safefetch.ErrBlockedAddress) || !errors.As(err, &be) {
			t.Errorf("Get(%s) err = %v, want a BlockedAddressError", host, err)
			continue
		}
		want := netip.MustParseAddr(strings.Trim(host, "[]"))
		if be.Addr != want && be.Addr != want.Unmap() {
			t.Errorf("Get(%s) refused %s, want %s", host, be.Addr, want)
		}
	}
}

// TestDNSRebinding: a name whose DNS answer is a private address (what a
// rebinding server answers on the second lookup) is refused when the
// connection is made, not only when the URL is looked at. A real DNS
// server (miekg/dns) on loopback answers; the fetcher resolves through it.
func TestDNSRebinding(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var answered atomic.Int32
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		for _, q := range req.Question {
			switch q.Qtype {
			case dns.TypeA:
				answered.Add(1)
				rr, _ := dns.NewRR(q.Name + " 0 IN A 127.0.0.1")
				m.Answer = append(m.Answer, rr)
			case dns.TypeAAAA:
				rr, _ := dns.NewRR(q.Name + " 0 IN AAAA ::ffff:10.0.0.1")
				m.Answer = append(m.Answer, rr)
			}
		}
		w.WriteMsg(m)
	})}
	go srv.ActivateAndServe()
	defer srv.Shutdown()
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("internal"))
	}))
	defer target.Close()
	_, port, _ := net.SplitHostPort(target.Listener.Addr().String())
	u := "http://rebind.example.com:" + port + "/"

	resp, err := safefetch.New(safefetch.Options{Resolver: resolver}).Get(context.Background(), u)
	var be *safefetch.BlockedAddressError
	if !errors.As(err, &be) || (be.Addr != netip.MustParseAddr("127.0.0.1") && be.Addr != netip.MustParseAddr("::ffff:10.0.0.1")) {
		t.Fatalf("Get(%s) = %+v, %v; want the rebound address refused", u, resp, err)
	}
	if answered.Load() == 0 {
		t.Fatal("the test resolver was never asked")
	}
	// The same name through the same resolver is fetched when private
	// addresses are allowed: the refusal above came from the address.
	resp, err = safefetch.New(safefetch.Options{Resolver: resolver, AllowPrivate: true}).Get(context.Background(), u)
	if err != nil || string(resp.Body) != "internal" {
		t.Fatalf("with AllowPrivate: %+v, %v", resp, err)
	}
}
