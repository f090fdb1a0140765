package caddymodule

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// While clients register applications (writes) and try client
// credentials (reads), Caddy reloads 10 times between two storage_dirs and
// the admin API restores a backup: every answer is one the API gives
// anyway (200, 401, 429) or a clean 503 with Retry-After (the store closed
// under a request of the old config, or a restore refusing writes); never
// a 500, a panic or a broken connection. Earlier versions gave "DB Closed" panics
// and 500s there; this test has not reproduced them without the store's
// gate (storage/gate.go; TestClosedStoreAnswersErrClosed covers the store
// closing under an operation), so it guards the answers, not the cause.
// TestReloadChangingStorageDirDrivesEveryService drives every service (and
// their background work) the same way and did find 500s and work running
// on a closed store.
func TestReloadChangingStorageDirWhileRequestsFlow(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	// A short grace period: the old config's requests still running when
	// it ends meet the old store closing (Caddy closes hijacked
	// connections, such as the directory's relay websockets, without
	// waiting for them either).
	caddyfile := func(dir string) string {
		return testCaddyfile("grace_period 1ms", fmt.Sprintf("storage_dir %q", dir), testSite+` {
	hearth_oauth
	respond "site"
}
`)
	}
	startHearth(t, caddyfile(dirA))

	var stop atomic.Bool
	var requests, unavailable, resets atomic.Int64
	var failures sync.Map // first answer of each kind that is a failure
	var failed atomic.Int64
	fail := func(kind string) {
		failed.Add(1)
		failures.LoadOrStore(kind, true)
	}
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{}
			for i := 0; !stop.Load(); i++ {
				var req *http.Request
				if (i+c)%2 == 0 {
					req, _ = http.NewRequest(http.MethodPost, testSite+"/api/v1/apps",
						strings.NewReader(url.Values{"client_name": {"reload test"}, "redirect_uris": {"urn:ietf:wg:oauth:2.0:oob"}, "scopes": {"read"}}.Encode()))
				} else {
					req, _ = http.NewRequest(http.MethodPost, testSite+"/oauth/token",
						strings.NewReader(url.Values{"grant_type": {"client_credentials"}, "client_id": {"nobody"}, "client_secret": {"nothing"}}.Encode()))
				}
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				resp, err := client.Do(req)
				if err != nil && (strings.Contains(err.Error(), "connection reset") || strings.HasSuffix(err.Error(), "EOF") ||
					strings.Contains(err.Error(), "server closed idle connection")) {
					// A fresh connection in the old listener's queue (see
					// getRetryingReset), or a kept-alive one the old
					// server closed as it shut down: the request was never
					// read (Go's client retries such requests when they
					// are idempotent).
					resets.Add(1)
					continue
				}
				requests.Add(1)
				if err != nil {
					fail(err.Error())
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK, http.StatusUnauthorized, http.StatusTooManyRequests:
				case http.StatusServiceUnavailable:
					unavailable.Add(1)
					if resp.Header.Get("Retry-After") == "" {
						fail("503 without Retry-After: " + string(b))
					}
				default:
					fail(fmt.Sprintf("%s: HTTP %d: %.200s", req.URL.Path, resp.StatusCode, b))
				}
			}
		}()
	}
	for i := 1; i <= 10; i++ {
		dir := dirA
		if i%2 == 1 {
			dir = dirB
		}
		loadCaddyfile(t, caddyfile(dir))
		awaitAnswers(t, &requests, 4, fmt.Sprintf("reload %d", i))
	}
	// And a restore while they run.
	status, backup := adminDo(t, http.MethodGet, "/hearth/backup", "")
	if status != http.StatusOK {
		t.Fatalf("backup: HTTP %d", status)
	}
	for range 3 {
		req, _ := http.NewRequest(http.MethodPost, "http://"+testAdmin+"/hearth/restore", strings.NewReader(string(backup)))
		resp, b := send(t, req)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("restore: HTTP %d: %s", resp.StatusCode, b)
		}
		awaitAnswers(t, &requests, 4, "a restore")
	}
	stop.Store(true)
	wg.Wait()
	if n := failed.Load(); n > 0 {
		var kinds []string
		failures.Range(func(k, _ any) bool { kinds = append(kinds, k.(string)); return len(kinds) < 5 })
		t.Fatalf("%d of %d answers failed; kinds: %q", n, requests.Load(), kinds)
	}
	t.Logf("%d requests, %d clean 503s, %d fresh connections reset, during 10 reloads and 3 restores", requests.Load(), unavailable.Load(), resets.Load())
}

// awaitAnswers waits until the clients counting in answered have had n more
// answers, so that requests really run between the steps of a test that
// checks what they get. On a loaded machine the clients may wait a while for
// a core; the bound is only a backstop against a server that stopped
// answering.
func awaitAnswers(t *testing.T, answered *atomic.Int64, n int64, after string) {
	t.Helper()
	want := answered.Load() + n
	storagetest.Eventually(t, fmt.Sprintf("%d answers to the clients after %s", n, after), func() bool { return answered.Load() >= want })
}
