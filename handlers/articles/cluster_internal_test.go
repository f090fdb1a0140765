package articles

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/safefetch"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// The article fetch queue with several nodes on one PostgreSQL database:
// two stores on one database stand for two Caddy processes, each with its
// Service.

// pgNodes is this package's PostgreSQL server for two nodes of one site
// (each package its own port, so packages may run at once).
var pgNodes = storagetest.NewPostgres(15439)

func TestMain(m *testing.M) {
	code := m.Run()
	pgNodes.Stop()
	os.Exit(code)
}

// Articles saved through the node that does not work the queue are fetched
// once each, by the node that does; when it stops, the other takes the
// queue over.
func TestFetchQueueWorkedByOneNode(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	pages := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<html><head><title>Page %s</title></head><body><p>Some text of the article at %s.</p></body></html>", r.URL.Path, r.URL.Path)
	}))
	defer pages.Close()
	sa, sb := pgNodes.TwoNodes(t)
	m := newAlice(t, sa)
	a := Prepare(sa, testOptions())
	defer a.Close()
	b := Prepare(sb, testOptions())
	defer b.Close()
	storagetest.Eventually(t, "one node works the queue", func() bool { return a.fetches.leading.Load() != b.fetches.leading.Load() })
	leader, other := a, b
	if b.fetches.leading.Load() {
		leader, other = b, a
	}
	pending := func() int {
		p, err := library.Of(sa).PendingFetches(t.Context(), 100, true, true)
		if err != nil {
			t.Fatal(err)
		}
		return len(p)
	}

	const n = 8
	for i := range n {
		mustQueue(t, other, m.ID, fmt.Sprintf("%s/%d", pages.URL, i))
	}
	storagetest.Eventually(t, "every article is fetched", func() bool { return pending() == 0 })
	mu.Lock()
	for i := range n {
		if h := hits[fmt.Sprintf("/%d", i)]; h != 1 {
			t.Errorf("page %d fetched %d times, want 1", i, h)
		}
	}
	mu.Unlock()
	if l := other.fetches.leads.Load(); l != 0 {
		t.Errorf("the other node worked the queue %d times", l)
	}

	leader.Close()
	storagetest.Eventually(t, "the other node works the queue", func() bool { return other.fetches.leading.Load() })
	mustQueue(t, other, m.ID, pages.URL+"/after")
	storagetest.Eventually(t, "the article saved after the fail-over is fetched", func() bool { return pending() == 0 })
	mu.Lock()
	defer mu.Unlock()
	if h := hits["/after"]; h != 1 {
		t.Errorf("the page saved after the fail-over was fetched %d times, want 1", h)
	}
}

// testOptions are a site's settings that fetch from the tests' own
// servers (loopback addresses), with hearth_graphql's limits.
func testOptions() Options {
	return Options{
		Fetcher:    safefetch.New(safefetch.Options{AllowPrivate: true, Timeout: 15 * time.Second, MaxBytes: 5 << 20, FollowRedirects: true}),
		ImageQuota: 256 << 20,
	}
}
