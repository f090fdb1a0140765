package agents

import (
	"encoding/json"
	"hash/maphash"
	"slices"
	"sync"
)

// postsMemo remembers, per author, what RecordPosts last decoded or wrote
// of the author's registration (FirstRegisteredAt alone) and activity,
// with a digest of the stored bytes they came from. RecordPosts still
// reads both records in its transaction (so a concurrent change still
// conflicts) but decodes one again only when its bytes differ from the
// remembered ones: decoding the registration (its raw event included) and
// the activity of every author of every batch was most of the ingest's
// cost beside the signature checks. Checked against the bytes, the memo
// needs no invalidation: any write by anyone changes them, and a
// transaction that did not commit left bytes nobody will read. The digest
// is two 64-bit maphash sums under random seeds of this process.
type postsMemo struct {
	seeds [2]maphash.Seed
	mu    sync.Mutex
	m     map[string]*memoEntry
}

type memoEntry struct {
	reg   [2]uint64
	first int64 // FirstRegisteredAt of reg
	act   [2]uint64
	acts  *Activity // of act (never changed: callers get a copy)
}

// maxMemo bounds the authors remembered; past it the memo starts again
// empty (the authors posting now come back first).
const maxMemo = 1 << 14

var memo = postsMemo{seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}}

func (m *postsMemo) sum(b []byte) [2]uint64 {
	return [2]uint64{maphash.Bytes(m.seeds[0], b), maphash.Bytes(m.seeds[1], b)}
}

func (m *postsMemo) get(pk string) memoEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.m[pk]; e != nil {
		return *e
	}
	return memoEntry{}
}

func (m *postsMemo) set(pk string, fn func(e *memoEntry)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var e memoEntry
	if old := m.m[pk]; old != nil {
		e = *old
	} else if m.m == nil || len(m.m) >= maxMemo {
		m.m = make(map[string]*memoEntry)
	}
	fn(&e)
	m.m[pk] = &e
}

// firstRegisteredAt decodes FirstRegisteredAt from pk's registration raw.
func (m *postsMemo) firstRegisteredAt(pk string, raw []byte) (int64, error) {
	sum := m.sum(raw)
	if e := m.get(pk); e.reg == sum && sum != ([2]uint64{}) {
		return e.first, nil
	}
	// Only what RecordPosts needs, not the whole registration.
	var cur struct {
		FirstRegisteredAt int64 `json:"first_registered_at"`
	}
	if err := json.Unmarshal(raw, &cur); err != nil {
		return 0, err
	}
	m.set(pk, func(e *memoEntry) { e.reg, e.first = sum, cur.FirstRegisteredAt })
	return cur.FirstRegisteredAt, nil
}

// activity decodes pk's activity from raw into a new Activity.
func (m *postsMemo) activity(pk string, raw []byte) (*Activity, error) {
	sum := m.sum(raw)
	if e := m.get(pk); e.act == sum && e.acts != nil {
		return e.acts.clone(), nil
	}
	act := &Activity{}
	if err := unmarshalActivity(raw, act); err != nil {
		return nil, err
	}
	m.set(pk, func(e *memoEntry) { e.act, e.acts = sum, act.clone() })
	return act, nil
}

// wrote notes that pk's activity act was written as raw.
func (m *postsMemo) wrote(pk string, raw []byte, act *Activity) {
	sum := m.sum(raw)
	cp := act.clone()
	m.set(pk, func(e *memoEntry) { e.act, e.acts = sum, cp })
}

func (a *Activity) clone() *Activity {
	cp := *a
	cp.Days, cp.Times, cp.Skels = slices.Clone(a.Days), slices.Clone(a.Times), slices.Clone(a.Skels)
	return &cp
}
