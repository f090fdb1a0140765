package articles

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/importer"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// The fetch queue is a worker of the store: it lives from the store's Open
// to its Close, whatever Services come and go on it. Each test runs on
// Badger and on PostgreSQL.

// heldSite serves article pages; the first request waits until release
// is closed (or the fetch is given up), so a test can act while a fetch is
// under way.
type heldSite struct {
	*httptest.Server
	release chan struct{}
	started chan struct{} // closed when the first request arrives
	mu      sync.Mutex
	hits    map[string]int
	first   sync.Once
}

func newHeldSite(t *testing.T) *heldSite {
	h := &heldSite{release: make(chan struct{}), started: make(chan struct{}), hits: map[string]int{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.hits[r.URL.Path]++
		h.mu.Unlock()
		held := false
		h.first.Do(func() { held = true; close(h.started) })
		if held {
			select {
			case <-h.release:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<html><head><title>Page %s</title></head><body><p>Some text of the article at %s.</p></body></html>", r.URL.Path, r.URL.Path)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *heldSite) hitsOf(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hits[path]
}

// gatedSite is a site whose answers all wait until release is called (or their
// client leaves: held then says false), so that a test can fill the disk
// while fetches are under way. The test's end releases whatever still waits.
func gatedSite(t *testing.T, serve func(w http.ResponseWriter, r *http.Request, held func() bool)) (site *httptest.Server, release func()) {
	gate := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	site = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serve(w, r, func() bool {
			select {
			case <-gate:
				return true
			case <-r.Context().Done():
				return false
			}
		})
	}))
	t.Cleanup(site.Close)
	t.Cleanup(release) // runs first: nothing left waiting when the site closes
	return site, release
}

// workerEngines runs f on a Badger store and on PostgreSQL. reopen gives
// the store that follows the first once it is closed: the same directory
// opened again, or another node of the database.
func workerEngines(t *testing.T, f func(t *testing.T, st *storage.Store, reopen func() *storage.Store)) {
	t.Run("badger", func(t *testing.T) {
		dir, noSync := t.TempDir(), false
		open := func() *storage.Store {
			st, err := storage.Open(dir, storage.Options{SyncWrites: &noSync, GCInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}
		f(t, open(), open)
	})
	t.Run("postgres", func(t *testing.T) {
		a, b := pgNodes.TwoNodes(t)
		f(t, a, func() *storage.Store { return b })
	})
}

// waitFetched waits until item is fetched: no fetch pending and its page's
// title saved.
func waitFetched(t *testing.T, st *storage.Store, memberID, itemID, title string) {
	t.Helper()
	storagetest.Eventually(t, "the article is fetched", func() bool {
		it, err := library.Of(st).SavedItem(t.Context(), memberID, itemID)
		if err != nil {
			t.Fatal(err)
		}
		return it.Title == title
	})
}

// newAlice makes the member alice in st.
func newAlice(t *testing.T, st *storage.Store) *members.Member {
	t.Helper()
	m, err := members.Of(st).CreateMember(t.Context(), "alice", "", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// mustQueue saves rawURL for memberID through s, to be fetched, and
// returns the item's id.
func mustQueue(t *testing.T, s *Service, memberID, rawURL string) string {
	t.Helper()
	id, err := s.QueueURL(t.Context(), memberID, rawURL, Placement{})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// heldFetch prepares a Service on st and queues alice's save of a page of
// site that holds its answer until site.release is closed; it returns once
// the fetch has started. The Service is closed when the test ends.
func heldFetch(t *testing.T, st *storage.Store) (site *heldSite, m *members.Member, s *Service, id string) {
	t.Helper()
	site = newHeldSite(t)
	m = newAlice(t, st)
	s = Prepare(st, testOptions())
	t.Cleanup(func() { s.Close() })
	id = mustQueue(t, s, m.ID, site.URL+"/held")
	<-site.started
	return site, m, s, id
}

// A reload prepares the next Service on the open store before the last one
// closes: the fetch under way goes on (the page is fetched once), and
// what is queued meanwhile is fetched once, by the one queue.
func TestReloadKeepsOneFetchQueue(t *testing.T) {
	workerEngines(t, func(t *testing.T, st *storage.Store, _ func() *storage.Store) {
		site, m, old, held := heldFetch(t, st)

		next := Prepare(st, testOptions())
		defer next.Close()
		during := mustQueue(t, next, m.ID, site.URL+"/during")
		waitFetched(t, st, m.ID, during, "Page /during")
		old.Close()
		close(site.release)
		waitFetched(t, st, m.ID, held, "Page /held")
		after := mustQueue(t, next, m.ID, site.URL+"/after")
		waitFetched(t, st, m.ID, after, "Page /after")
		for _, p := range []string{"/held", "/during", "/after"} {
			if n := site.hitsOf(p); n != 1 {
				t.Errorf("%s fetched %d times, want 1", p, n)
			}
		}
	})
}

// Closing the store stops a fetch under way; it stays pending, and the
// store opened next (with its Service) fetches it.
func TestFetchCutShortByCloseResumes(t *testing.T) {
	workerEngines(t, func(t *testing.T, st *storage.Store, reopen func() *storage.Store) {
		site, m, _, id := heldFetch(t, st)
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}

		st = reopen()
		p, err := library.Of(st).PendingFetches(t.Context(), 10, true, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(p) != 1 || p[0].ItemID != id {
			t.Fatalf("pending after the close: %+v, want the item cut short", p)
		}
		next := Prepare(st, testOptions())
		defer next.Close()
		waitFetched(t, st, m.ID, id, "Page /held")
		if n := site.hitsOf("/held"); n != 2 {
			t.Errorf("/held fetched %d times, want 2 (cut short, then whole)", n)
		}
	})
}

// A reload while an import runs: the import goes on with the next Service's
// runner and saves every entry once.
func TestReloadMovesAnImportToTheNextServer(t *testing.T) {
	workerEngines(t, func(t *testing.T, st *storage.Store, _ func() *storage.Store) {
		m := newAlice(t, st)
		const n = 3000
		var b strings.Builder
		b.WriteString("title,url,time_added,cursor,tags,status\n")
		for i := range n {
			fmt.Fprintf(&b, "Article %d,https://site%d.example/articles/%d,%d,c%d,reading,unread\n", i, i%50, i, 1600000000+i, i)
		}
		opts := testOptions()
		opts.NoImportFetch, opts.ImportDir = true, t.TempDir()
		old := Prepare(st, opts)
		defer old.Close()
		next := Prepare(st, opts)
		defer next.Close()
		staged, err := next.Importer().Stage(strings.NewReader(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		job, err := next.Importer().Start(t.Context(), m.ID, staged, "part_000000.csv", importer.Auto, nil)
		if err != nil {
			t.Fatal(err)
		}
		old.Close()
		var j *library.ImportJob
		storagetest.Eventually(t, "the import finishes", func() bool {
			j, err = library.Of(st).ImportJob(t.Context(), m.ID, job.ID)
			if err != nil {
				t.Fatal(err)
			}
			return j.Finished()
		})
		if j.State != library.ImportDone {
			t.Fatalf("the import: %+v", j)
		}
		saved := 0
		if err := library.Of(st).ForEachSavedItem(t.Context(), m.ID, func(*library.SavedItem, *library.ItemContent) error {
			saved++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if saved != n {
			t.Fatalf("%d items saved, want %d", saved, n)
		}
	})
}
