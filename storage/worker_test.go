package storage

import (
	"bytes"
	"slices"
	"strings"
	"sync"
	"testing"
)

// recordingWorker is a Worker of the test that records the core's calls.
type recordingWorker struct {
	mu    sync.Mutex
	calls []string
}

func (w *recordingWorker) note(c string) {
	w.mu.Lock()
	w.calls = append(w.calls, c)
	w.mu.Unlock()
}

func (w *recordingWorker) took() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.calls
	w.calls = nil
	return c
}

func (w *recordingWorker) Start()   { w.note("start") }
func (w *recordingWorker) Look()    { w.note("look") }
func (w *recordingWorker) Hold()    { w.note("hold") }
func (w *recordingWorker) Release() { w.note("release") }
func (w *recordingWorker) Stop()    { w.note("stop") }

var recordingKind = NewWorkerKind(func(s *Store) *recordingWorker { return &recordingWorker{} })

func TestWorkerLifecycle(t *testing.T) {
	dir := t.TempDir()
	st := Prepare(dir, Options{})
	w := recordingKind.Of(st)
	if got := w.took(); len(got) != 0 {
		t.Fatalf("Prepare called %v, want nothing", got)
	}
	if recordingKind.Of(Prepare(t.TempDir(), Options{})) == w {
		t.Fatal("each store must hold its own worker of each kind")
	}
	if err := st.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if got, want := w.took(), []string{"look", "start"}; !slices.Equal(got, want) {
		t.Fatalf("Open called %v, want %v (look at everything in the migration, then start)", got, want)
	}
	{
		var b bytes.Buffer
		if err := st.Backup(&b); err != nil {
			t.Fatal(err)
		}
		if err := st.Restore(&b); err != nil {
			t.Fatal(err)
		}
		if got, want := w.took(), []string{"hold", "release", "look"}; !slices.Equal(got, want) {
			t.Fatalf("Restore called %v, want %v (held during the import, then the migration)", got, want)
		}
		// Input that is not a backup is refused before anything changes.
		if err := st.Restore(strings.NewReader("not a backup")); err == nil {
			t.Fatal("a restore of garbage succeeded")
		}
		if got := w.took(); len(got) != 0 {
			t.Fatalf("a refused Restore called %v, want nothing", got)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if got, want := w.took(), []string{"stop"}; !slices.Equal(got, want) {
		t.Fatalf("Close (twice) called %v, want %v", got, want)
	}
}
