package storage

import (
	"testing"
	"time"
)

func openTestStore(t testing.TB) *Store {
	t.Helper()
	st, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Ids of one slot increase, also past 1024 in one millisecond (the
// clock stands still here); two slots' ids never meet; an id keeps the
// milliseconds of its creation in the bits above 16, as before.
func TestNewIDIncreases(t *testing.T) {
	at := time.Unix(1700000000, 0)
	seen := map[uint64]bool{}
	for slot := range uint16(3) {
		g, prev := newIDGen(), uint64(0)
		for i := 0; i < 3000; i++ {
			id := g.next(at, slot)
			if id <= prev {
				t.Fatalf("slot %d: id %d after %d", slot, id, prev)
			}
			if seen[id] {
				t.Fatalf("slot %d: id %d made twice", slot, id)
			}
			seen[id], prev = true, id
			if got := int64(id >> 16); got < at.UnixMilli() || got > at.UnixMilli()+3 {
				t.Fatalf("id %d: milliseconds %d", id, got)
			}
			if got := uint16(id>>idSeqBits) & (1<<idSlotBits - 1); got != slot {
				t.Fatalf("id %d has slot %d, want %d", id, got, slot)
			}
		}
	}
}

// A clock that steps back (or a node that took over a slot) may make an id
// that exists: a creation takes the next id instead of overwriting the
// record.
func TestCreationNeverOverwritesAnID(t *testing.T) {
	st := openTestStore(t)
	at := time.Unix(1800000000, 0)
	st.idNow = func() time.Time { return at }
	recordKey := func(id string) []byte { return key("test", "id", id) }
	create := func(v string) (id string) {
		t.Helper()
		err := st.Update(t.Context(), func(tx *Tx) error {
			var err error
			if id, err = tx.FreshID(recordKey); err != nil {
				return err
			}
			return tx.Put(recordKey(id), []byte(v), 0)
		})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	first := create("alice")
	st.ids = newIDGen() // a restart at the same instant
	second := create("bob")
	if second == first {
		t.Fatalf("both records got id %s", first)
	}
	err := st.View(t.Context(), func(tx *Tx) error {
		v, err := tx.Get(recordKey(first))
		if err == nil && string(v) != "alice" {
			t.Errorf("the first record: %q", v)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
