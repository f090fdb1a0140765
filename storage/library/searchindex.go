package library

import (
	"context"
	"encoding/binary"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library/textindex"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// Free text matches as Inboxt's does: a case-insensitive substring of an
// item's title, description or content text. Each member's library has a
// text index (package textindex) under u/<member>/gql/, whose documents
// are the member's items: writeItem queues an item whose text changes,
// removeItem takes it out, and the store's indexer (a Worker) indexes the
// queue in the background. A search reads the index's candidates and
// verifies each on the item's text, folded as it is read (itemTexts):
// the answer is exact, the index only narrows it. The index keeps no copy
// of the text: verifying on the content record (its HTML passed over, the
// text unescaped and folded, appendContentTextFolded) costs about what
// decompressing a folded copy did (bench/README.md).

// memberIndex is the text index of a member's library.
func memberIndex(memberID string) textindex.Index {
	return textindex.At(storage.Key("u", memberID, "gql", ""))
}

// FoldText returns s case-folded as search compares it.
func FoldText(s string) string { return textindex.Fold(s) }

// itemTexts gives the text index the texts of a member's items.
type itemTexts struct{ memberID string }

// Text reads the folded text of item id and its order value
// (textindex.Texts).
func (x itemTexts) Text(tx *storage.Tx, id string, t *textindex.Text) (bool, error) {
	var it SavedItem
	if err := getItem(tx, itemKey(x.memberID, id), &it); errors.Is(err, storage.ErrNotFound) {
		return false, nil // deleted since
	} else if err != nil {
		return false, err
	}
	err := readItemText(tx, t, &it, nil)
	t.SetOrder(textOrder(&it))
	return true, err
}

// Order reads the order value of item id (textindex.Texts).
func (x itemTexts) Order(tx *storage.Tx, id string) (uint64, bool, error) {
	var it SavedItem
	if err := getItem(tx, itemKey(x.memberID, id), &it); errors.Is(err, storage.ErrNotFound) {
		return 0, false, nil // deleted since
	} else if err != nil {
		return 0, false, err
	}
	return textOrder(&it), true, nil
}

// textOrder is an item's order value in the text index: its createdAt as
// the index of the order of creation encodes it (encTime), which is set
// when the item is created and never changes, so that a word's page in
// that order can read the index's candidates newest first
// (textOrderedPage).
func textOrder(it *SavedItem) uint64 {
	return binary.BigEndian.Uint64(encTime(nil, it.CreatedAt))
}

// readItemText sets t to the folded title, description and content text
// of it, reading its content record (none: no content text). The content
// is folded only when the title and description do not hold needle (nil:
// always).
func readItemText(tx *storage.Tx, t *textindex.Text, it *SavedItem, needle []byte) error {
	t.Reset()
	t.AddField(it.Title)
	t.AddField(it.Description)
	if needle != nil && t.Contains(needle) {
		return nil
	}
	v, err := tx.Get(contentKey(it.MemberID, it.ID))
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return t.AddFolded(func(b []byte) ([]byte, error) { return appendContentTextFolded(b, v) })
}

// textBufs holds buffers for folded texts (a search verifies many).
var textBufs = sync.Pool{New: func() any { return new(textindex.Text) }}

// itemTextContains reports whether the title, description or content text
// of it contains the folded needle (folded as it is read: the index keeps
// no copy of the text).
func itemTextContains(tx *storage.Tx, it *SavedItem, needle []byte) (bool, error) {
	t := textBufs.Get().(*textindex.Text)
	defer textBufs.Put(t)
	if err := readItemText(tx, t, it, needle); err != nil {
		return false, err
	}
	return t.Contains(needle), nil
}

// newStoreState makes a store's library state with defaultOptions
// (stateKind): the indexer reads the options each time it waits, so that
// options set before the store opens hold from its first batch. Its work
// for a member also carries on an emptying of the member's trash that a
// request left (trash.go), before the index: the indexer already visits
// every member when the store opens or is restored, waits while the disk
// is full, and pauses around a restore, which is what that job needs.
func newStoreState(st *storage.Store) *storeState {
	ss := &storeState{opts: defaultOptions()}
	ss.Indexer = textindex.NewIndexer(st, textindex.IndexerConfig{
		All: func() ([]string, error) {
			ms, err := members.Of(st).Members(st.Background())
			ids := make([]string, len(ms))
			for i, m := range ms {
				ids[i] = m.ID
			}
			return ids, err
		},
		Work: func(memberID string) error {
			// Indexed whatever becomes of the emptying: one that fails
			// must not stop the member's search.
			err := Of(st).finishEmptying(memberID, ss)
			return errors.Join(err, Of(st).indexMember(memberID, ss))
		},
		Delay: func() time.Duration { return ss.opts.textIndexDelay },
	})
	return ss
}

// textIndex is s's search indexer.
func (s Store) textIndex() *textindex.Indexer { return s.state().Indexer }

// maxTextBacklog bounds the texts waiting for a member's search index. A
// writer whose commit leaves more (an import outrunning the indexer) waits
// until the indexer has brought them under it (waitForTextBacklog), so
// that whenever the store is opened again — a restart, a crash, a restore
// of a backup — a search verifies at most this many waiting texts itself:
// a rare word is answered from the first request, never too broad. (A store
// written before the index still builds it in the background.) An import's
// time until indexed is the same with 500 to 4,000 (bench/README.md), while
// a rare word's first search with 2,000 articles waiting took twice as long
// as with 1,000.
const maxTextBacklog = 1000

// textBacklogCheckEvery is how often a writer reads the backlog: after the
// commit that queued a text at a multiple of it (setItemText), not after
// every save (a read transaction each). That writer waits
// until the backlog is textBacklogCheckEvery under maxTextBacklog, so the
// writers after it, which do not look, stay under maxTextBacklog.
const textBacklogCheckEvery = 64

// textBacklogWait bounds one writer's wait: an indexer that fails (it logs
// why) lets writers go on.
const textBacklogWait = 30 * time.Second

// waitForTextBacklog returns once memberID's waiting texts are at most
// maxTextBacklog-textBacklogCheckEvery, textBacklogWait has passed, ctx has
// ended or the store is closing. The store's own work (ctx is its Background: the indexer's
// catch-up, migrations, fetches) does not wait: the indexer would wait on
// itself.
func (s Store) waitForTextBacklog(ctx context.Context, memberID string) {
	if ctx == s.st.Background() || s.state().indexPaused.Load() {
		return
	}
	deadline := time.Now().Add(textBacklogWait)
	for {
		indexed := textindex.Indexed() // before the read: a batch committed after it wakes this wait
		var n uint64
		if err := s.st.View(ctx, func(tx *storage.Tx) error {
			var err error
			n, err = memberIndex(memberID).Waiting(tx)
			return err
		}); err != nil || n <= maxTextBacklog-textBacklogCheckEvery || time.Now().After(deadline) {
			return // a failed read: the commit is done, the wait is only a brake
		}
		if ix := s.textIndex(); ix.WaitsForStore() {
			// The store refused the indexer's writes (a full disk) and
			// has just taken this writer's: the indexer goes on now
			// rather than at the end of its wait, and this writer does
			// not wait for it (it may be refused again).
			ix.RetryRefused()
			return
		}
		s.textIndex().Urge(memberID)
		select {
		case <-ctx.Done():
			return
		case <-s.st.Background().Done():
			return
		case <-indexed:
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// indexMember builds what a member's items lack, then indexes their
// pending texts, until the indexer of ss (s's state, handed over by the
// indexer that ss makes) is stopping.
func (s Store) indexMember(memberID string, ss *storeState) error {
	if err := s.catchUpSearchKeys(memberID, ss.Stopping, ss.opts.recountChunkSize); err != nil {
		return err
	}
	return memberIndex(memberID).Build(s.st, itemTexts{memberID}, ss.Stopping, ss.indexPaused.Load)
}

// SearchIndexBacklog reports the work the search indexer has left for a
// member: texts pending, plus one for a build or merge not finished. 0
// means searches read only finished segments.
func (s Store) SearchIndexBacklog(ctx context.Context, memberID string) (int, error) {
	n := 0
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		n = 0
		if v, err := searchVersion(tx, memberID); err != nil {
			return err
		} else if v != searchIndexVersion {
			n++
		}
		b, err := memberIndex(memberID).Backlog(tx)
		n += b
		return err
	})
	return n, err
}

// textCandidates returns the ids of the member's items that may contain
// the folded needle (pending items included), or ok false when the index
// cannot tell (not built, needle shorter than 3 bytes, more indexed
// candidates than limit, or more pending items than a page may verify:
// until the indexer has caught up with a backlog, a search reads the
// pending items one by one rather than every item); then perhaps a filter
// of the candidates (textindex.Index.Lookup), which the match of each item
// consults before it reads the item's text.
func textCandidates(tx *storage.Tx, memberID string, needle []byte, limit int) (ids []string, ok bool, filter *textindex.Filter, err error) {
	if len(needle) < 3 {
		return nil, false, nil, nil
	}
	if ready, err := searchReady(tx, memberID); err != nil || !ready {
		return nil, false, nil, err
	}
	return memberIndex(memberID).Lookup(tx, needle, limit, maxVerified)
}

// wordCache keeps, by member and needle, what a word search read of the
// text index and which items' texts it found to hold the needle
// (wordResult), against the index's state it read them in
// (textindex.Index.State): a search that finds the same state — on any
// node, the state is read from the store — takes the candidates and those
// verdicts from it, reading the items but not their texts. Its prefix is no
// record's: the cache is emptied only when every record cache is (a
// restore, notifications missed on a shared engine), and an entry read
// before such a drop is never added after it.
var wordCache = storage.NewCacheKind[wordResult](storage.Key("\x00library", "words", ""))

// wordResult is what word searches read in one index state: the index's
// candidates for the limit (ok false: the index could not narrow the
// needle to few; filtered: it answered with a textindex.Filter, read again
// by each search, the entry keeping only verdicts) and, for the items met
// (ascending), the verdict on their text (verdict).
type wordResult struct {
	state    string
	limit    int
	ids      []string
	ok       bool
	filtered bool
	// ordered: only verdicts, of a first page read in the order of
	// creation (textOrderedPage), which did not read the index's answer:
	// the other plans read it (and replace the entry).
	ordered  bool
	verified []uint64
	verdicts []verdict
}

// verdict is what a search found of an item's text: read and without the
// needle, read and with it, or passed over by the index's filter (not
// read, and not counted as read by the search budget).
type verdict uint8

const (
	verdictLacks verdict = iota
	verdictHolds
	verdictFiltered
)

// Bounds of an entry of wordCache (which holds at most storage's entries
// of a cache kind): its needle, its candidates and its verdicts (enough
// for a page of a word in one item in fifteen, the items walked before
// its fiftieth), under 10 KB in all.
const (
	maxCachedNeedle   = 64
	maxCachedIDs      = 64
	maxCachedVerdicts = 1000
)

// wordLookup is a word search's use of wordCache: the cache, its
// generation read before the search's transaction began, the result found
// or read, with fresh telling that the cache lacks it, and the verdicts
// the search added (both added by done).
type wordLookup struct {
	cache *storage.RecordCache[wordResult]
	gen   uint64
	key   string
	cur   *wordResult
	fresh bool
	added map[uint64]verdict
	// limit, when not 0, is the candidates' limit of a cached result
	// whose filter filterFor is still to read.
	limit int
}

// textCandidates is textCandidates through the search's wordCache.
func (w *wordLookup) textCandidates(q *pageQuery, limit int) (ids []string, ok bool, filter *textindex.Filter, err error) {
	needle := q.m.needle
	if w == nil || len(needle) < 3 || len(needle) > maxCachedNeedle {
		return textCandidates(q.tx, q.memberID, needle, limit)
	}
	if ready, err := searchReady(q.tx, q.memberID); err != nil || !ready {
		return nil, false, nil, err
	}
	state, err := memberIndex(q.memberID).State(q.tx)
	if err != nil {
		return nil, false, nil, err
	}
	w.key = q.memberID + "\x00" + string(needle)
	if r := w.cache.Get(w.key); r != nil && r.state == string(state) && r.limit == limit && !r.ordered {
		// A filter is not kept (a bit a document, too large to keep
		// thousands of): the match reads it again at the first item the
		// verdicts do not tell of (filterFor), which a page the verdicts
		// cover never meets.
		w.cur, w.limit = r, limit
		return r.ids, r.ok, nil, nil
	}
	ids, ok, filter, err = memberIndex(q.memberID).Lookup(q.tx, needle, limit, maxVerified)
	switch {
	case err != nil:
	case filter != nil || len(ids) <= maxCachedIDs:
		w.cur = &wordResult{state: string(state), limit: limit, ids: ids, ok: ok, filtered: filter != nil}
		w.fresh = true
	}
	return ids, ok, filter, err
}

// orderedStart prepares w for a first page textOrderedPage reads: false
// when the cache holds the index's answer for its state and limit (the
// page is read through it instead, by the planner's plans); else the
// verdicts the cache holds are used, and those the page finds kept.
func (w *wordLookup) orderedStart(q *pageQuery, limit int) (bool, error) {
	if w == nil || len(q.m.needle) > maxCachedNeedle {
		return true, nil
	}
	state, err := memberIndex(q.memberID).State(q.tx)
	if err != nil {
		return false, err
	}
	w.key = q.memberID + "\x00" + string(q.m.needle)
	if r := w.cache.Get(w.key); r != nil && r.state == string(state) {
		if !r.ordered && r.limit == limit {
			return false, nil
		}
		if r.ordered {
			w.cur = r
			return true, nil
		}
	}
	w.cur, w.fresh = &wordResult{state: string(state), limit: limit, ordered: true}, true
	return true, nil
}

// orderedDone ends w's part in a page textOrderedPage read: when the page
// read every candidate of the index (complete: ids, few enough to keep),
// the entry becomes the index's answer, as textCandidates would have kept
// it; else it keeps only verdicts (ordered). Abandoned (the page went to
// the planner's plans), w forgets it.
func (w *wordLookup) orderedDone(ids []string, complete, abandoned bool) {
	switch {
	case w == nil || w.cur == nil:
	case abandoned:
		w.cur, w.fresh, w.added = nil, false, nil
	case complete:
		r := *w.cur // perhaps the cache's: copied
		r.ids, r.ok, r.ordered = ids, true, false
		w.cur, w.fresh = &r, true
	}
}

// filterFor returns the filter of the cached result's needle, read
// again in tx (the same index state, which gives the same filter), when
// the result had one, else nil.
func (w *wordLookup) filterFor(tx *storage.Tx, memberID string, needle []byte) (*textindex.Filter, error) {
	if w == nil || w.cur == nil || !w.cur.filtered || w.fresh || w.limit == 0 {
		return nil, nil
	}
	w.limit = 0 // read once
	_, _, filter, err := memberIndex(memberID).Lookup(tx, needle, w.cur.limit, maxVerified)
	return filter, err
}

// known returns the verdict on item id's text, if the result has one.
func (w *wordLookup) known(id uint64) (v verdict, ok bool) {
	if w == nil || w.cur == nil {
		return 0, false
	}
	if i, found := slices.BinarySearch(w.cur.verified, id); found {
		return w.cur.verdicts[i], true
	}
	v, ok = w.added[id]
	return v, ok
}

// note records the verdict on item id's text, while the result holds
// fewer than maxCachedVerdicts.
func (w *wordLookup) note(id uint64, v verdict) {
	if w == nil || w.cur == nil || len(w.cur.verified)+len(w.added) >= maxCachedVerdicts {
		return
	}
	if w.added == nil {
		w.added = map[uint64]verdict{}
	}
	w.added[id] = v
}

// done adds the result to the cache with the verdicts the search added,
// when the cache lacks some of it, once the search's transaction has read
// it all. (A result found in the cache is shared: it is copied.)
func (w *wordLookup) done() {
	if w == nil || w.cur == nil || (!w.fresh && len(w.added) == 0) {
		return
	}
	r := *w.cur
	if len(w.added) > 0 {
		r.verified = slices.AppendSeq(slices.Clone(r.verified), maps.Keys(w.added))
		slices.Sort(r.verified)
		r.verdicts = make([]verdict, len(r.verified))
		for i, id := range r.verified {
			if v, ok := w.added[id]; ok {
				r.verdicts[i] = v
			} else {
				j, _ := slices.BinarySearch(w.cur.verified, id)
				r.verdicts[i] = w.cur.verdicts[j]
			}
		}
	}
	w.cache.Add(w.gen, w.key, &r)
}
