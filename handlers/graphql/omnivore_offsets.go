package graphql

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// Omnivore's clients page by offset (after "0", "15", "30", …) where the
// store pages by keyset. offsetPager remembers, per member and query, the
// keyset cursor where the last pages ended, so that a sync walking the
// pages in order resumes each page where the previous one stopped instead
// of walking from the start; an offset it has not seen (another node
// served the previous page, or the entry was dropped) is reached by a walk
// of whole pages. A request's walks (its aliases' together) look at no
// more than walkAllowance items, as many as a search may look at (the
// library's search budget): an offset further off is refused as a search
// over its budget is, so that such a page costs what it is priced, one
// search.
type offsetPager struct {
	mu    sync.Mutex
	cache *simplelru.LRU[string, *offsetState]
	// allowance is walkAllowance, lowered by tests.
	allowance int64
}

const (
	// offsetStates bounds the syncs remembered at once.
	offsetStates = 1024
	// offsetCursors bounds the cursors remembered per sync: the next page
	// or two, and a client's retry of the one before.
	offsetCursors = 4
	// offsetStateTTL bounds how long a count is reused, so that totalCount
	// follows the library within minutes.
	offsetStateTTL = 10 * time.Minute
	// walkPage is the page size of a walk to an unknown offset.
	walkPage = 100
	// walkAllowance bounds the items a request walks to reach unknown
	// offsets (the search budget's 100 000 items examined,
	// storage/library/pages.go).
	walkAllowance = 100_000
)

// errWalkTooFar answers a page whose offset is more items away than the
// request may walk. A sync reads its pages in order and resumes each where
// the previous one ended (offsetState.cursors), walking nothing.
var errWalkTooFar = storage.Invalid("this page's offset is more than %d items past the last page this server remembers for the query; ask for the pages in order from the start", walkAllowance)

// takeWalk counts n items walked in the request; false past its allowance.
func (p *offsetPager) takeWalk(ctx context.Context, n int) bool {
	st := stateOf(ctx)
	return st == nil || st.walked.Add(int64(n)) <= p.allowance
}

// walkLeft is how many more items the request may walk.
func (p *offsetPager) walkLeft(ctx context.Context) int64 {
	if st := stateOf(ctx); st != nil {
		return p.allowance - st.walked.Load()
	}
	return p.allowance
}

type offsetState struct {
	mu      sync.Mutex
	made    time.Time
	cursors map[int]string // offset -> keyset cursor of the item before it
	liveEnd int            // offset where the items end (tombstones follow); -1 unknown
	total   int            // items matching; -1 not counted, tooManyToCount past the allowance
}

// tooManyToCount is the total of a query whose items are more than a
// request may walk to count them: its totalCount is null (Omnivore's
// PageInfo.totalCount is nullable, and its apps then page on by
// hasNextPage), remembered as any count is so that the next pages do not
// walk again (when the count had the request's whole allowance: page).
const tooManyToCount = -2

// offsetPage is one page by offset: items, then (for updatesSince) items
// deleted for good.
type offsetPage struct {
	items   []*library.SavedItem
	gone    []*library.Tombstone
	hasNext bool
	total   int
}

func newOffsetPager() *offsetPager {
	c, _ := simplelru.NewLRU[string, *offsetState](offsetStates, nil)
	return &offsetPager{cache: c, allowance: walkAllowance}
}

func (p *offsetPager) state(key string, now time.Time) *offsetState {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.cache.Get(key)
	if !ok || now.Sub(st.made) > offsetStateTTL {
		st = &offsetState{made: now, cursors: map[int]string{}, liveEnd: -1, total: -1}
		p.cache.Add(key, st)
	}
	return st
}

func (st *offsetState) remember(offset int, cursor string) {
	if len(st.cursors) >= offsetCursors {
		low := -1
		for o := range st.cursors {
			if low < 0 || o < low {
				low = o
			}
		}
		delete(st.cursors, low)
	}
	st.cursors[offset] = cursor
}

// page returns size items from offset of the member's items matching f in
// order. key names the query (the same key, the same list). With since
// set, the items deleted for good since then follow the items; without,
// the page carries the number of items matching when count is set (-1
// otherwise, or when they are too many to count).
func (p *offsetPager) page(ctx context.Context, store *storage.Store, memberID, key string, f library.ItemFilter, order sortOrder, offset, size int, since *time.Time, count bool) (*offsetPage, error) {
	st := p.state(memberID+"\x00"+key, storage.Now())
	st.mu.Lock()
	defer st.mu.Unlock()
	lib := library.Of(store)
	req := library.PageRequest{Field: order.Field, Desc: order.Desc}
	out := &offsetPage{total: st.total}

	// The cursor of the item before offset: remembered, or walked to.
	cursor, live := "", true
	if offset > 0 {
		if c, ok := st.cursors[offset]; ok {
			cursor = c
		} else if st.liveEnd >= 0 && offset >= st.liveEnd {
			live = false
		} else if c, total, past, ok, err := seekOffset(ctx, lib, memberID, f, order, offset); err != nil {
			return nil, err
		} else if ok {
			cursor, live = c, !past
			if past {
				st.liveEnd = total
			}
		} else {
			pos, exhausted := 0, false
			for pos < offset && !exhausted {
				req.First, req.After = min(walkPage, offset-pos), cursor
				if !p.takeWalk(ctx, req.First) {
					return nil, errWalkTooFar
				}
				pg, err := lib.SavedItemsPage(ctx, memberID, f, req)
				if err != nil {
					return nil, err
				}
				pos += len(pg.Items)
				if next := pg.NextAfter(); next != "" {
					cursor = next
				}
				if !pg.HasNext {
					st.liveEnd, exhausted = pos, true
				}
			}
			live = !exhausted
		}
	}
	if live {
		// A page a pending emptying of the trash cut short holds fewer
		// items, even none, and says where it stopped: it is read on
		// from there until the page is full, since Omnivore's plugins
		// take the next offset as this one plus the size asked
		// (obsidian-omnivore src/main.ts, `after += size`), so a short
		// page would skip what it left out.
		req.After = cursor
		for len(out.items) < size {
			req.First = size - len(out.items)
			pg, err := lib.SavedItemsPage(ctx, memberID, f, req)
			if err != nil {
				return nil, err
			}
			out.items, out.hasNext = append(out.items, pg.Items...), pg.HasNext
			if next := pg.NextAfter(); next != "" {
				req.After = next
			} else if len(pg.Cursors) > 0 {
				req.After = pg.Cursors[len(pg.Cursors)-1]
			}
			if !pg.HasNext {
				st.liveEnd = offset + len(out.items)
				break
			}
		}
		if req.After != cursor {
			st.remember(offset+len(out.items), req.After)
		}
	}
	if since != nil && st.liveEnd >= 0 && len(out.items) < size {
		skip := offset + len(out.items) - st.liveEnd
		gone, more, err := lib.Tombstones(ctx, memberID, *since, skip, size-len(out.items))
		if err != nil {
			return nil, err
		}
		out.gone, out.hasNext = gone, more
	}
	if since == nil && count && st.total == -1 {
		// Too many to count is remembered only of a count that had the
		// whole allowance: one cut short by the request's walks before it
		// (to this offset, other searches) is tried again by the next.
		whole := p.walkLeft(ctx) >= p.allowance
		n, err := p.countItems(ctx, lib, memberID, f, req)
		if err != nil {
			return nil, err
		}
		if out.total = n; n != tooManyToCount || whole {
			st.total = n
		}
	}
	out.total = max(out.total, -1)
	return out, nil
}

// seekOffset reads the cursor before offset from the store's offsets
// (library.OffsetCursor: the fences every node shares) for a query by
// status alone in the order of createdAt, the plugins' sync; ok is false
// for another query, which walks. The first offset a member asks builds
// the fences (once: one walk of the index keys).
func seekOffset(ctx context.Context, lib library.Store, memberID string, f library.ItemFilter, order sortOrder, offset int) (cursor string, total int, past, ok bool, err error) {
	if order.Field != library.SortCreatedAt || !statusOnly(f) {
		return "", 0, false, false, nil
	}
	for range 2 {
		cursor, total, past, err = lib.OffsetCursor(ctx, memberID, f.Status, order.Desc, offset)
		if !errors.Is(err, library.ErrOffsetsNotReady) {
			return cursor, total, past, err == nil, err
		}
		if err := lib.EnsureOffsets(ctx, memberID); err != nil {
			return "", 0, false, false, err
		}
	}
	return "", 0, false, false, nil // the counts disagree with the keys: walk
}

// countItems counts the member's items matching f: from the store's
// status counts when f filters by status only (the plugins' usual
// queries), else by walking them, within the request's walk allowance
// (tooManyToCount past it).
func (p *offsetPager) countItems(ctx context.Context, lib library.Store, memberID string, f library.ItemFilter, req library.PageRequest) (int, error) {
	if statusOnly(f) {
		n, ok, err := lib.StatusCount(ctx, memberID, f.Status)
		if err != nil || ok {
			return n, err
		}
	}
	n := 0
	req.After = ""
	for {
		left := p.walkLeft(ctx)
		if left <= 0 {
			return tooManyToCount, nil
		}
		req.First = int(min(walkPage, left))
		pg, err := lib.SavedItemsPage(ctx, memberID, f, req)
		if err != nil {
			return 0, err
		}
		p.takeWalk(ctx, len(pg.Items))
		n += len(pg.Items)
		if req.After = pg.NextAfter(); req.After == "" {
			return n, nil
		}
	}
}

// statusOnly reports whether f selects by status alone.
func statusOnly(f library.ItemFilter) bool {
	f.Status = ""
	return f.Type == "" && f.LabelsAll == nil && f.LabelsNot == nil && f.HasHighlights == nil && f.NoLabels == nil &&
		f.SavedFrom == nil && f.SavedTo == nil && f.UpdatedFrom == nil && f.UpdatedTo == nil && f.Site == "" &&
		f.Text == "" && f.ProgressFrom == nil && f.ProgressTo == nil && f.MinutesFrom == nil && f.MinutesTo == nil
}
