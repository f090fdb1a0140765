//go:build cluster

package cluster

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/gate"
	"github.com/hearthkit/caddy-hearth/storage/kv/pgkv/pgtest"
)

const (
	pgPort = 15438
	// How long the test waits for an event (a node answering, a change
	// reaching the other node) before it calls it missing. Never asserted
	// as a duration: the lags are logged.
	eventDeadline = 60 * time.Second
)

var (
	caddyBin string         // built once by TestMain
	pg       *pgtest.Server // started by TestMain
)

// TestMain builds cmd/caddy once (as the interop scripts do) and starts
// PostgreSQL; without PostgreSQL it fails (unless HEARTH_TEST_POSTGRES=skip).
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hearth-cluster-bin-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	caddyBin = filepath.Join(dir, "caddy")
	build := exec.Command("go", "build", "-tags", "nobadger,nomysql,nopgx", "-o", caddyBin, "./cmd/caddy")
	build.Dir = filepath.Join("..", "..")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "cluster: build cmd/caddy:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	pg, err = pgtest.Start(pgPort)
	if err != nil {
		if !errors.Is(err, pgtest.ErrMissing) || !pgtest.Skip() {
			fmt.Fprintln(os.Stderr, "cluster:", err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, "cluster: skipping:", err)
	}
	code := m.Run()
	if pg != nil {
		pg.Stop()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// caddyfile is the one Caddyfile of both nodes: what differs (addresses,
// storage_dir) comes from the environment ({$…} is replaced when Caddy
// parses it). Caddy's own storage (certificates, locks) is one directory
// both nodes share, as several nodes must (docs/several-nodes.md).
const caddyfile = `{
	admin {$NODE_ADMIN}
	auto_https off
	grace_period 1s
	storage file_system {$CADDY_SHARED_STORAGE}
	hearth {
		storage_dir {$NODE_DIR}
		open_registration
		storage postgres {
			dsn {env.HEARTH_DATABASE_URL}
		}
	}
}
http://127.0.0.1:{$NODE_PORT} {
	bind 127.0.0.1
	hearth_oauth {
		registration_limit 50 10m
		token_limit 5000 5m
		failed_code_limit 1000 10m
		authorize_limit 1000 1m
	}
	handle /gated/* {
		hearth_gate
		respond "gated {http.request.header.Remote-User}"
	}
	hearth_graphql {
		token_rate_limit off
		member_rate_limit off
	}
	# The relay and the NIP-05 server run in the test process on loopback;
	# nip05_recheck is as short as it goes (the schedule looks for due
	# identifiers every max(nip05_recheck/24, 1m)); NIP-05 checks fetch the
	# NIP-05 server's port.
	hearth_directory {
		relays ws://127.0.0.1:18583
		allow_private_addresses
		nip05_recheck 1s
		nip05_port 18584
	}
}
# The same site under another name with a tight GraphQL token limit: the
# shared-limit scenario counts it across the nodes.
http://localhost:{$NODE_PORT} {
	bind 127.0.0.1
	hearth_graphql {
		token_rate_limit 6
		member_rate_limit off
		rate_limit_window 1h
	}
}
`

// node is one Caddy process.
type node struct {
	name, port, admin string
	dir               string
	env               []string
	cmd               *exec.Cmd
	logPath           string
	done              chan struct{}
}

func (n *node) base() string     { return "http://127.0.0.1:" + n.port }
func (n *node) adminURL() string { return "http://" + n.admin }

// cluster is the two nodes and what they share.
type cluster struct {
	a, b  *node
	dsn   string
	root  string // the Caddyfile and the nodes' directories
	relay *testRelay
	nip05 *nip05Server
}

// newNode prepares (does not start) a node of the Caddyfile on dsn. Its
// connections carry application_name hearth-<name>, so the test can tell
// them apart in pg_stat_activity.
func (c *cluster) newNode(t *testing.T, name, port, admin, dsn string) *node {
	t.Helper()
	dir := filepath.Join(c.root, "node-"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"HOME="+dir, "XDG_DATA_HOME="+filepath.Join(dir, "data"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"NODE_ADMIN="+admin, "NODE_PORT="+port, "NODE_DIR="+filepath.Join(dir, "hearth"),
		"CADDY_SHARED_STORAGE="+filepath.Join(c.root, "caddy-shared"),
		"HEARTH_DATABASE_URL="+dsn+" application_name=hearth-"+name,
		// The NIP-05 server's certificate is the only root the node trusts.
		"SSL_CERT_FILE="+c.nip05.certFile)
	return &node{name: name, port: port, admin: admin, dir: dir, env: env, logPath: filepath.Join(dir, "caddy.log")}
}

func (n *node) caddyfile() string { return filepath.Join(n.dir, "..", "Caddyfile") }

// caddy runs a caddy command (reload, hearth backup …) with n's
// environment, so the Caddyfile it reads is n's.
func (n *node) caddy(args ...string) (string, error) {
	cmd := exec.Command(caddyBin, args...)
	cmd.Env = n.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (n *node) start(t *testing.T) {
	t.Helper()
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(caddyBin, "run", "--config", n.caddyfile(), "--adapter", "caddyfile")
	cmd.Env = n.env
	cmd.Stdout, cmd.Stderr = logf, logf
	// A test binary that dies must not leave a node holding the ports.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	n.cmd, n.done = cmd, make(chan struct{})
	go func() {
		cmd.Wait()
		logf.Close()
		close(n.done)
	}()
	deadline := time.Now().Add(eventDeadline)
	for {
		resp, err := http.Get(n.base() + "/api/v1/instance")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-n.done:
			t.Fatalf("node %s exited while starting:\n%s", n.name, n.logTail())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s does not answer on %s: %v\n%s", n.name, n.base(), err, n.logTail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kill9 kills the node's process at once (no shutdown at all).
func (n *node) kill9(t *testing.T) {
	t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-n.done
}

// exited reports whether the node's process has ended.
func (n *node) exited() bool {
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// stop ends the node as an operator would (SIGINT: Caddy's graceful stop).
func (n *node) stop() {
	if n.cmd == nil {
		return
	}
	select {
	case <-n.done:
		return
	default:
	}
	n.cmd.Process.Signal(os.Interrupt)
	select {
	case <-n.done:
	case <-time.After(20 * time.Second):
		n.cmd.Process.Kill()
		<-n.done
	}
}

func (n *node) logTail() string {
	b, _ := os.ReadFile(n.logPath)
	if len(b) > 6000 {
		b = b[len(b)-6000:]
	}
	return fmt.Sprintf("--- log of node %s (tail) ---\n%s", n.name, b)
}

// startCluster starts PostgreSQL's database for the site and both nodes.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	pgtest.Need(t, pg)
	dsn := pg.NewDatabase(t)
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "Caddyfile"), []byte(caddyfile), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &cluster{dsn: dsn, root: root}
	// The relay and the NIP-05 server first: the nodes reach them from
	// their start.
	c.relay = startRelay(t)
	c.nip05 = startNIP05(t, root)
	c.a = c.newNode(t, "A", "18581", "127.0.0.1:18591", dsn)
	c.b = c.newNode(t, "B", "18582", "127.0.0.1:18592", dsn)
	c.nip05.mu.Lock()
	c.nip05.owner = func(remote string) string {
		if n := ownerOf(remote, c.a, c.b); n != nil {
			return n.name
		}
		return "?"
	}
	c.nip05.mu.Unlock()
	t.Cleanup(func() {
		c.a.stop()
		c.b.stop()
		if t.Failed() {
			t.Log(c.a.logTail())
			t.Log(c.b.logTail())
		}
	})
	// A first: it creates the schema; B then starts on a database in use.
	c.a.start(t)
	c.b.start(t)
	return c
}

// ---- HTTP helpers ----

// retriedResets, while set (scenario 14's reloads), makes tryDo retry a
// request whose connection was reset before any answer, and counts the
// retries.
var retriedResets atomic.Pointer[atomic.Int64]

var httpClient = &http.Client{
	Timeout: 60 * time.Second,
	// The test looks at redirects itself (sign-in, authorization codes).
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func do(t *testing.T, method, u string, body io.Reader, header map[string]string) response {
	t.Helper()
	r, err := tryDo(method, u, body, header)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	return r
}

func tryDo(method, u string, body io.Reader, header map[string]string) (response, error) {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = io.ReadAll(body); err != nil {
			return response{}, err
		}
	}
	var resp *http.Response
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequest(method, u, bytes.NewReader(payload))
		if err != nil {
			return response{}, err
		}
		for k, v := range header {
			if k == "Host" {
				req.Host = v
				continue
			}
			req.Header.Set(k, v)
		}
		resp, err = httpClient.Do(req)
		counter := retriedResets.Load()
		if err != nil && counter != nil && attempt < 8 && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) ||
			// net/http's errServerClosedIdle (unexported): the close was seen
			// before the request was sent.
			strings.Contains(err.Error(), "server closed idle connection")) {
			// A connection closed before any byte of the answer, by a
			// reload: no server read the request. A fresh one: Caddy binds
			// each config's listener with SO_REUSEPORT and the kernel resets
			// the connections left in the old one's accept queue (as
			// caddymodule's getRetryingReset). A reused one: the old
			// server's Shutdown closes idle keep-alive connections, and one
			// the client has just written its next request to is reset
			// (unread data). Browsers send again on a reused connection
			// that fails so, whatever the method (Chromium's
			// HttpNetworkTransaction::ShouldResendRequest); Go's Transport
			// only for idempotent methods.
			counter.Add(1)
			time.Sleep(time.Duration(attempt+1) * 20 * time.Millisecond)
			continue
		}
		if err != nil {
			return response{}, err
		}
		break
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

func form(v url.Values, header map[string]string) (io.Reader, map[string]string) {
	h := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	for k, x := range header {
		h[k] = x
	}
	return strings.NewReader(v.Encode()), h
}

func postForm(t *testing.T, u string, v url.Values, header map[string]string) response {
	t.Helper()
	body, h := form(v, header)
	return do(t, http.MethodPost, u, body, h)
}

func postJSON(t *testing.T, u string, v any, header map[string]string) response {
	t.Helper()
	b, _ := json.Marshal(v)
	h := map[string]string{"Content-Type": "application/json"}
	for k, x := range header {
		h[k] = x
	}
	return do(t, http.MethodPost, u, bytes.NewReader(b), h)
}

// createMember adds a member through n's admin API (as `caddy hearth
// member add` does).
func createMember(t *testing.T, n *node, username, password string) {
	t.Helper()
	r := postJSON(t, n.adminURL()+"/hearth/members", map[string]string{"username": username, "password": password}, nil)
	if r.status != http.StatusCreated {
		t.Fatalf("create member %s on %s: %d %s", username, n.name, r.status, r.body)
	}
}

// apiToken creates a GraphQL API token for username through n's admin API.
func apiToken(t *testing.T, n *node, username string) string {
	t.Helper()
	r := postJSON(t, n.adminURL()+"/hearth/members/"+username+"/api_tokens", map[string]string{"name": "cluster", "expires": "never"}, nil)
	var v struct{ Token string }
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &v) != nil || v.Token == "" {
		t.Fatalf("create API token for %s on %s: %d %s", username, n.name, r.status, r.body)
	}
	return v.Token
}

// signIn signs username in on n and returns the session cookie.
func signIn(t *testing.T, n *node, username, password string) string {
	t.Helper()
	r := postForm(t, n.base()+"/auth/sign_in", url.Values{"username": {username}, "password": {password}}, nil)
	if r.status != http.StatusSeeOther {
		t.Fatalf("sign in %s on %s: %d %s", username, n.name, r.status, r.body)
	}
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == "hearth_session" && c.Value != "" {
			return c.Name + "=" + c.Value
		}
	}
	t.Fatalf("sign in %s on %s: no session cookie in %v", username, n.name, r.header)
	return ""
}

// settingsStatus is what GET /settings answers with cookie on n: 200 for a
// member, a redirect to the sign-in page otherwise.
func settingsStatus(t *testing.T, n *node, cookie string) (int, string) {
	t.Helper()
	r := do(t, http.MethodGet, n.base()+"/settings", nil, map[string]string{"Cookie": cookie})
	return r.status, r.header.Get("Location")
}

type gqlResult struct {
	httpStatus int
	Data       json.RawMessage
	Errors     []struct {
		Message    string
		Extensions map[string]any
	}
}

func (g gqlResult) code() string {
	if len(g.Errors) == 0 {
		return ""
	}
	c, _ := g.Errors[0].Extensions["code"].(string)
	return c
}

func tryGQL(base, host, token, query string, vars map[string]any) (gqlResult, error) {
	b, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	h := map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + token}
	if host != "" {
		h["Host"] = host
	}
	r, err := tryDo(http.MethodPost, base+"/api/graphql", bytes.NewReader(b), h)
	if err != nil {
		return gqlResult{}, err
	}
	g := gqlResult{httpStatus: r.status}
	if err := json.Unmarshal(r.body, &g); err != nil {
		return g, fmt.Errorf("HTTP %d, body %q: %w", r.status, r.body, err)
	}
	return g, nil
}

func gql(t *testing.T, n *node, token, query string, vars map[string]any) gqlResult {
	t.Helper()
	g, err := tryGQL(n.base(), "", token, query, vars)
	if err != nil {
		t.Fatalf("GraphQL on %s: %v", n.name, err)
	}
	return g
}

// ---- OAuth helpers (Mastodon's API, as the interop clients use it) ----

type app struct{ id, secret string }

const redirectURI = "hearthtest://callback"

func registerApp(t *testing.T, n *node) app {
	t.Helper()
	r := postJSON(t, n.base()+"/api/v1/apps", map[string]string{"client_name": "cluster test", "redirect_uris": redirectURI, "scopes": "read write"}, nil)
	var v struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	if r.status != http.StatusOK || json.Unmarshal(r.body, &v) != nil || v.ClientID == "" {
		t.Fatalf("register app on %s: %d %s", n.name, r.status, r.body)
	}
	return app{v.ClientID, v.ClientSecret}
}

// authorize approves app for the member signed in with cookie on n and
// returns the authorization code.
func authorize(t *testing.T, n *node, cookie string, a app) string {
	t.Helper()
	r := postForm(t, n.base()+"/oauth/authorize", url.Values{
		"response_type": {"code"}, "client_id": {a.id}, "redirect_uri": {redirectURI},
		"scope": {"read write"}, "decision": {"approve"},
	}, map[string]string{"Cookie": cookie})
	loc, err := url.Parse(r.header.Get("Location"))
	if r.status != http.StatusFound || err != nil || loc.Query().Get("code") == "" {
		t.Fatalf("authorize on %s: %d, Location %q, %s", n.name, r.status, r.header.Get("Location"), r.body)
	}
	return loc.Query().Get("code")
}

func exchange(n *node, a app, code string) (response, error) {
	body, h := form(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI},
		"client_id": {a.id}, "client_secret": {a.secret}}, nil)
	return tryDo(http.MethodPost, n.base()+"/oauth/token", body, h)
}

func accessToken(t *testing.T, r response) string {
	t.Helper()
	var v struct {
		AccessToken string `json:"access_token"`
	}
	if r.status != http.StatusOK || json.Unmarshal(r.body, &v) != nil || v.AccessToken == "" {
		t.Fatalf("token: %d %s", r.status, r.body)
	}
	return v.AccessToken
}

func verifyCredentials(t *testing.T, n *node, token string) int {
	t.Helper()
	return do(t, http.MethodGet, n.base()+"/api/v1/accounts/verify_credentials", nil, map[string]string{"Authorization": "Bearer " + token}).status
}

// waitFor polls cond until it holds and returns how long that took; past
// eventDeadline the event is missing and the test fails.
func waitFor(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > eventDeadline {
			t.Fatalf("%s: did not happen within %v", what, eventDeadline)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return time.Since(start)
}

// ---- the scenarios ----

// TestTwoNodes runs the scenarios of the design study §7.3 on two Caddy
// nodes sharing one PostgreSQL database, in order (they share the nodes;
// 15 kills node A and starts it again, 16 restarts PostgreSQL).
func TestTwoNodes(t *testing.T) {
	c := startCluster(t)
	a, b := c.a, c.b
	const password = "cluster correct horse"
	createMember(t, a, "alice", password)

	t.Run("1 sign-in on A used on B, sign-out on B", func(t *testing.T) {
		cookie := signIn(t, a, "alice", password)
		if st, _ := settingsStatus(t, a, cookie); st != http.StatusOK {
			t.Fatalf("settings on A after signing in on A: %d", st)
		}
		if st, loc := settingsStatus(t, b, cookie); st != http.StatusOK {
			t.Fatalf("settings on B with A's session: %d (Location %q); want 200", st, loc)
		}
		r := postForm(t, b.base()+"/auth/sign_out", url.Values{}, map[string]string{"Cookie": cookie})
		if r.status != http.StatusSeeOther {
			t.Fatalf("sign out on B: %d %s", r.status, r.body)
		}
		// A has served the session (and may hold it in its cache): it
		// must see the sign-out made on B.
		lag := waitFor(t, "A refuses the session signed out on B", func() bool {
			st, loc := settingsStatus(t, a, cookie)
			return st != http.StatusOK && strings.Contains(loc, "/auth/sign_in")
		})
		t.Logf("sign-out on B seen by A after %v", lag)
	})

	var oauthApp app
	var token2 string
	// runWithApp runs a scenario that needs scenario 2's app.
	runWithApp := func(name string, scenario func(*testing.T, *cluster, app, string)) {
		t.Run(name, func(t *testing.T) {
			if oauthApp.id == "" {
				t.Skip("needs scenario 2's app")
			}
			scenario(t, c, oauthApp, password)
		})
	}
	t.Run("2 app registered and authorized on A, code exchanged on B", func(t *testing.T) {
		oauthApp = registerApp(t, a)
		cookie := signIn(t, a, "alice", password)
		code := authorize(t, a, cookie, oauthApp)
		r, err := exchange(b, oauthApp, code)
		if err != nil {
			t.Fatal(err)
		}
		token2 = accessToken(t, r)
		for _, n := range []*node{a, b} {
			if st := verifyCredentials(t, n, token2); st != http.StatusOK {
				t.Fatalf("verify_credentials on %s with the token from B: %d", n.name, st)
			}
		}
	})

	t.Run("3 one code exchanged on A and B at once, 50 rounds", func(t *testing.T) {
		if oauthApp.id == "" {
			t.Skip("needs scenario 2's app")
		}
		cookie := signIn(t, a, "alice", password)
		for round := range 50 {
			code := authorize(t, a, cookie, oauthApp)
			var wg sync.WaitGroup
			start := make(chan struct{})
			results := make([]response, 2)
			errs := make([]error, 2)
			for i, n := range []*node{a, b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					results[i], errs[i] = exchange(n, oauthApp, code)
				}()
			}
			close(start)
			wg.Wait()
			tokens := 0
			var issued string
			for i, r := range results {
				if errs[i] != nil {
					t.Fatalf("round %d: exchange on node %d: %v", round, i, errs[i])
				}
				switch {
				case r.status == http.StatusOK:
					tokens++
					issued = accessToken(t, r)
				case r.status == http.StatusBadRequest && bytes.Contains(r.body, []byte(`"invalid_grant"`)):
				default:
					t.Fatalf("round %d: exchange on node %d: %d %s; want 200 or 400 invalid_grant", round, i, r.status, r.body)
				}
			}
			if tokens != 1 {
				t.Fatalf("round %d: %d tokens issued for one code; want exactly 1 (A: %d %s, B: %d %s)",
					round, tokens, results[0].status, results[0].body, results[1].status, results[1].body)
			}
			// The second use was a replay: the token issued from the code
			// is revoked (RFC 6749 §4.1.2), on both nodes.
			for _, n := range []*node{a, b} {
				if st := verifyCredentials(t, n, issued); st != http.StatusUnauthorized {
					t.Fatalf("round %d: the token of a replayed code answers %d on %s; want 401", round, st, n.name)
				}
			}
		}
	})

	t.Run("4 token revoked on A refused on B; member suspended on A refused on B", func(t *testing.T) {
		if token2 == "" {
			t.Skip("needs scenario 2's token")
		}
		// B checks the token (and may cache it); A revokes it.
		for range 3 {
			if st := verifyCredentials(t, b, token2); st != http.StatusOK {
				t.Fatalf("verify_credentials on B before the revocation: %d", st)
			}
		}
		r := postForm(t, a.base()+"/oauth/revoke", url.Values{"client_id": {oauthApp.id}, "client_secret": {oauthApp.secret}, "token": {token2}}, nil)
		if r.status != http.StatusOK {
			t.Fatalf("revoke on A: %d %s", r.status, r.body)
		}
		lag := waitFor(t, "B refuses the token revoked on A", func() bool { return verifyCredentials(t, b, token2) == http.StatusUnauthorized })
		t.Logf("revocation on A refused on B after %v", lag)

		createMember(t, a, "dora", password)
		tok := apiToken(t, a, "dora")
		for range 3 {
			if g := gql(t, b, tok, `{ me { username } }`, nil); len(g.Errors) > 0 {
				t.Fatalf("me on B before the suspension: %+v", g.Errors)
			}
		}
		if r := do(t, http.MethodPost, a.adminURL()+"/hearth/members/dora/suspend", nil, nil); r.status != http.StatusOK {
			t.Fatalf("suspend on A: %d %s", r.status, r.body)
		}
		lag = waitFor(t, "B refuses the member suspended on A", func() bool {
			g := gql(t, b, tok, `{ me { username } }`, nil)
			return g.code() == "UNAUTHORIZED" // a suspended member's token is refused as unknown
		})
		t.Logf("suspension on A refused on B after %v", lag)
	})

	runWithApp("5 B's listener killed, then a revocation on A: B never serves the token from its cache", scenario5)

	t.Run("6 limits hold across the nodes", func(t *testing.T) {
		createMember(t, a, "bob", password)
		// 10 failures for one username (the default per-username limit)
		// alternating A and B: each is a wrong password; the 11th is
		// refused on either node.
		for i := range 10 {
			n := []*node{a, b}[i%2]
			r := postForm(t, n.base()+"/auth/sign_in", url.Values{"username": {"bob"}, "password": {"wrong " + strconv.Itoa(i)}}, nil)
			if r.status != http.StatusUnauthorized {
				t.Fatalf("failure %d on %s: %d; want 401", i+1, n.name, r.status)
			}
		}
		for _, n := range []*node{a, b} {
			r := postForm(t, n.base()+"/auth/sign_in", url.Values{"username": {"bob"}, "password": {"wrong again"}}, nil)
			if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
				t.Fatalf("11th failure on %s: %d (Retry-After %q); want 429 once 10 failed on the two nodes together", n.name, r.status, r.header.Get("Retry-After"))
			}
			// Even the right password: the username is locked for now.
			r = postForm(t, n.base()+"/auth/sign_in", url.Values{"username": {"bob"}, "password": {password}}, nil)
			if r.status != http.StatusTooManyRequests {
				t.Fatalf("the right password after 10 failures on %s: %d; want 429", n.name, r.status)
			}
		}

		// The GraphQL per-token limit (6 an hour on the localhost site)
		// counts requests on both nodes.
		tok := apiToken(t, a, "bob")
		for i := range 6 {
			n := []*node{a, b}[i%2]
			g, err := tryGQL(n.base(), "localhost:"+n.port, tok, `{ labels { id } }`, nil)
			if err != nil || len(g.Errors) > 0 {
				t.Fatalf("GraphQL request %d on %s: %v %+v", i+1, n.name, err, g.Errors)
			}
		}
		for _, n := range []*node{a, b} {
			g, err := tryGQL(n.base(), "localhost:"+n.port, tok, `{ labels { id } }`, nil)
			if err != nil || g.code() != "TOO_MANY_REQUESTS" {
				t.Fatalf("7th GraphQL request on %s: %v %+v; want TOO_MANY_REQUESTS", n.name, err, g.Errors)
			}
		}
	})

	t.Run("7 same username created on A and B at once", func(t *testing.T) {
		for round := range 4 {
			name := "carol" + strconv.Itoa(round)
			var wg sync.WaitGroup
			start := make(chan struct{})
			statuses := make([]int, 2)
			for i, n := range []*node{a, b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					body, h := form(url.Values{"username": {name}, "password": {password}, "password_confirmation": {password}}, nil)
					r, err := tryDo(http.MethodPost, n.base()+"/auth/sign_up", body, h)
					if err != nil {
						statuses[i] = -1
						return
					}
					statuses[i] = r.status
				}()
			}
			close(start)
			wg.Wait()
			created, taken := 0, 0
			for _, st := range statuses {
				switch st {
				case http.StatusSeeOther:
					created++
				case http.StatusConflict:
					taken++
				}
			}
			if created != 1 || taken != 1 {
				t.Fatalf("round %d: sign-ups of %s on A and B answered %v; want one 303 (created) and one 409 (taken)", round, name, statuses)
			}
		}
	})

	t.Run("8 items created on both nodes at once have distinct ids", func(t *testing.T) {
		createMember(t, a, "erin", password)
		tok := apiToken(t, a, "erin")
		// 1000 items by default (10 000 with
		// HEARTH_CLUSTER_ITEMS=10000): ids made in the same millisecond
		// on both nodes must still differ.
		const workers = 4 // per node
		perWorker := 125
		if n, err := strconv.Atoi(os.Getenv("HEARTH_CLUSTER_ITEMS")); err == nil && n >= 8 {
			perWorker = n / 8
		}
		type saved struct{ id, url string }
		var mu sync.Mutex
		var all []saved
		var wg sync.WaitGroup
		errc := make(chan error, 2*workers)
		for _, n := range []*node{a, b} {
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range perWorker {
						u := fmt.Sprintf("https://example.org/cluster/%s/%d/%d", n.name, w, i)
						id, err := saveItem(n, tok, u)
						if err != nil {
							errc <- fmt.Errorf("node %s: %w", n.name, err)
							return
						}
						mu.Lock()
						all = append(all, saved{id, u})
						mu.Unlock()
					}
				}()
			}
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Fatal(err)
		}
		ids := map[string]string{}
		for _, s := range all {
			if other, dup := ids[s.id]; dup {
				t.Fatalf("id %s returned for %s and %s", s.id, other, s.url)
			}
			ids[s.id] = s.url
		}
		// Every item is there, with its own URL, seen from the other node.
		for i, s := range all {
			n := []*node{a, b}[i%2]
			if got := itemURL(t, n, tok, s.id); got != s.url {
				t.Fatalf("item %s read on %s: url %q; want %q", s.id, n.name, got, s.url)
			}
		}
		t.Logf("%d items saved on two nodes, %d distinct ids", len(all), len(ids))
	})

	t.Run("9 agent registered on A listed by B, one document", func(t *testing.T) { scenario9(t, c) })

	t.Run("10 and 11 one relay subscriber, kill -9 of the leader; NIP-05 re-checked once per pass", func(t *testing.T) {
		scenario10and11(t, c)
	})

	t.Run("12 backup from A while B writes, restored into a fresh database", func(t *testing.T) { scenario12(t, c, password) })

	runWithApp("13 restore through A: B serves the restored state, a restore on B meanwhile refused", scenario13)

	runWithApp("14 caddy reload of A under load from A's and B's clients", scenario14)

	t.Run("15 kill -9 of node A under write load: every acknowledged write present", func(t *testing.T) {
		createMember(t, a, "frank", password)
		tok := apiToken(t, a, "frank")
		type saved struct{ id, url string }
		var mu sync.Mutex
		var acked []saved
		var wg sync.WaitGroup
		enough := make(chan struct{})
		var once sync.Once
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					u := fmt.Sprintf("https://example.org/kill/%d/%d", w, i)
					id, err := saveItem(a, tok, u)
					if err != nil {
						return // the node is gone (or refused): not acknowledged
					}
					mu.Lock()
					acked = append(acked, saved{id, u})
					if len(acked) >= 60 {
						once.Do(func() { close(enough) })
					}
					mu.Unlock()
				}
			}()
		}
		select {
		case <-enough:
		case <-time.After(eventDeadline):
			t.Fatalf("60 writes were not acknowledged by A within %v", eventDeadline)
		}
		a.kill9(t)
		defer func() {
			if a.exited() {
				a.start(t) // for the next scenario, also when this one failed
			}
		}()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, s := range acked {
			if got := itemURL(t, b, tok, s.id); got != s.url {
				t.Fatalf("acknowledged item %s (%s) read on B after A was killed: url %q", s.id, s.url, got)
			}
		}
		t.Logf("%d writes acknowledged by A before kill -9, all present on B", len(acked))
		// A starts again on the same database and serves them too.
		a.start(t)
		for _, s := range acked[:min(len(acked), 10)] {
			if got := itemURL(t, a, tok, s.id); got != s.url {
				t.Fatalf("item %s read on A after its restart: url %q", s.id, got)
			}
		}
	})

	t.Run("16 PostgreSQL restarted: 503 meanwhile, both nodes recover without restart", func(t *testing.T) {
		createMember(t, a, "gina", password)
		tok := apiToken(t, a, "gina")
		cookie := signIn(t, a, "gina", password)
		oauthTok := ""
		if oauthApp.id != "" {
			code := authorize(t, a, cookie, oauthApp)
			r, err := exchange(a, oauthApp, code)
			if err != nil {
				t.Fatal(err)
			}
			oauthTok = accessToken(t, r)
		}
		// Every check once on each node while the database is up: caches
		// (tokens, sessions, members) are warm.
		probe := func(n *node) map[string]int {
			out := map[string]int{}
			g, err := tryGQL(n.base(), "", tok, `mutation { createLabel(data: {name: "x`+strconv.FormatInt(time.Now().UnixNano(), 36)+`", color: "#336791"}) { id } }`, nil)
			switch {
			case err != nil:
				out["graphql write"] = -1
			case len(g.Errors) == 0:
				out["graphql write"] = http.StatusOK
			case g.code() == "SERVICE_UNAVAILABLE":
				out["graphql write"] = http.StatusServiceUnavailable
			default:
				out["graphql write"] = 1000 + g.httpStatus // anything else
			}
			g, err = tryGQL(n.base(), "", tok, `{ labels { id } }`, nil)
			switch {
			case err != nil:
				out["graphql read"] = -1
			case len(g.Errors) == 0:
				out["graphql read"] = http.StatusOK
			case g.code() == "SERVICE_UNAVAILABLE":
				out["graphql read"] = http.StatusServiceUnavailable
			default:
				out["graphql read"] = 1000 + g.httpStatus
			}
			body, h := form(url.Values{"username": {"gina"}, "password": {password}}, nil)
			if r, err := tryDo(http.MethodPost, n.base()+"/auth/sign_in", body, h); err != nil {
				out["sign-in"] = -1
			} else {
				out["sign-in"] = r.status
			}
			if r, err := tryDo(http.MethodGet, n.base()+"/settings", nil, map[string]string{"Cookie": cookie}); err != nil {
				out["settings"] = -1
			} else {
				out["settings"] = r.status
			}
			if oauthTok != "" {
				if r, err := tryDo(http.MethodGet, n.base()+"/api/v1/accounts/verify_credentials", nil, map[string]string{"Authorization": "Bearer " + oauthTok}); err != nil {
					out["verify_credentials"] = -1
				} else {
					out["verify_credentials"] = r.status
				}
			}
			return out
		}
		up := map[string]int{"graphql write": 200, "graphql read": 200, "sign-in": 303, "settings": 200}
		if oauthTok != "" {
			up["verify_credentials"] = 200
		}
		for _, n := range []*node{a, b} {
			if got := probe(n); !maps.Equal(got, up) {
				t.Fatalf("node %s with the database up: %v; want %v", n.name, got, up)
			}
		}

		if err := pg.StopServer(); err != nil {
			t.Fatal(err)
		}
		restarted := false
		defer func() {
			if !restarted {
				pg.Restart()
			}
		}()
		for _, n := range []*node{a, b} {
			got := probe(n)
			// A wrong password is not checked at all (the failure limits
			// fail closed), not even against a member a node has cached.
			body, h := form(url.Values{"username": {"gina"}, "password": {"a wrong guess"}}, nil)
			if r, err := tryDo(http.MethodPost, n.base()+"/auth/sign_in", body, h); err != nil {
				got["wrong password"] = -1
			} else {
				got["wrong password"] = r.status
			}
			for what, st := range got {
				if st != http.StatusServiceUnavailable {
					t.Errorf("node %s, database stopped: %s answered %d; want 503 (all: %v)", n.name, what, st, got)
				}
			}
		}
		if err := pg.Restart(); err != nil {
			t.Fatal(err)
		}
		restarted = true
		for _, n := range []*node{a, b} {
			var last map[string]int
			lag := waitFor(t, "node "+n.name+" serves again after the database restarted", func() bool {
				last = probe(n)
				for what, st := range last {
					if st != up[what] && st != http.StatusServiceUnavailable {
						t.Fatalf("node %s, database restarting: %s answered %d (all: %v)", n.name, what, st, last)
					}
				}
				return maps.Equal(last, up)
			})
			t.Logf("node %s served again %v after the database restarted", n.name, lag)
		}
	})

	t.Run("17 hearth_gate: a session ended on A stops passing B's gate within half a second", func(t *testing.T) {
		createMember(t, a, "gatekeeper", password)
		cookie := signIn(t, a, "gatekeeper", password)
		r := do(t, http.MethodGet, b.base()+"/gated/x", nil, map[string]string{"Cookie": cookie})
		if r.status != http.StatusOK || !strings.Contains(string(r.body), "gated gatekeeper") {
			t.Fatalf("B's gate with A's session: %d %s", r.status, r.body)
		}
		if r := postForm(t, a.base()+"/auth/sign_out", url.Values{}, map[string]string{"Cookie": cookie}); r.status != http.StatusSeeOther {
			t.Fatalf("sign out on A: %d %s", r.status, r.body)
		}
		// B's gate reads the session from the shared store again once
		// its last read is gate.SessionCacheTTL old: the first request
		// after that is refused.
		time.Sleep(gate.SessionCacheTTL)
		if r := do(t, http.MethodGet, b.base()+"/gated/x", nil, map[string]string{"Cookie": cookie}); r.status != http.StatusUnauthorized {
			t.Fatalf("B's gate %s after the sign-out on A: %d %s", gate.SessionCacheTTL, r.status, r.body)
		}
	})

	// No node panicked (Caddy recovers a handler's panic into a 500 and
	// logs it; the scenarios above never saw a 500).
	for _, n := range []*node{a, b} {
		if b, _ := os.ReadFile(n.logPath); bytes.Contains(b, []byte("panic")) {
			t.Errorf("node %s logged a panic:\n%s", n.name, grepLines(b, "panic"))
		}
	}
}

func grepLines(b []byte, s string) string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			out = append(out, sc.Text())
		}
	}
	return strings.Join(out, "\n")
}

// saveItem saves an article from HTML on n (addArticleFromHtmlSnapshot) and
// returns its id; an error when the node did not acknowledge it.
func saveItem(n *node, token, u string) (string, error) {
	html := "<html><head><title>Cluster " + u + "</title></head><body><article><h1>Cluster</h1><p>" +
		strings.Repeat("Saved on two nodes sharing one database. ", 8) + "</p></article></body></html>"
	g, err := tryGQL(n.base(), "", token, `mutation($u: String!, $h: String!) { addArticleFromHtmlSnapshot(data: {url: $u, html: $h}) }`,
		map[string]any{"u": u, "h": html})
	if err != nil {
		return "", err
	}
	if len(g.Errors) > 0 {
		return "", fmt.Errorf("save %s: %+v", u, g.Errors)
	}
	var v struct{ AddArticleFromHtmlSnapshot string }
	if err := json.Unmarshal(g.Data, &v); err != nil || v.AddArticleFromHtmlSnapshot == "" {
		return "", fmt.Errorf("save %s: data %s", u, g.Data)
	}
	return v.AddArticleFromHtmlSnapshot, nil
}

// itemURL reads the url of saved item id on n ("" when it is absent).
func itemURL(t *testing.T, n *node, token, id string) string {
	t.Helper()
	g := gql(t, n, token, `query($id: String!) { savedItem(query: {id: $id}) { id originalUrl } }`, map[string]any{"id": id})
	if len(g.Errors) > 0 {
		t.Fatalf("savedItem %s on %s: %+v", id, n.name, g.Errors)
	}
	var v struct {
		SavedItem *struct {
			ID  string
			URL string `json:"originalUrl"`
		}
	}
	if err := json.Unmarshal(g.Data, &v); err != nil {
		t.Fatal(err)
	}
	if v.SavedItem == nil {
		return ""
	}
	return v.SavedItem.URL
}
