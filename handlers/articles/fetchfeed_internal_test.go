package articles

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// While an import's links wait on one host (its first fetch hangs), each
// pass of the feeder reads at most its budget of pending entries, resuming
// where the last stopped, and an article a member saves meanwhile is
// fetched before the passes could have reached its entry.
func TestFetchFeedPassesReadABoundedCount(t *testing.T) {
	const budget, links = 20, 200
	slow, _ := gatedSite(t, func(w http.ResponseWriter, r *http.Request, held func() bool) { held() })
	// The feeder's passes when the saved article's page is asked for: the
	// passes counted when its fetch is done would add those made (one a
	// second, as the import's host waits) while a loaded machine fetches it.
	var feeder atomic.Pointer[fetchQueue]
	var passesAtFetch atomic.Int64
	passesAtFetch.Store(-1)
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if q := feeder.Load(); q != nil {
			passesAtFetch.CompareAndSwap(-1, q.passes.Load())
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><head><title>Saved meanwhile</title></head><body><p>Some text of the article.</p></body></html>")
	}))
	defer fast.Close()

	store := openStore(t)
	m := newAlice(t, store)
	// The queue of this policy first runs when a Service is prepared.
	libraryWorkKind.Of(store).fetches[1].scanBudget = budget
	s := Prepare(store, testOptions())
	defer s.Close()

	importLinks(t, store, m.ID, slow.URL, links)
	s.KickFetches()
	q := s.fetches
	feeder.Store(q)
	for q.passes.Load() < 3 {
		time.Sleep(10 * time.Millisecond)
	}

	// A save of another host, queued after every waiting link.
	mustQueue(t, s, m.ID, fast.URL+"/article")
	for {
		pending, err := library.Of(store).PendingFetchesWhere(t.Context(), links+10, func(p library.PendingFetch) bool { return !p.Import })
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	passes := passesAtFetch.Load()
	if passes < 0 || passes >= links/budget {
		t.Fatalf("the saved article was fetched after %d passes, as the scan reached it, not at once", passes)
	}
	if got := q.maxRead.Load(); got > budget || got == 0 {
		t.Fatalf("a pass read %d pending entries, budget %d (%d waiting)", got, budget, links)
	}
}

// While an import's links wait on one host, the feeder reads them again
// about once per importHostInterval, however often it is kicked meanwhile
// (an import kicks it after each batch): each kick used to start a pass,
// and each pass that found only waiting entries armed a timer of its own,
// so the passes of a second grew with the kicks, each reading up to its
// budget of entries.
func TestFetchFeedWaitsOnceForAHost(t *testing.T) {
	const links, kicks = 50, 12
	slow, _ := gatedSite(t, func(w http.ResponseWriter, r *http.Request, held func() bool) { held() })
	store := openStore(t)
	m := newAlice(t, store)
	s := Prepare(store, testOptions())
	defer s.Close()
	importLinks(t, store, m.ID, slow.URL, links)
	q := s.fetches
	s.KickFetches()
	for q.passes.Load() == 0 { // the first link taken, the others wait
		time.Sleep(5 * time.Millisecond)
	}
	const window = 3 * importHostInterval
	before := q.passes.Load()
	for range kicks { // as an import's batches
		s.KickFetches()
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(window)
	if n := q.passes.Load() - before; n > 2*int64(window/importHostInterval)+2 {
		t.Fatalf("the feeder made %d passes in %v while every link waits on one host, want about one per %v (kicked %d times)", n, window+kicks*20*time.Millisecond, importHostInterval, kicks)
	}
}

// openStore opens a store on disk for one test, without syncing writes.
func openStore(t *testing.T) *storage.Store {
	noSync := false
	store, err := storage.Open(t.TempDir(), storage.Options{SyncWrites: &noSync, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// importLinks writes links pages of base as an import's entries to fetch.
// The job's file is on another node's disk: this node's import runner
// leaves the job alone (otherwise it may fail it, the file being missing,
// before the entries are written).
func importLinks(t *testing.T, store *storage.Store, memberID, base string, links int) {
	job, err := library.Of(store).CreateImportJob(t.Context(), &library.ImportJob{MemberID: memberID, Format: "HEARTH", Staged: "staged-file", Node: "another-node", FetchPrivate: true, Total: links})
	if err != nil {
		t.Fatal(err)
	}
	entries := make([]library.ImportEntry, links)
	for i := range entries {
		entries[i] = library.ImportEntry{Pos: i + 1, Ref: fmt.Sprint(i), Item: &library.ImportItem{URL: fmt.Sprintf("%s/%d", base, i), Title: fmt.Sprint("link ", i), Fetch: true}}
	}
	if _, err := library.Of(store).ImportItems(t.Context(), memberID, job.ID, entries, nil, 0); err != nil {
		t.Fatal(err)
	}
}
