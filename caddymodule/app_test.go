package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// The in-process Caddy that caddytest starts listens on these.
const (
	testAdmin = "localhost:2999"
	testSite  = "http://localhost:9080"
)

// hearthCaddyfile is a test Caddyfile: the hearth global option with
// storageDir, then the site blocks (which may use Hearth directives).
func hearthCaddyfile(storageDir, sites string) string {
	return testCaddyfile("", fmt.Sprintf("storage_dir %q", storageDir), sites+"\n")
}

// testCaddyfile is a test Caddyfile: the global options of the in-process
// Caddy (admin address and ports) and the lines of global, the hearth
// option with the lines of hearth, then sites. global and hearth are
// written without indentation.
func testCaddyfile(global, hearth, sites string) string {
	return fmt.Sprintf("{\n\tadmin %s\n\thttp_port 9080\n\thttps_port 9443\n\tskip_install_trust\n%s\thearth {\n%s\t}\n}\n%s",
		testAdmin, indentLines(global, "\t"), indentLines(hearth, "\t\t"), sites)
}

// indentLines puts tab before each line of s.
func indentLines(s, tab string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString(tab + strings.TrimSuffix(line, "\n") + "\n")
	}
	return b.String()
}

// jsonLogTo is the global log option writing Caddy's log as JSON to file.
func jsonLogTo(file string) string {
	return fmt.Sprintf("log {\n\toutput file %q\n\tformat json\n}", file)
}

// postgresStore is the hearth option's lines for a store in the
// PostgreSQL of HEARTH_TEST_DSN under the table prefix.
func postgresStore(storageDir, prefix string) string {
	return fmt.Sprintf("storage_dir %q\nstorage postgres {\n\tdsn {env.HEARTH_TEST_DSN}\n\tprefix %s\n}", storageDir, prefix)
}

// startWithAlice is startHearth plus the member alice (password "a good
// password") added with the CLI; it returns the CLI's --address flag.
func startWithAlice(t *testing.T, caddyfile string) string {
	t.Helper()
	startHearth(t, caddyfile)
	addr := "--address=" + testAdmin
	if _, err := runHearth(t, "a good password\n", "member", "add", "alice", "--password-stdin", addr); err != nil {
		t.Fatal(err)
	}
	return addr
}

// startHearth loads caddyfile into the in-process Caddy and, when the test
// ends, loads an empty config so the store closes before t.TempDir
// directories go away. Call it after creating the test's temp dirs.
func startHearth(t *testing.T, caddyfile string) *caddytest.Tester {
	t.Helper()
	tester := caddytest.NewTester(t)
	tester.InitServer(caddyfile, "caddyfile")
	if t.Failed() {
		t.FailNow()
	}
	t.Cleanup(func() { loadCaddyfile(t, fmt.Sprintf("{\n\tadmin %s\n}\n", testAdmin)) })
	return tester
}

// loadCaddyfile is `caddy reload`: POST /load on the admin API.
func loadCaddyfile(t testing.TB, caddyfile string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+testAdmin+"/load", strings.NewReader(caddyfile))
	req.Header.Set("Content-Type", "text/caddyfile")
	resp, body := send(t, req)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("reload: HTTP %d: %s", resp.StatusCode, body)
	}
	// The old config's server closes its idle connections as it stops; a
	// request the default client sent on one of them would read EOF (a
	// landing test did, once). A client reconnects after a reload anyway.
	http.DefaultClient.CloseIdleConnections()
}

// seedAlice opens a store in dir with o, with the member alice (password
// "correct horse") and an API token of hers named tokenName, for a test to
// copy or to serve; the caller closes it.
func seedAlice(t testing.TB, dir string, o storage.Options, tokenName string) (*storage.Store, *members.Member, string) {
	t.Helper()
	st, err := storage.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	m, err := members.Of(st).CreateMember(t.Context(), "alice", "Alice", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	_, token, err := apitokens.Of(st).Create(t.Context(), m.ID, tokenName, 0)
	if err != nil {
		t.Fatal(err)
	}
	return st, m, token
}

// send sends req with the default client and returns the answer, its body
// read and closed.
func send(t testing.TB, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	return resp, readAnswer(t, req, resp, err)
}

// readAnswer is the body of resp, the answer to req (or err), read whole.
func readAnswer(t testing.TB, req *http.Request, resp *http.Response, err error) []byte {
	t.Helper()
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", req.Method, req.URL, err)
	}
	return b
}

// adminDo sends a request to the admin API and returns the status and body.
func adminDo(t testing.TB, method, path string, body string) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+testAdmin+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if method == http.MethodGet {
		// Each load replaces the admin endpoint on the same socket, and
		// the old one, as it stops, resets a connection it had just
		// accepted (seen in CI right after a reload): a GET is sent
		// again, as a client would.
		var resets atomic.Int64
		resp, err := getRetryingReset(http.DefaultClient, req.URL.String(), &resets)
		b := readAnswer(t, req, resp, err)
		return resp.StatusCode, b
	}
	resp, b := send(t, req)
	return resp.StatusCode, b
}

// adminJSONOK requests path, requires status want, and decodes the answer.
func adminJSONOK(t testing.TB, method, path, body string, want int, out any) {
	t.Helper()
	status, b := adminDo(t, method, path, body)
	if status != want {
		t.Fatalf("%s %s: HTTP %d, want %d: %s", method, path, status, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

type statusView struct {
	StorageDir string `json:"storage_dir"`
	StoreOpens int64  `json:"store_opens"`
}

func TestReloadKeepsOneStoreAndServesEveryRequest(t *testing.T) {
	dir := t.TempDir()
	site := func(n int) string {
		return fmt.Sprintf("%s {\n\trespond \"ok %d\"\n}\n", testSite, n)
	}
	startHearth(t, hearthCaddyfile(dir, site(0)))

	var before statusView
	adminJSONOK(t, http.MethodGet, "/hearth/status", "", http.StatusOK, &before)
	if want, _ := filepath.Abs(dir); before.StorageDir != want {
		t.Fatalf("storage_dir %q, want %q", before.StorageDir, want)
	}
	adminJSONOK(t, http.MethodPost, "/hearth/members", `{"username":"alice","password":"correct horse"}`, http.StatusCreated, nil)

	// A client keeps making requests while Caddy reloads 20 times.
	var stop atomic.Bool
	var requests, failures, resets, lastSeen atomic.Int64
	var firstFailure atomic.Value
	var wg sync.WaitGroup
	for c := 0; c < 2; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{}
			for !stop.Load() {
				resp, err := getRetryingReset(client, testSite+"/", &resets)
				requests.Add(1)
				if err != nil {
					failures.Add(1)
					firstFailure.CompareAndSwap(nil, err.Error())
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				n, err := strconv.ParseInt(strings.TrimPrefix(string(b), "ok "), 10, 64)
				if resp.StatusCode != http.StatusOK || !bytes.HasPrefix(b, []byte("ok ")) || err != nil {
					failures.Add(1)
					firstFailure.CompareAndSwap(nil, fmt.Sprintf("HTTP %d: %s", resp.StatusCode, b))
					continue
				}
				for seen := lastSeen.Load(); n > seen && !lastSeen.CompareAndSwap(seen, n); seen = lastSeen.Load() {
				}
			}
		}()
	}
	for i := 1; i <= 20; i++ {
		loadCaddyfile(t, hearthCaddyfile(dir, site(i)))
		var m memberView
		adminJSONOK(t, http.MethodGet, "/hearth/members/alice", "", http.StatusOK, &m)
		if m.Username != "alice" {
			t.Fatalf("after reload %d: member %+v", i, m)
		}
		// Each config serves the clients before the next replaces it, so
		// the requests really span every reload. On a loaded machine the
		// clients may wait a while for a core; the bound is only a
		// backstop against a config that never serves.
		storagetest.Eventually(t, fmt.Sprintf("a client answered by the config of reload %d", i), func() bool { return lastSeen.Load() >= int64(i) })
	}
	stop.Store(true)
	wg.Wait()

	if n := failures.Load(); n > 0 {
		t.Fatalf("%d of %d requests failed during reloads; first: %v", n, requests.Load(), firstFailure.Load())
	}
	var after statusView
	adminJSONOK(t, http.MethodGet, "/hearth/status", "", http.StatusOK, &after)
	if after.StoreOpens != before.StoreOpens {
		t.Fatalf("the store was opened %d more times during reloads, want 0", after.StoreOpens-before.StoreOpens)
	}
	// The last config's site answers.
	resp, err := http.Get(testSite + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok 20" {
		t.Fatalf("site answers %q after the reloads", b)
	}
	t.Logf("%d requests, 0 failed, during 20 reloads (%d fresh connections reset and retried)", requests.Load(), resets.Load())
}

// getRetryingReset GETs url and, like a browser, retries when a fresh
// connection is closed before any byte of the answer. On Linux, Caddy binds
// each config's listener with SO_REUSEPORT; connections still in the old
// socket's accept queue when a reload closes it are reset by the kernel.
// That is Caddy's (and the kernel's) behaviour, not the store's: such a
// fresh connection is tried up to eight more times, pausing 20 ms more each
// time (a loaded CI machine under -race once reset four attempts in a row
// while one reload finished); a request that was answered, or that failed
// on a reused connection or otherwise, counts as it is.
func getRetryingReset(client *http.Client, url string, resets *atomic.Int64) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		// The connection the request last went out on. The Transport itself
		// sends a GET again on a new connection when a reused one fails
		// before any answer; a reset of that new one was seen (under -race,
		// loaded) as "dial tcp: connect: connection reset by peer" and is a
		// fresh connection's. Hooks run on the Transport's goroutines.
		var reused atomic.Bool
		trace := &httptrace.ClientTrace{
			GotConn:      func(i httptrace.GotConnInfo) { reused.Store(i.Reused) },
			ConnectStart: func(string, string) { reused.Store(false) },
		}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err == nil || reused.Load() || attempt == 8 || !(errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
			return resp, err
		}
		// A retry made at once can land in the same closing socket's
		// queue (seen in CI); a pause lets the reload finish.
		resets.Add(1)
		time.Sleep(time.Duration(attempt+1) * 20 * time.Millisecond)
	}
}

func TestReloadToNewStorageDirClosesOldStore(t *testing.T) {
	oldDir, newDir := t.TempDir(), t.TempDir()
	site := testSite + " {\n\trespond \"ok\"\n}\n"
	startHearth(t, hearthCaddyfile(oldDir, site))
	adminJSONOK(t, http.MethodPost, "/hearth/members", `{"username":"alice","password":"correct horse"}`, http.StatusCreated, nil)

	// While Caddy holds the old directory, nobody else can open it.
	if st, err := storage.Open(oldDir, storage.Options{}); err == nil {
		st.Close()
		t.Fatal("opened the store while Caddy holds it")
	}

	loadCaddyfile(t, hearthCaddyfile(newDir, site))
	var st statusView
	adminJSONOK(t, http.MethodGet, "/hearth/status", "", http.StatusOK, &st)
	if want, _ := filepath.Abs(newDir); st.StorageDir != want {
		t.Fatalf("storage_dir after reload %q, want %q", st.StorageDir, want)
	}
	adminJSONOK(t, http.MethodGet, "/hearth/members/alice", "", http.StatusNotFound, nil)

	old, err := storage.Open(oldDir, storage.Options{})
	if err != nil {
		t.Fatalf("the old store is still locked after the reload: %v", err)
	}
	defer old.Close()
	if _, err := members.Of(old).Member(t.Context(), "alice"); err != nil {
		t.Fatalf("old store lost its member: %v", err)
	}
}
