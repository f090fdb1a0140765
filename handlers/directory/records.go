package directory

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/agents"
)

// fullReloadEvery bounds how long the leader builds from its copy of the
// agent records without reading them all again: every change it makes or
// hears of is applied to the copy, and this reload is the safety net for a
// change that reached the store some other way.
const fullReloadEvery = time.Hour

// agentRecord is what the document needs of one agent, kept in memory by
// the leader (records) so that a rebuild reads only the agents that
// changed: decoding 100 k registrations and activities is most of what a
// rebuild from the store costs.
type agentRecord struct {
	a      agents.Agent // without its raw registration event
	act    agents.Activity
	banned bool
	// npub, profileURL and pkPrefix are computed once (buildEntries).
	npub, profileURL string
	pkPrefix         uint64
	// stale: a newer record of the agent replaced this one, or the agent
	// is gone (refreshRecords).
	stale bool

	// entry is the agent's entry at the last rebuild; json is the JSON
	// of encoded (nil: none yet), with its SHA-256 digest: an entry
	// whose content did not change is not encoded again.
	entry   Entry
	encoded Entry
	// entry holds from the second computedAt until changesAt
	// (entryChangesAt) unless the records change (a new agentRecord).
	computedAt, changesAt int64
	listed                uint64 // the rebuild that listed it (records.gen)
	json                  []byte
	digest                [sha256.Size]byte
}

// records is the leader's copy of the agent records, under buildMu, and
// the changes not applied to it yet, under touchMu.
type records struct {
	byPK     map[string]*agentRecord
	loadedAt time.Time

	// order is the last document's, added the records read since (a
	// rebuild lists both, without the stale ones); gen counts the
	// rebuilds (agentRecord.listed).
	order, added []*agentRecord
	gen          uint64

	touchMu sync.Mutex
	touched map[string]struct{}
	all     bool // a change whose agents are unknown: read them all
}

// touch notes that the records of pks changed in the store (called after
// the write).
func (r *records) touch(pks ...string) {
	r.touchMu.Lock()
	if r.touched == nil {
		r.touched = map[string]struct{}{}
	}
	for _, pk := range pks {
		r.touched[pk] = struct{}{}
	}
	r.touchMu.Unlock()
}

// touchAll notes a change of unknown agents.
func (r *records) touchAll() {
	r.touchMu.Lock()
	r.all = true
	r.touchMu.Unlock()
}

// refresh brings the copy up to date with the store: every record when the
// copy is missing, old, or a change of unknown agents happened, else the
// touched ones.
func (d *Directory) refreshRecords(ctx context.Context, now time.Time) error {
	r := &d.records
	r.touchMu.Lock()
	all, touched := r.all, r.touched
	r.all, r.touched = false, nil
	r.touchMu.Unlock()
	if all || r.byPK == nil || now.Sub(r.loadedAt) >= fullReloadEvery || now.Before(r.loadedAt) {
		all, err := d.agents.All(ctx)
		if err != nil {
			r.touchAll() // read them all next time
			return err
		}
		byPK := make(map[string]*agentRecord, len(all))
		added := make([]*agentRecord, 0, len(all))
		for _, rec := range all {
			ar := &agentRecord{a: *rec.Agent, act: *rec.Activity, banned: rec.Banned}
			ar.a.Event = nil
			ar.keepEncoding(r.byPK[ar.a.Pubkey])
			byPK[ar.a.Pubkey] = ar
			added = append(added, ar)
		}
		for _, old := range r.byPK {
			old.stale = true
		}
		r.byPK, r.loadedAt, r.added = byPK, now, added
		return nil
	}
	if len(touched) == 0 {
		return nil
	}
	pks := make([]string, 0, len(touched))
	for pk := range touched {
		pks = append(pks, pk)
	}
	recs, err := d.agents.Records(ctx, pks)
	if err != nil {
		r.touch(pks...) // again next time
		return err
	}
	for i, pk := range pks {
		rec := recs[i]
		old := r.byPK[pk]
		if old != nil {
			old.stale = true
		}
		if rec.Agent == nil {
			delete(r.byPK, pk)
			continue
		}
		ar := &agentRecord{a: *rec.Agent, act: *rec.Activity, banned: rec.Banned}
		ar.a.Event = nil
		ar.keepEncoding(old)
		r.byPK[pk] = ar
		r.added = append(r.added, ar)
	}
	return nil
}

// keepEncoding takes from old, the record it replaces (nil: none), what
// does not depend on the records: the npub and profile URL (else
// buildEntries computes them) and the last encoding, which buildEntries
// keeps when the entry computed from the new records is the same.
func (ar *agentRecord) keepEncoding(old *agentRecord) {
	if old == nil {
		return
	}
	ar.npub, ar.profileURL, ar.pkPrefix = old.npub, old.profileURL, old.pkPrefix
	ar.encoded, ar.json, ar.digest = old.encoded, old.json, old.digest
}

// buildEntries computes the entries of the unbanned agents at now and
// encodes those that changed, on every core, and returns their records
// in the document's order.
func (d *Directory) buildEntries(ctx context.Context, now time.Time) ([]*agentRecord, error) {
	if err := d.refreshRecords(ctx, now); err != nil {
		return nil, err
	}
	// In the last document's order first: the sort below then finds it
	// (nearly) sorted already.
	r := &d.records
	r.gen++
	recs := make([]*agentRecord, 0, len(r.byPK))
	for _, list := range [][]*agentRecord{r.order, r.added} {
		for _, rec := range list {
			if !rec.stale && !rec.banned && rec.listed != r.gen {
				rec.listed = r.gen
				recs = append(recs, rec)
			}
		}
	}
	r.added = nil
	nowU := now.Unix()
	workers := max(1, runtime.GOMAXPROCS(0))
	per := (len(recs) + workers - 1) / workers
	var wg sync.WaitGroup
	for w := 0; w*per < len(recs); w++ {
		lo, hi := w*per, min((w+1)*per, len(recs))
		wg.Go(func() {
			var scratch []byte // encoded into, then copied at its size
			for _, rec := range recs[lo:hi] {
				if rec.npub == "" {
					rec.npub = Npub(rec.a.Pubkey)
					rec.profileURL = d.profileURL(rec.npub)
					rec.pkPrefix = pubkeyPrefix(rec.a.Pubkey)
				}
				if rec.json != nil && nowU >= rec.computedAt && nowU < rec.changesAt {
					continue // nothing it depends on changed
				}
				rec.entry = d.entryOf(&rec.a, &rec.act, rec.npub, rec.profileURL, now)
				rec.computedAt, rec.changesAt = nowU, d.entryChangesAt(&rec.a, &rec.act, now)
				if rec.json != nil && sameEntry(&rec.encoded, &rec.entry) {
					continue
				}
				scratch = appendEntry(scratch[:0], &rec.entry)
				rec.json, rec.digest, rec.encoded = bytes.Clone(scratch), sha256.Sum256(scratch), rec.entry
			}
		})
	}
	wg.Wait()
	// Sorted by compact keys: comparing the entries themselves, spread
	// over the heap, costs a cache miss or two per comparison.
	keys := make([]sortKey, len(recs))
	for i, rec := range recs {
		keys[i] = sortKey{level: rec.entry.Level, first: rec.entry.FirstRegisteredAt, pk: rec.pkPrefix, rec: rec}
	}
	slices.SortFunc(keys, func(a, b sortKey) int {
		switch {
		case a.level != b.level:
			return b.level - a.level
		case a.first != b.first:
			return cmp.Compare(a.first, b.first)
		case a.pk != b.pk:
			return cmp.Compare(a.pk, b.pk)
		}
		return compareEntries(&a.rec.entry, &b.rec.entry)
	})
	for i := range keys {
		recs[i] = keys[i].rec
	}
	r.order = recs
	return recs, nil
}

// sortKey is what the document's order (compareEntries) looks at first.
type sortKey struct {
	level int
	first int64
	pk    uint64 // pubkeyPrefix
	rec   *agentRecord
}

// pubkeyPrefix is the first 16 hex digits of a pubkey as a number: for
// lowercase hex, numbers compare as the strings do.
func pubkeyPrefix(pk string) uint64 {
	var n uint64
	for i := 0; i < 16 && i < len(pk); i++ {
		c := pk[i]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		default:
			c = 0
		}
		n = n<<4 | uint64(c)
	}
	return n
}
