package library

import (
	"context"
	"errors"

	"github.com/hearthkit/caddy-hearth/storage"
)

// A member's labels and saved queries are read on every page of the
// library (its menu) and by every label: search; each read is a prefix
// scan and a JSON decode of each record. listsCache keeps them by member
// with the value of the member's lists version (listsVersionKey), which
// every write of a label or saved query record sets to a new id
// (listsChanged): a read that finds the same version — on any node, it is
// read from the store — takes the lists from the cache, one point read in
// place of two scans. Its prefix is no record's: the cache is emptied only
// when every record cache is (a restore, notifications missed on a shared
// engine), and lists read before such a drop are never added after it.
var listsCache = storage.NewCacheKind[memberLists](storage.Key("\x00library", "lists", ""))

// memberLists are a member's labels and saved queries in their order, as
// read at version.
type memberLists struct {
	version string
	labels  []*Label
	queries []*SavedQuery
}

// maxCachedListBytes bounds the lists listsCache keeps of one member
// (about: their text), so that the cache holds at most a few tens of
// megabytes; a member with more is read from the store each time.
const maxCachedListBytes = 8 << 10

// listsVersionKey holds the version of the member's labels and saved
// queries (absent until the first write that sets it).
func listsVersionKey(memberID string) []byte { return storage.Key("u", memberID, "gql", "lv") }

// listsChanged gives the member's lists a new version, in the transaction
// that writes a label or saved query record.
func listsChanged(tx *storage.Tx, memberID string) error {
	id, err := tx.NewID()
	if err != nil {
		return err
	}
	return tx.Put(listsVersionKey(memberID), []byte(id), 0)
}

// cachedLists returns the member's lists read in tx, from c when it holds
// those of the version tx sees, and whether they were read from the store
// (fresh). The lists are shared: the caller copies what it hands out.
func cachedLists(tx *storage.Tx, c *storage.RecordCache[memberLists], memberID string) (_ *memberLists, fresh bool, err error) {
	v, err := tx.Get(listsVersionKey(memberID))
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return nil, false, err
	}
	if r := c.Get(memberID); r != nil && r.version == string(v) {
		return r, false, nil
	}
	out := &memberLists{version: string(v)}
	if out.labels, err = labels(tx, memberID); err != nil {
		return nil, false, err
	}
	if out.queries, err = savedQueries(tx, memberID); err != nil {
		return nil, false, err
	}
	return out, true, nil
}

// size is about the bytes the lists hold.
func (l *memberLists) size() int {
	n := len(l.version)
	for _, x := range l.labels {
		n += 64 + len(x.ID) + len(x.Name) + len(x.Color)
	}
	for _, x := range l.queries {
		n += 64 + len(x.ID) + len(x.Name) + len(x.Query)
	}
	return n
}

// lists reads the member's lists through listsCache.
func (s Store) lists(ctx context.Context, memberID string) (*memberLists, error) {
	l := newListsLookup(s.st) // before the transaction
	var out *memberLists
	err := s.st.View(ctx, func(tx *storage.Tx) (err error) {
		out, err = l.read(tx, memberID)
		return err
	})
	if err != nil {
		return nil, err
	}
	l.done(memberID)
	return out, nil
}

// listsLookup is one transaction's use of listsCache: the cache, its
// generation read before the transaction began, and the lists the
// transaction read from the store (added by done).
type listsLookup struct {
	cache *storage.RecordCache[memberLists]
	gen   uint64
	fresh *memberLists
}

func newListsLookup(st *storage.Store) *listsLookup {
	c := listsCache.Of(st)
	return &listsLookup{cache: c, gen: c.Generation()}
}

// read returns the member's lists as tx sees them, from the cache when it
// holds those of that version (shared: not to be changed).
func (l *listsLookup) read(tx *storage.Tx, memberID string) (*memberLists, error) {
	out, fresh, err := cachedLists(tx, l.cache, memberID)
	if fresh {
		l.fresh = out
	}
	return out, err
}

// done adds the lists read from the store to the cache, once the
// transaction that read them has succeeded.
func (l *listsLookup) done(memberID string) {
	if l != nil && l.fresh != nil && l.fresh.size() <= maxCachedListBytes {
		l.cache.Add(l.gen, memberID, l.fresh)
	}
}

// copies returns copies of the records of list (the cache's are shared),
// nil for none as the store's reads give.
func copies[T any](list []*T) []*T {
	if len(list) == 0 {
		return nil
	}
	out := make([]*T, len(list))
	for i, x := range list {
		cp := *x
		out[i] = &cp
	}
	return out
}
