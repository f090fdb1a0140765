package textindex

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// The index's tests run on Badger, and with HEARTH_TEST_ENGINE=postgres on
// PostgreSQL (storagetest.Main: a server on 127.0.0.1:15448).
func TestMain(m *testing.M) { storagetest.Main(m, 15448) }

// docs are documents kept in the store beside their index, as a caller's
// would be: doc/<id> holds the text.
type docs struct{}

func docKey(id string) []byte { return storage.Key("doc", id) }

func (docs) Text(tx *storage.Tx, id string, t *Text) (bool, error) {
	v, err := tx.Get(docKey(id))
	if errors.Is(err, storage.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	t.Reset()
	t.AddField(string(v))
	o, _, err := docs{}.Order(tx, id)
	t.SetOrder(o)
	return true, err
}

// orderKey holds a document's order value (8 bytes; none: 0).
func orderKey(id string) []byte { return storage.Key("ord", id) }

func (docs) Order(tx *storage.Tx, id string) (uint64, bool, error) {
	if _, err := tx.Get(docKey(id)); errors.Is(err, storage.ErrNotFound) {
		return 0, false, nil
	}
	v, err := tx.Get(orderKey(id))
	if errors.Is(err, storage.ErrNotFound) || len(v) != 8 {
		return 0, true, nil
	}
	return binary.BigEndian.Uint64(v), true, err
}

var testIndex = At(storage.Key("ix", ""))

// put writes document id with text and queues it, in one transaction.
func put(t *testing.T, st *storage.Store, id, text string) {
	t.Helper()
	putOrdered(t, st, id, text, 0)
}

// putOrdered is put of a document with an order value.
func putOrdered(t *testing.T, st *storage.Store, id, text string, order uint64) {
	t.Helper()
	if err := st.Update(t.Context(), func(tx *storage.Tx) error {
		if err := tx.Put(docKey(id), []byte(text), 0); err != nil {
			return err
		}
		if err := tx.Put(orderKey(id), binary.BigEndian.AppendUint64(nil, order), 0); err != nil {
			return err
		}
		_, err := testIndex.Queue(tx, id)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// candidates returns the sorted candidates of needle, failing when the
// index cannot tell.
func candidates(t *testing.T, st *storage.Store, needle string) []string {
	t.Helper()
	var ids []string
	var ok bool
	if err := st.View(t.Context(), func(tx *storage.Tx) (err error) {
		ids, ok, err = testIndex.Candidates(tx, AppendFold(nil, needle), 100, 100)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatalf("the index cannot tell the candidates of %q", needle)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

func build(t *testing.T, st *storage.Store) {
	t.Helper()
	never := func() bool { return false }
	if err := testIndex.Build(st, docs{}, never, never); err != nil {
		t.Fatal(err)
	}
}

func backlog(t *testing.T, st *storage.Store) int {
	t.Helper()
	var n int
	if err := st.View(t.Context(), func(tx *storage.Tx) (err error) { n, err = testIndex.Backlog(tx); return err }); err != nil {
		t.Fatal(err)
	}
	return n
}

// Queued documents are candidates before they are indexed, indexed ones
// after; a removed document is none; a phrase no document has gives none.
func TestCandidatesFollowTheQueueAndRemovals(t *testing.T) {
	st := storagetest.Open(t)
	put(t, st, "1", "Rye bread with Caraway")
	put(t, st, "2", "wheat bread")
	put(t, st, "3", "caraway seeds")
	if got := candidates(t, st, "caraway"); !slices.Equal(got, []string{"1", "2", "3"}) {
		t.Fatalf("queued: candidates %v, want every queued document", got)
	}
	if n := backlog(t, st); n != 3 {
		t.Fatalf("backlog %d, want 3", n)
	}
	build(t, st)
	if n := backlog(t, st); n != 0 {
		t.Fatalf("backlog after Build %d, want 0", n)
	}
	if got := candidates(t, st, "CARAWAY"); !slices.Equal(got, []string{"1", "3"}) {
		t.Fatalf("indexed: candidates %v, want [1 3]", got)
	}
	if got := candidates(t, st, "zanzibar"); len(got) != 0 {
		t.Fatalf("candidates of a phrase no document has: %v", got)
	}
	if err := st.Update(t.Context(), func(tx *storage.Tx) error {
		if err := tx.Delete(docKey("1")); err != nil {
			return err
		}
		return testIndex.Remove(tx, "1")
	}); err != nil {
		t.Fatal(err)
	}
	if got := candidates(t, st, "caraway"); !slices.Equal(got, []string{"3"}) {
		t.Fatalf("after removing 1: candidates %v, want [3]", got)
	}
	// A document queued again gets a new number; its old one is gone.
	put(t, st, "3", "poppy seeds")
	build(t, st)
	if got := candidates(t, st, "caraway"); len(got) != 0 {
		t.Fatalf("after 3 changed: candidates %v, want none", got)
	}
	if got := candidates(t, st, "poppy"); !slices.Equal(got, []string{"3"}) {
		t.Fatalf("candidates of the new text: %v, want [3]", got)
	}
}

// Eight segments of a size merge into one, and the candidates stay the
// same.
func TestMergeKeepsTheCandidates(t *testing.T) {
	st := storagetest.Open(t)
	var want []string
	for i := range 20 {
		text := fmt.Sprintf("loaf %d of rye", i)
		if i%3 == 0 {
			text += " with caraway"
			want = append(want, fmt.Sprint(i))
		}
		put(t, st, fmt.Sprint(i), text)
		build(t, st) // one segment each, merged as they come
	}
	slices.Sort(want)
	var meta *Meta
	if err := st.View(t.Context(), func(tx *storage.Tx) (err error) { meta, err = testIndex.ReadMeta(tx); return err }); err != nil {
		t.Fatal(err)
	}
	levels := map[int]int{}
	docs := uint32(0)
	for _, sg := range meta.Segments {
		levels[SegmentLevel(sg.Docs)]++
		docs += sg.Docs
	}
	if docs != 20 || levels[0] >= 8 || levels[1] != 2 || meta.Merging != 0 || len(meta.Deleting) != 0 {
		t.Fatalf("segments after 20 documents: %+v", meta)
	}
	if got := candidates(t, st, "caraway"); !slices.Equal(got, want) {
		t.Fatalf("candidates %v, want %v", got, want)
	}
}

// Case folding maps every character of a simple case folding orbit to one.
func TestFold(t *testing.T) {
	for _, c := range [][2]string{{"Σσς", "σσσ"}, {"K\u212Ak", "kkk"}, {"ÉTÉ", "été"}, {"Straße", "straße"}} {
		if got := Fold(c[0]); got != c[1] {
			t.Errorf("Fold(%q) = %q, want %q", c[0], got, c[1])
		}
	}
	var tx Text
	tx.AddField("Rye")
	tx.AddField("bread")
	if tx.Contains([]byte("yeb")) {
		t.Error("a needle across two fields matched")
	}
	if !tx.Contains([]byte("rea")) {
		t.Error("a needle in the second field did not match")
	}
}

// Queued documents have a bound of their own: a backlog larger than the
// indexed candidates' bound is still read, up to it.
func TestCandidatesBoundTheQueueApart(t *testing.T) {
	st := storagetest.Open(t)
	for i := range 5 {
		put(t, st, fmt.Sprint(i), "caraway")
	}
	for _, c := range []struct {
		unindexed int
		ok        bool
	}{{4, false}, {5, true}} {
		var ids []string
		var ok bool
		if err := st.View(t.Context(), func(tx *storage.Tx) (err error) {
			ids, ok, err = testIndex.Candidates(tx, []byte("caraway"), 1, c.unindexed)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if ok != c.ok || (ok && len(ids) != 5) {
			t.Errorf("five queued, at most %d: %v, %v", c.unindexed, ids, ok)
		}
	}
}

// A merged segment larger than one transaction of the engine (Badger holds
// 15 % of a memtable, so small memtables refuse a merge's usual chunk) is
// written in smaller transactions: every document stays a candidate.
func TestMergeFitsSmallMemtables(t *testing.T) {
	st, err := storage.Open(t.TempDir(), storage.Options{MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 8 {
		// Random letters a–t: thousands of trigrams in each segment, so
		// the merged segment outgrows what one transaction holds; the
		// marker's letters are not among them.
		text := make([]byte, 1500)
		for j := range text {
			text[j] = byte('a' + rng.IntN(20))
		}
		put(t, st, fmt.Sprint(i), string(text)+" "+marker(i))
		build(t, st)
	}
	var meta *Meta
	if err := st.View(t.Context(), func(tx *storage.Tx) (err error) { meta, err = testIndex.ReadMeta(tx); return err }); err != nil {
		t.Fatal(err)
	}
	if len(meta.Segments) != 1 || meta.Merging != 0 || len(meta.Deleting) != 0 {
		t.Fatalf("segments after 8 documents: %+v", meta)
	}
	for i := range 8 {
		if got := candidates(t, st, marker(i)); !slices.Equal(got, []string{fmt.Sprint(i)}) {
			t.Fatalf("candidates of %s: %v", marker(i), got)
		}
	}
}

func marker(i int) string { return fmt.Sprintf("zy%cx%cw", 'u'+i%3, 'u'+i/3) }

// A Filter reads the documents' numbers through a cursor that follows the
// ids asked for: asked in either order, out of order, or for ids the index
// does not have, it answers as point reads do.
// A Filter answers the same, and rightly, whatever the order of the ids
// asked for: through its cursor or point reads, and whichever of its
// segments (a merged one, then smaller ones) it had read when made.
func TestFilterAnswersInAnyOrder(t *testing.T) {
	st := storagetest.Open(t)
	var ids []string
	for i := range 400 {
		id := fmt.Sprint(100000 + 7*i)
		ids = append(ids, id)
		text := "plain words"
		if i%20 == 0 {
			text = "a quokka among plain words"
		}
		put(t, st, id, text)
		if i%30 == 29 {
			build(t, st) // segments of 30, eight of them merged
		}
	}
	build(t, st)
	absent := []string{"099999", "100001", "100699", "103000", "99"}
	r := rand.New(rand.NewPCG(1, 2))
	shuffled := slices.Clone(ids)
	r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	desc := slices.Clone(ids)
	slices.Reverse(desc)
	nearly := slices.Clone(desc) // descending, a few out of place
	for i := 0; i+5 < len(nearly); i += 37 {
		nearly[i], nearly[i+5] = nearly[i+5], nearly[i]
	}
	for name, order := range map[string][]string{
		"ascending": ids, "descending": desc, "nearly descending": nearly, "shuffled": shuffled,
		"with absent ids": append(slices.Clone(absent), append(slices.Clone(desc), absent...)...),
	} {
		if err := st.View(t.Context(), func(tx *storage.Tx) error {
			lookup := func() *Filter {
				_, _, f, err := testIndex.Lookup(tx, AppendFold(nil, "quokka"), 5, 100)
				if err != nil || f == nil {
					t.Fatalf("%s: no filter (%v)", name, err)
				}
				return f
			}
			f, points := lookup(), lookup()
			defer f.Close()
			if len(f.post.segs) == 0 {
				t.Fatalf("%s: the filter read every segment when made", name)
			}
			points.nums.points = true
			for more := true; more; { // points reads its segments first
				var err error
				if more, err = points.post.next(tx); err != nil {
					return err
				}
			}
			for _, id := range order {
				got, err := f.May(tx, id)
				if err != nil {
					return err
				}
				want, err := points.May(tx, id)
				if err != nil {
					return err
				}
				if got != want {
					t.Errorf("%s: May(%s) = %v, point reads say %v", name, id, got, want)
				}
				if i := slices.Index(ids, id); got != (i < 0 || i%20 == 0) {
					t.Errorf("%s: May(%s) = %v; the document has the needle: %v", name, id, got, i%20 == 0)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// The segments' ranges and order bounds are keys of their own: the
// index's Meta (tm) is encoded as a version without them wrote and reads
// it. An index without them (written before them, or by such a version) is
// read with every segment's range unknown and no bounds (Ordered cannot
// tell), gives the same candidates, and the next Build measures the ranges
// and bounds its segments had been written with.
func TestSegmentsWithoutRangesAreMeasured(t *testing.T) {
	st := storagetest.Open(t)
	var want []string
	for i := range 600 {
		id := fmt.Sprint(5000 + i)
		text := "plain words"
		if i%25 == 0 {
			text, want = "a quokka among plain words", append(want, id)
		}
		putOrdered(t, st, id, text, uint64(1000+(i*37)%600)) // not in the order of the documents
		if i%30 == 29 {
			build(t, st) // segments of 30, merged by eight
		}
	}
	build(t, st)
	readMeta := func() *Meta {
		var meta *Meta
		if err := st.View(t.Context(), func(tx *storage.Tx) (err error) { meta, err = testIndex.ReadMeta(tx); return err }); err != nil {
			t.Fatal(err)
		}
		return meta
	}
	written := readMeta()
	if len(written.Segments) < 2 {
		t.Fatalf("segments: %+v", written.Segments)
	}
	// tm as the version without ranges wrote it.
	v1 := binary.AppendUvarint([]byte{1}, uint64(written.NextDoc))
	for _, v := range []uint64{uint64(written.NextSeg), 0, written.PendingFrom, uint64(len(written.Segments))} {
		v1 = binary.AppendUvarint(v1, v)
	}
	for _, sg := range written.Segments {
		v1 = binary.AppendUvarint(binary.AppendUvarint(v1, uint64(sg.ID)), uint64(sg.Docs))
	}
	v1 = append(v1, 0, 0) // no merge, no deletion
	if err := st.Update(t.Context(), func(tx *storage.Tx) error {
		tm, err := tx.Get(testIndex.MetaKey())
		if err != nil {
			return err
		}
		if !bytes.Equal(tm, v1) {
			t.Fatalf("tm %x, want %x as a version without ranges wrote it", tm, v1)
		}
		if err := tx.Delete(testIndex.boundsKey()); err != nil {
			return err
		}
		return tx.Delete(testIndex.rangesKey())
	}); err != nil {
		t.Fatal(err)
	}
	if err := st.View(t.Context(), func(tx *storage.Tx) error {
		_, _, ok, err := testIndex.Ordered(tx, AppendFold(nil, "quokka"), true, 0, math.MaxUint64, 100)
		if ok {
			t.Errorf("Ordered answers without the segments' bounds")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	old := readMeta()
	for i, sg := range old.Segments {
		if sg != (Segment{ID: written.Segments[i].ID, Docs: written.Segments[i].Docs, Hi: unknownHi}) {
			t.Fatalf("without ranges read as %+v, want %+v with an unknown range", old.Segments, written.Segments)
		}
	}
	if got := candidates(t, st, "quokka"); !slices.Equal(got, want) {
		t.Fatalf("candidates before the ranges are measured %v, want %v", got, want)
	}
	for _, sg := range written.Segments {
		if !sg.Ordered || sg.Least < 1000 || sg.Most >= 1600 || sg.Least > sg.Most {
			t.Fatalf("segment written with bounds %+v; want its documents' order values", sg)
		}
	}
	build(t, st)
	if got := readMeta(); !slices.Equal(got.Segments, written.Segments) {
		t.Fatalf("segments once measured %+v, want %+v", got.Segments, written.Segments)
	}
	if got := candidates(t, st, "quokka"); !slices.Equal(got, want) {
		t.Fatalf("candidates once the ranges are measured %v, want %v", got, want)
	}
}

// Ordered gives every candidate of a needle once, a segment at a time, and
// never one whose order value lies beyond the Bound it reported before:
// in either direction, over segments merged and not, documents re-indexed
// and removed, and order values that do not follow the documents' numbers
// (an import gives new documents old dates).
func TestOrderedCandidatesKeepTheirBounds(t *testing.T) {
	st := storagetest.Open(t)
	r := rand.New(rand.NewPCG(3, 4))
	order := map[string]uint64{}
	var ids []string
	for i := range 700 {
		id := fmt.Sprint(20000 + i)
		text := "plain words"
		if r.IntN(6) == 0 {
			text = "a quokka among plain words"
		}
		o := uint64(100000 + i*10)
		if r.IntN(4) == 0 {
			o = uint64(r.IntN(100000)) // imported: an old date
		}
		putOrdered(t, st, id, text, o)
		order[id] = o
		ids = append(ids, id)
		if i%40 == 39 {
			build(t, st) // segments of 40, eight of them merged
		}
	}
	// Some re-indexed with another text, some removed.
	for i := 0; i < len(ids); i += 7 {
		putOrdered(t, st, ids[i], "a quokka again", order[ids[i]])
	}
	build(t, st)
	if err := st.Update(t.Context(), func(tx *storage.Tx) error {
		for i := 3; i < len(ids); i += 11 {
			if err := tx.Delete(docKey(ids[i])); err != nil {
				return err
			}
			if err := testIndex.Remove(tx, ids[i]); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	putOrdered(t, st, "queued", "a quokka waiting", 50) // not indexed yet
	truth := map[string]bool{}
	if err := st.View(t.Context(), func(tx *storage.Tx) error {
		for _, id := range append(ids, "queued") {
			if v, err := tx.Get(docKey(id)); err == nil && bytes.Contains(v, []byte("quokka")) {
				truth[id] = true
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, desc := range []bool{true, false} {
		for _, window := range [][2]uint64{{0, math.MaxUint64}, {50000, 104000}, {104500, 104500}} {
			if err := st.View(t.Context(), func(tx *storage.Tx) error {
				rd, open, ok, err := testIndex.Ordered(tx, AppendFold(nil, "quokka"), desc, window[0], window[1], 10)
				if err != nil || !ok {
					t.Fatalf("Ordered: %v, %v", ok, err)
				}
				got := map[string]bool{}
				for _, id := range open {
					got[id] = true
				}
				for {
					bound, more := rd.Bound()
					if !more {
						break
					}
					next, within, err := rd.Next(tx, nil, 1000)
					if err != nil || !within {
						t.Fatalf("Next: %v, %v", within, err)
					}
					for _, id := range next {
						if got[id] {
							t.Errorf("desc %v: %s given twice", desc, id)
						}
						got[id] = true
						if o := order[id]; (desc && o > bound) || (!desc && o < bound) {
							t.Errorf("desc %v: %s of order %d beyond the bound %d", desc, id, o, bound)
						}
					}
				}
				for id := range truth {
					if o := order[id]; !got[id] && (id == "queued" || (o >= window[0] && o <= window[1])) {
						t.Errorf("desc %v, window %v: %s (order %d) has the needle, not given", desc, window, id, o)
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
}
