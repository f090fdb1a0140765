package library

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/hearthkit/caddy-hearth/storage"
)

// A word search in a few per cent of the items walks the sort order past
// hundreds of items for a page of 50 (the text index's filter passes over
// the others, the word cache tells which without their texts), where the
// same page of the inbox reads 50: several times its cost however cheap
// each step. pageCache keeps, by member and request, such a page — its
// items' records and cursors — against the member's items version
// (itemsVersionKey), which every commit that writes or removes an item
// sets to a new random value: a page asked again in the same version — on
// any node, the version is read from the store — is answered from the
// cache after one point read. The page is the same: what a search matches is the
// items' records and texts, which only writeItem and removeItem write.
// (Reading the page's items by id instead costs a point read each, about
// as much as the walk.) Its prefix is no record's: the cache is emptied
// only when every record cache is (a restore, notifications missed on a
// shared engine), and a page read before such a drop is never added after
// it.
var pageCache = storage.NewSizedCacheKind[cachedPage](storage.Key("\x00library", "pages", ""), maxCachedPages)

// cachedPage is a page's answer in one version of the member's items: its
// items' records one after the other (each ending at ends[i]).
type cachedPage struct {
	version string
	recs    []byte
	ends    []int
	cursors []string
	hasNext bool
	end     string
}

// Bounds of pageCache: its entries, the records of one (a page of longer
// ones is not kept) and its key (the member, the filter and the request):
// 16 MiB in all at most.
const (
	maxCachedPages     = 256
	maxCachedPageBytes = 64 << 10
	maxCachedPageKey   = 512
)

// pageLookup is one page's use of pageCache: the cache, its generation
// read before the page's transaction began, the entry's key, and the
// items version the transaction read.
type pageLookup struct {
	cache   *storage.RecordCache[cachedPage]
	gen     uint64
	key     string
	version string
}

// newPageLookup returns the use of pageCache of the page of f and p, or
// nil for a page it does not keep: only word searches (whose walks are
// long), without label filters (which also depend on the labels' names).
func newPageLookup(st *storage.Store, memberID string, statuses []string, f ItemFilter, p PageRequest) *pageLookup {
	if strings.TrimSpace(f.Text) == "" || len(f.LabelsAll) > 0 || len(f.LabelsNot) > 0 {
		return nil
	}
	fj, err := json.Marshal(f)
	if err != nil {
		return nil
	}
	var k strings.Builder
	k.WriteString(memberID)
	for _, s := range []string{strings.Join(statuses, ","), string(p.Field), strconv.FormatBool(p.Desc), strconv.Itoa(p.First), p.After, string(fj)} {
		k.WriteByte(0)
		k.WriteString(s)
	}
	if k.Len() > maxCachedPageKey {
		return nil
	}
	c := pageCache.Of(st)
	return &pageLookup{cache: c, gen: c.Generation(), key: k.String()}
}

// read fills page from the cache when it holds the page of the items
// version tx sees, and reports whether it did. (A store written before
// the version has none until its first item write: its pages are kept
// against the absent version, which only removing the member's keys all
// at once brings back, and a removed member asks for no page.)
func (l *pageLookup) read(tx *storage.Tx, memberID string, page *ItemPage) (bool, error) {
	if l == nil {
		return false, nil
	}
	v, err := tx.Get(itemsVersionKey(memberID))
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return false, err
	}
	l.version = string(v)
	r := l.cache.Get(l.key)
	if r == nil || r.version != l.version {
		return false, nil
	}
	items := make([]SavedItem, len(r.ends))
	page.Items = make([]*SavedItem, len(r.ends))
	start := 0
	for i, end := range r.ends {
		if err := parseItemRecord(r.recs[start:end], &items[i]); err != nil {
			return false, err
		}
		page.Items[i], start = &items[i], end
	}
	page.Cursors = slices.Clone(r.cursors)
	page.HasNext, page.end = r.hasNext, r.end
	return true, nil
}

// add keeps page, answered in the transaction that read the version.
func (l *pageLookup) add(page *ItemPage) {
	if l == nil {
		return
	}
	r := &cachedPage{version: l.version, ends: make([]int, len(page.Items)), cursors: slices.Clone(page.Cursors), hasNext: page.HasNext, end: page.end}
	for i, it := range page.Items {
		if r.recs = appendItemRecord(r.recs, it); len(r.recs) > maxCachedPageBytes {
			return
		}
		r.ends[i] = len(r.recs)
	}
	l.cache.Add(l.gen, l.key, r)
}
