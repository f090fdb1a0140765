// Package safefetch is Hearth's one outbound connector for URLs that come
// from users or operators (NIP-05 identifiers, articles to save, relays).
// Unless told otherwise it connects only to public addresses, deny by
// default, as judged by code.dny.dev/ssrf: every IPv4 special-purpose range
// of IANA's registry is refused, and of IPv6 only the global unicast range
// 2000::/3 is allowed, minus its special-purpose blocks (2001::/23 with
// Teredo 2001::/32, 2002::/16 6to4, documentation ranges). Everything outside
// 2000::/3 is refused, which covers ::/96 (IPv4-compatible), ::ffff:0:0/96
// (IPv4-mapped), 64:ff9b::/96 and 64:ff9b:1::/48 (NAT64), fec0::/10
// (site-local), fc00::/7, fe80::/10 and multicast.
//
// The address check runs on the IP the dialer actually connects to
// (net.Dialer.Control), after DNS resolution, so a hostname that resolves to
// 127.0.0.1 (DNS rebinding), or a redirect to one, is refused the same way as
// a literal IP. Proxies from the environment are ignored for the same reason.
package safefetch

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"code.dny.dev/ssrf"
)

// Defaults used when Options leave a field zero.
const (
	DefaultTimeout      = 10 * time.Second
	DefaultMaxBytes     = 1 << 20
	DefaultMaxRedirects = 5
	DefaultUserAgent    = "Hearth (+https://github.com/hearthkit/caddy-hearth)"
)

// Options configure a Fetcher. The zero value is the safe default: public
// addresses only, no redirects, 10 s, 1 MiB.
type Options struct {
	// AllowPrivate permits private, loopback, link-local and other
	// non-public addresses (tests, intranets).
	AllowPrivate bool
	// Timeout bounds the whole fetch: connect, TLS, headers and body.
	Timeout time.Duration
	// MaxBytes bounds the response body; a longer body fails with ErrTooLarge.
	MaxBytes int64
	// FollowRedirects follows up to MaxRedirects redirects (each target is
	// checked like the first URL). When false a 3xx answer fails with a
	// *RedirectError.
	FollowRedirects bool
	// MaxRedirects bounds the redirects followed (default 5).
	MaxRedirects int
	// UserAgent is sent with every request.
	UserAgent string
	// TLSConfig replaces the default TLS configuration (tests use it to trust
	// an httptest server's certificate).
	TLSConfig *tls.Config
	// DialAddress, when set, rewrites the host:port that is dialed (like
	// curl --resolve). Tests use it to reach a local server under a real
	// domain name; the address check still applies to the rewritten address.
	DialAddress func(addr string) string
	// Resolver replaces net.DefaultResolver for the names dialed (tests
	// use it to answer a name with a private address, as a rebinding DNS
	// server would). The address check applies to whatever it answers.
	Resolver *net.Resolver
}

// Errors returned by Get, to be tested with errors.Is.
var (
	// ErrBlockedAddress: the URL's host resolves to an address that is not allowed.
	ErrBlockedAddress = errors.New("safefetch: address not allowed")
	// ErrTooLarge: the body is longer than MaxBytes.
	ErrTooLarge = errors.New("safefetch: response too large")
	// ErrRedirect: the server answered with a redirect that was not followed.
	ErrRedirect = errors.New("safefetch: redirect not followed")
	// ErrBadURL: the URL is not an absolute http or https URL.
	ErrBadURL = errors.New("safefetch: bad URL")
	// ErrTimeout: the fetch took longer than Timeout.
	ErrTimeout = errors.New("safefetch: timed out")
)

// BlockedAddressError names the refused address. It matches ErrBlockedAddress.
type BlockedAddressError struct{ Addr netip.Addr }

func (e *BlockedAddressError) Error() string {
	return fmt.Sprintf("safefetch: address %s is not public; refused", e.Addr)
}

// Is makes errors.Is(err, ErrBlockedAddress) true.
func (e *BlockedAddressError) Is(target error) bool { return target == ErrBlockedAddress }

// RedirectError is returned when a redirect is not followed. It matches
// ErrRedirect.
type RedirectError struct {
	Status   int
	Location string
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("safefetch: server answered %d redirect; redirects are not followed", e.Status)
}

// Is makes errors.Is(err, ErrRedirect) true.
func (e *RedirectError) Is(target error) bool { return target == ErrRedirect }

// Response is a fetched response with its whole body.
type Response struct {
	Status   int
	Header   http.Header
	Body     []byte
	FinalURL string // the URL after redirects
}

// Fetcher fetches URLs under Options. It is safe for concurrent use.
type Fetcher struct {
	opts   Options
	client *http.Client
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
}

// New returns a Fetcher with opts, defaults filled in.
func New(opts Options) *Fetcher {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.MaxRedirects <= 0 {
		opts.MaxRedirects = DefaultMaxRedirects
	}
	if opts.UserAgent == "" {
		opts.UserAgent = DefaultUserAgent
	}
	f := &Fetcher{opts: opts}
	dialer := &net.Dialer{Timeout: opts.Timeout, KeepAlive: 30 * time.Second, Resolver: opts.Resolver}
	if !opts.AllowPrivate {
		dialer.Control = controlPublicOnly
	}
	f.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if opts.DialAddress != nil {
			addr = opts.DialAddress(addr)
		}
		return dialer.DialContext(ctx, network, addr)
	}
	tr := &http.Transport{
		Proxy:                  nil, // a proxy would connect for us and bypass the address check
		DialContext:            f.dial,
		TLSClientConfig:        opts.TLSConfig,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           32,
		MaxIdleConnsPerHost:    2,
		IdleConnTimeout:        60 * time.Second,
		TLSHandshakeTimeout:    opts.Timeout,
		ResponseHeaderTimeout:  opts.Timeout,
		MaxResponseHeaderBytes: 64 << 10,
	}
	f.client = &http.Client{
		Transport: tr,
		Timeout:   opts.Timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if !opts.FollowRedirects {
				return http.ErrUseLastResponse
			}
			if len(via) > opts.MaxRedirects {
				return fmt.Errorf("safefetch: more than %d redirects", opts.MaxRedirects)
			}
			if err := checkURL(req.URL); err != nil {
				return err
			}
			return nil
		},
	}
	return f
}

// Options are the fetcher's options, defaults filled in.
func (f *Fetcher) Options() Options { return f.opts }

// DialContext connects like the fetcher does: DialAddress applied, and
// unless AllowPrivate every address checked when it is connected to. Clients
// that speak another protocol (the directory's websocket relay client) dial
// through it so that they connect under the same policy.
func (f *Fetcher) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return f.dial(ctx, network, addr)
}

// Get fetches rawURL with GET and reads the whole body (up to MaxBytes).
// Any HTTP status is returned as a Response; only transport failures,
// refused addresses, unfollowed redirects and oversized bodies are errors.
func (f *Fetcher) Get(ctx context.Context, rawURL string) (*Response, error) {
	return f.GetWithHeader(ctx, rawURL, nil)
}

// GetWithHeader is Get with extra request headers (such as Accept).
func (f *Fetcher) GetWithHeader(ctx context.Context, rawURL string, header http.Header) (*Response, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	if err := checkURL(u); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("User-Agent", f.opts.UserAgent)
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, classify(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 && resp.Header.Get("Location") != "" {
		return nil, &RedirectError{Status: resp.StatusCode, Location: resp.Header.Get("Location")}
	}
	if resp.ContentLength > f.opts.MaxBytes {
		return nil, ErrTooLarge
	}
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(resp.Body, f.opts.MaxBytes+1))
	if err != nil {
		return nil, classify(err)
	}
	if n > f.opts.MaxBytes {
		return nil, ErrTooLarge
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: buf.Bytes(), FinalURL: resp.Request.URL.String()}, nil
}

// Check tells at once what Get would refuse without a network round trip:
// a URL that is not absolute http(s), and (unless AllowPrivate) a host that
// is an IP literal outside public addresses or a name that always means
// this machine (localhost and *.localhost, RFC 6761). Other names are
// resolved only by Get.
func (f *Fetcher) Check(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	if err := checkURL(u); err != nil {
		return err
	}
	if f.opts.AllowPrivate {
		return nil
	}
	if a, err := netip.ParseAddr(u.Hostname()); err == nil && !IsPublic(a) {
		return &BlockedAddressError{Addr: a}
	}
	if h := strings.TrimSuffix(strings.ToLower(u.Hostname()), "."); h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return &BlockedAddressError{Addr: netip.AddrFrom4([4]byte{127, 0, 0, 1})}
	}
	return nil
}

func checkURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%w: scheme must be http or https", ErrBadURL)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("%w: no host", ErrBadURL)
	}
	if u.User != nil {
		return fmt.Errorf("%w: credentials in URL", ErrBadURL)
	}
	return nil
}

// classify maps transport errors to the package's typed errors, keeping the
// original in the chain.
func classify(err error) error {
	var be *BlockedAddressError
	if errors.As(err, &be) {
		return be
	}
	if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		return fmt.Errorf("%w: %v", ErrTimeout, err)
	}
	return err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// guardian is the deny-by-default policy. Any port and TCP over IPv4 or
// IPv6 are allowed (articles live on other ports too); the address is
// what is judged.
var guardian = ssrf.New(ssrf.WithAnyPort())

func controlPublicOnly(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("safefetch: unexpected dial address %q", address)
	}
	if !IsPublic(ap.Addr()) {
		return &BlockedAddressError{Addr: ap.Addr()}
	}
	return nil
}

// IsPublic reports whether addr may be connected to under the
// deny-by-default policy described in the package documentation.
// IPv4-mapped, IPv4-compatible and NAT64 IPv6 forms are refused whatever
// IPv4 address they embed.
func IsPublic(addr netip.Addr) bool {
	if !addr.IsValid() || addr.Zone() != "" {
		return false
	}
	return guardian.SafeAddr(addr) == nil
}
