package importer

import (
	"context"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/library"
)

// While imports run, the Go runtime's soft memory limit is lowered, unless
// the environment sets one (GOMEMLIMIT): an import allocates fast (Badger's
// memtables, the table builders of their flushes, the batches), and the
// collector, left to its default, lets the heap grow to twice what it found
// live before collecting again, so the import's peak is mostly garbage.
// Without GOMEMLIMIT the limit is none (math.MaxInt64) or, in Caddy's
// command, 90 % of the machine's or the container's memory (automemlimit),
// far above an import's peak. The limit makes the collector run sooner: the
// lower of that limit and max(importMemoryFloor, L + max(importMemoryHeadroom,
// L/4)), where L is the heap the last collection found live, set again after
// each batch as L grows. So the collector runs about once per
// importMemoryHeadroom allocated on a small heap (more often than by
// default: an import takes longer on a busy machine, bench/README.md,
// "Imports"), at most about four times as often as by default on a large
// one (a large library's or import's live heap does not make it run
// continuously; past the limit, Go caps the collector's share of the CPU).
// An import ends when the search indexer has caught up with the texts its
// job wrote (up to a thousand wait for it when the job's end is written,
// indexed in the second after): that catch-up allocates as fast as the
// job, and restored at the job's end, the limit let the heap grow to twice
// its live size then, at the moment Badger's tables of the import are all
// mapped: the import's peak (bench/README.md, "Imports"). When the last
// running import ends, the limit before the first one is restored, unless
// something else changed it meanwhile (theirs stands).
// docs/operations.md, "Memory on a small machine".
const (
	importMemoryFloor    = 48 << 20
	importMemoryHeadroom = 16 << 20
	// indexedPoll is how often the end of an import reads the indexer's
	// backlog; indexedWait bounds that wait (an indexer that fails, or
	// builds a large library's index for the first time, leaves the
	// limit to the process sooner).
	indexedPoll = 50 * time.Millisecond
	indexedWait = 30 * time.Second
)

var importMemory importMemoryState

type importMemoryState struct {
	mu      sync.Mutex
	running int   // imports running in this process
	ours    bool  // the limit is the one set below
	prev    int64 // the limit before the first running import (ours)
	set     int64 // the limit set last
}

// beginImportMemory is called when an import starts running in this
// process; endImportMemory when it stops.
func beginImportMemory() {
	m := &importMemory
	m.mu.Lock()
	defer m.mu.Unlock()
	m.running++
	if m.running == 1 {
		if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
			m.ours, m.prev = true, debug.SetMemoryLimit(-1)
		}
	}
	m.adjustLocked()
}

// awaitIndexed returns once the search indexer has no work left for
// memberID (library.Store.SearchIndexBacklog), ctx has ended or
// indexedWait has passed, setting the import's limit again meanwhile as
// after a batch.
func (r *Runner) awaitIndexed(ctx context.Context, memberID string) {
	deadline := time.Now().Add(indexedWait)
	t := time.NewTicker(indexedPoll)
	defer t.Stop()
	for time.Now().Before(deadline) {
		n, err := library.Of(r.store).SearchIndexBacklog(ctx, memberID)
		if err != nil || n == 0 {
			return
		}
		adjustImportMemory()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// adjustImportMemory raises the limit to the live heap's growth (after each
// batch).
func adjustImportMemory() {
	m := &importMemory
	m.mu.Lock()
	defer m.mu.Unlock()
	m.adjustLocked()
}

func endImportMemory() {
	m := &importMemory
	m.mu.Lock()
	defer m.mu.Unlock()
	m.running--
	if m.running == 0 && m.ours {
		if debug.SetMemoryLimit(-1) == m.set {
			debug.SetMemoryLimit(m.prev)
		}
		m.ours, m.set = false, 0
	}
}

// adjustLocked sets the limit from the live heap, unless it is not ours or
// something else changed it since it was set (then it is left alone, and
// not restored).
func (m *importMemoryState) adjustLocked() {
	if !m.ours {
		return
	}
	if m.set != 0 && debug.SetMemoryLimit(-1) != m.set {
		m.ours, m.set = false, 0
		return
	}
	live := liveHeap()
	m.set = min(m.prev, max(importMemoryFloor, live+max(importMemoryHeadroom, live/4)))
	debug.SetMemoryLimit(m.set)
}

// liveHeap is the heap the last collection found live (0 before the
// first).
func liveHeap() int64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(min(s[0].Value.Uint64(), math.MaxInt64/2))
}
