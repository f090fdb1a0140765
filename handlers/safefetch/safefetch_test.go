package safefetch_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

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
		"255.255.255.255": false, "::ffff:127.0.0.1": false, "::ffff:8.8.8.8": true,
		"64:ff9b::7f00:1": false, "64:ff9b::808:808": true,
	}
	for s, want := range cases {
		if got := safefetch.IsPublic(netip.MustParseAddr(s)); got != want {
			t.Errorf("IsPublic(%s) = %v, want %v", s, got, want)
		}
	}
}

func TestCheckHost(t *testing.T) {
	ctx := context.Background()
	for _, h := range []string{"127.0.0.1", "[::1]", "localhost", "10.0.0.1"} {
		if err := safefetch.CheckHost(ctx, h); !errors.Is(err, safefetch.ErrBlockedAddress) {
			t.Errorf("CheckHost(%s) = %v, want ErrBlockedAddress", h, err)
		}
	}
	if err := safefetch.CheckHost(ctx, "8.8.8.8"); err != nil {
		t.Errorf("CheckHost(8.8.8.8) = %v", err)
	}
}
