package library

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

// Offsets in the order of createdAt. Omnivore's clients page by offset
// ("0", "15", … "99985") where the indexes page by keyset; counting from
// the start to reach an offset would read every item before it. Fences cut
// the createdAt order of a member's items (every status, as in the ix/
// indexes) into buckets of a few hundred entries, each with the number of
// entries of each status from it to the next fence:
//
//	of/<createdAt><id>   3 × 4 bytes: the bucket's entries in the inbox,
//	                     the archive and the trash (the first fence's
//	                     suffix is empty: it starts the order)
//	ov                   present once the fences count every item: a
//	                     version, new in every transaction that changes
//	                     a fence
//
// An offset then reads the fences (a few hundred short keys at 100,000
// items) and the keys of one bucket, never the items before it, and every
// node of a shared store reads the same fences. Each node keeps the fences
// it read last per member with the version they were read at
// (fenceCache): an offset whose snapshot holds the same version reads ov
// and one bucket's keys only, and any other version reads the fences
// again, so the answer is the store's on every node. The item's transaction
// adds its moves to the buckets at the commit (countItemFilters,
// flushFences); a bucket past fenceSplit entries splits in two, counted
// again from its keys. A member's fences are built by the first offset
// asked (EnsureOffsets); until then writes leave them alone.

// fenceSplit is the size past which a bucket splits in two. An offset
// reads one bucket's keys (128 to 256 of them) every time, and the fences
// (some 800 at 100,000 items) only when a write changed them since the
// node last read them: smaller buckets make the usual page cheaper.
const fenceSplit = 256

// fenceStatuses are the statuses counted in a fence, in its value's order.
var fenceStatuses = [3]string{StatusActive, StatusArchived, StatusDeleted}

type fenceCounts [3]int64

func (c fenceCounts) total() int64 { return c[0] + c[1] + c[2] }

// of sums the counts of the statuses (slots) asked.
func (c fenceCounts) of(slots []int) int64 {
	var n int64
	for _, s := range slots {
		n += c[s]
	}
	return n
}

func fenceSlot(status string) int {
	for i, s := range fenceStatuses {
		if s == status {
			return i
		}
	}
	return -1
}

func fencePrefix(memberID string) []byte { return storage.Key("u", memberID, "gql", "of", "") }

func fenceReadyKey(memberID string) []byte { return storage.Key("u", memberID, "gql", "ov") }

func encodeFence(c fenceCounts) []byte {
	b := make([]byte, 0, 12)
	for _, n := range c {
		b = binary.BigEndian.AppendUint32(b, uint32(max(n, 0)))
	}
	return b
}

func decodeFence(v []byte) (fenceCounts, error) {
	var c fenceCounts
	if len(v) != 12 {
		return c, errBadCount
	}
	for i := range c {
		c[i] = int64(binary.BigEndian.Uint32(v[4*i:]))
	}
	return c, nil
}

// fenceDelta is the moves of one createdAt entry, for flushFences.
type fenceDelta struct {
	memberID string
	suffix   []byte
	d        fenceCounts
}

// fenceMove is one item's createdAt entry coming (sign 1) or going (-1)
// in the slot of its status: what countFence notes, kept as the item's
// fields so that a save of a member without fences (most) allocates
// nothing for them.
type fenceMove struct {
	memberID, id string
	createdAt    time.Time
	slot         int
	sign         int64
}

// countFence notes that it's createdAt entry comes (sign 1) or goes (-1).
func countFence(lt *libraryTx, it *SavedItem, sign int64) {
	slot := fenceSlot(it.Status)
	if slot < 0 {
		return
	}
	if lt.fenceMoves == nil {
		lt.fenceMoves = lt.fenceMove[:0]
	}
	lt.fenceMoves = append(lt.fenceMoves, fenceMove{memberID: it.MemberID, id: it.ID, createdAt: it.CreatedAt, slot: slot, sign: sign})
}

// fenceDeltas sums moves by createdAt entry, leaving out the entries
// whose moves cancel (an item written again in the same place) and the
// moves of members whose fences are not built (most members: their moves
// cost one read each and allocate nothing).
func fenceDeltas(tx *storage.Tx, moves []fenceMove) (map[string]*fenceDelta, error) {
	built, err := fencesBuilt(tx, moves)
	if err != nil || built == nil {
		return nil, err
	}
	deltas := map[string]*fenceDelta{}
	for _, mv := range moves {
		if !built[mv.memberID] {
			continue
		}
		suffix := itemSortValue(&SavedItem{ID: mv.id, CreatedAt: mv.createdAt}, SortCreatedAt)
		k := mv.memberID + "\x00" + string(suffix)
		fd := deltas[k]
		if fd == nil {
			fd = &fenceDelta{memberID: mv.memberID, suffix: suffix}
			deltas[k] = fd
		}
		fd.d[mv.slot] += mv.sign
	}
	for k, fd := range deltas {
		if fd.d == (fenceCounts{}) {
			delete(deltas, k)
		}
	}
	return deltas, nil
}

// fencesBuilt returns the members of moves whose fences are built, or nil
// for none.
func fencesBuilt(tx *storage.Tx, moves []fenceMove) (map[string]bool, error) {
	var built map[string]bool
	read := map[string]bool{}
	for _, mv := range moves {
		if read[mv.memberID] {
			continue
		}
		read[mv.memberID] = true
		has, err := tx.Has(fenceReadyKey(mv.memberID))
		if err != nil {
			return nil, err
		}
		if has {
			if built == nil {
				built = map[string]bool{}
			}
			built[mv.memberID] = true
		}
	}
	return built, nil
}

// movesCancel reports whether every move has an opposite one of the same
// entry and slot (an update that leaves an item where it was): checked
// before fenceDeltas, which allocates, for the usual write of one item.
func movesCancel(moves []fenceMove) bool {
	if len(moves) != 2 {
		return len(moves) == 0
	}
	a, b := moves[0], moves[1]
	return a.sign == -b.sign && a.slot == b.slot && a.id == b.id && a.memberID == b.memberID && a.createdAt.Equal(b.createdAt)
}

// flushFences adds the transaction's moves to the buckets of the members
// whose fences are built, and splits the buckets grown past fenceSplit
// (libraryBeforeCommit).
func flushFences(tx *storage.Tx, lt *libraryTx) error {
	moves := lt.fenceMoves
	lt.fenceMoves = nil
	if movesCancel(moves) {
		return nil
	}
	deltas, err := fenceDeltas(tx, moves)
	if err != nil || len(deltas) == 0 {
		return err
	}
	keys := make([]string, 0, len(deltas))
	for k := range deltas {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	changed := map[string]fenceCounts{}
	members := map[string]string{} // fence key -> member
	for _, k := range keys {
		fd := deltas[k]
		fk, c, err := fenceOf(tx, fd.memberID, fd.suffix, changed)
		if err != nil {
			return err
		}
		for i := range c {
			c[i] = max(c[i]+fd.d[i], 0)
		}
		changed[string(fk)], members[string(fk)] = c, fd.memberID
	}
	fks := make([]string, 0, len(changed))
	for fk := range changed {
		fks = append(fks, fk)
	}
	slices.Sort(fks)
	versioned := map[string]bool{}
	for _, fk := range fks {
		c, memberID := changed[fk], members[fk]
		if !versioned[memberID] {
			versioned[memberID] = true
			if err := tx.Put(fenceReadyKey(memberID), newFenceVersion(), 0); err != nil {
				return err
			}
		}
		first := len(fk) == len(fencePrefix(memberID))
		switch {
		case c.total() == 0 && !first:
			// An empty bucket joins the one before.
			if err := tx.Delete([]byte(fk)); err != nil {
				return err
			}
		case c.total() > fenceSplit:
			if err := splitFence(tx, memberID, []byte(fk)); err != nil {
				return err
			}
		default:
			if err := tx.Put([]byte(fk), encodeFence(c), 0); err != nil {
				return err
			}
		}
	}
	return nil
}

// fenceOf returns the fence whose bucket holds suffix and its counts (from
// changed when this transaction changed them).
func fenceOf(tx *storage.Tx, memberID string, suffix []byte, changed map[string]fenceCounts) ([]byte, fenceCounts, error) {
	prefix := fencePrefix(memberID)
	var fk []byte
	var c fenceCounts
	err := tx.Scan(prefix, append(slices.Clip(prefix), suffix...), true, false, func(k, v []byte) (bool, error) {
		fk = bytes.Clone(k)
		if cc, ok := changed[string(k)]; ok {
			c = cc
			return false, nil
		}
		var err error
		c, err = decodeFence(v)
		return false, err
	})
	if err == nil && fk == nil {
		err = errBadCount // a built member always has the first fence
	}
	return fk, c, err
}

// bucketEntry is an index entry of a bucket: where its suffix lies in
// the arena bucketEntries returns, and its status slot.
type bucketEntry struct {
	start, end int
	slot       int
}

// bucketEntries lists the entries of the statuses (slots) from the
// fence's suffix to next (nil: the end), in the createdAt order, their
// suffixes in one arena.
func bucketEntries(tx *storage.Tx, memberID string, from, next []byte, slots []int) ([]bucketEntry, []byte, error) {
	out := make([]bucketEntry, 0, fenceSplit/2)
	arena := make([]byte, 0, fenceSplit/2*16)
	for _, slot := range slots {
		err := keyset{prefix: itemIndexPrefix(memberID, fenceStatuses[slot], SortCreatedAt), lower: from, upper: next}.scan(tx, func(suf, _ []byte) (bool, error) {
			out = append(out, bucketEntry{len(arena), len(arena) + len(suf), slot})
			arena = append(arena, suf...)
			return true, nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
	if len(slots) > 1 {
		slices.SortFunc(out, func(a, b bucketEntry) int { return bytes.Compare(arena[a.start:a.end], arena[b.start:b.end]) })
	}
	return out, arena, nil
}

// nextFence returns the suffix of the fence after fk (nil for none).
func nextFence(tx *storage.Tx, memberID string, fk []byte) ([]byte, error) {
	prefix := fencePrefix(memberID)
	var next []byte
	err := tx.Scan(prefix, fk, false, true, func(k, _ []byte) (bool, error) {
		if bytes.Equal(k, fk) {
			return true, nil
		}
		next = bytes.Clone(k[len(prefix):])
		return false, nil
	})
	return next, err
}

var allFenceSlots = []int{0, 1, 2}

// splitFence counts the bucket at fk again from its keys and cuts it in
// two at its middle entry.
func splitFence(tx *storage.Tx, memberID string, fk []byte) error {
	prefix := fencePrefix(memberID)
	next, err := nextFence(tx, memberID, fk)
	if err != nil {
		return err
	}
	from := fk[len(prefix):]
	if len(from) == 0 {
		from = nil
	}
	entries, arena, err := bucketEntries(tx, memberID, from, next, allFenceSlots)
	if err != nil {
		return err
	}
	mid := len(entries) / 2
	var a, b fenceCounts
	for i, e := range entries {
		if i < mid {
			a[e.slot]++
		} else {
			b[e.slot]++
		}
	}
	if mid == 0 {
		return tx.Put(fk, encodeFence(b), 0)
	}
	if err := tx.Put(fk, encodeFence(a), 0); err != nil {
		return err
	}
	m := entries[mid]
	return tx.Put(append(slices.Clip(prefix), arena[m.start:m.end]...), encodeFence(b), 0)
}

// EnsureOffsets builds the member's fences if they are not yet: one walk
// of the keys of the createdAt indexes, once per member (a store from
// before them, or a member who never paged by offset).
func (s Store) EnsureOffsets(ctx context.Context, memberID string) error {
	var ready bool
	err := s.st.View(ctx, func(tx *storage.Tx) (err error) {
		ready, err = tx.Has(fenceReadyKey(memberID))
		return err
	})
	if err != nil || ready {
		return err
	}
	return s.st.Update(ctx, func(tx *storage.Tx) error {
		if ok, err := tx.Has(fenceReadyKey(memberID)); err != nil || ok {
			return err
		}
		prefix := fencePrefix(memberID)
		if err := tx.DeletePrefix(prefix); err != nil {
			return err
		}
		entries, arena, err := bucketEntries(tx, memberID, nil, nil, allFenceSlots)
		if err != nil {
			return err
		}
		// Half-full buckets: a bucket splits only after as many writes.
		const size = fenceSplit / 2
		for start := 0; start == 0 || start < len(entries); start += size {
			var c fenceCounts
			for _, e := range entries[start:min(start+size, len(entries))] {
				c[e.slot]++
			}
			fk := prefix
			if start > 0 {
				e := entries[start]
				fk = append(slices.Clip(prefix), arena[e.start:e.end]...)
			}
			if err := tx.Put(fk, encodeFence(c), 0); err != nil {
				return err
			}
		}
		return tx.Put(fenceReadyKey(memberID), newFenceVersion(), 0)
	})
}

// ErrOffsetsNotReady is OffsetCursor's answer while the member's fences
// are not built (EnsureOffsets) or disagree with the index.
var ErrOffsetsNotReady = errors.New("the offsets of this library are not counted")

// OffsetCursor returns the cursor of SavedItemsPage (sorted by createdAt,
// desc or not) after which the item at offset in the order of the
// member's items of status (as ItemFilter.Status) comes; "" for offset 0.
// past is true when offset is past the end, and total is then how many
// items of status there are (also in a descending order; else 0).
// The cost is that of reading the fences and one bucket's keys, whatever
// the offset.
func (s Store) OffsetCursor(ctx context.Context, memberID, status string, desc bool, offset int) (cursor string, total int, past bool, err error) {
	var slots []int
	switch status {
	case "", StatusActive:
		slots = []int{0}
	case StatusArchived:
		slots = []int{1}
	case StatusDeleted:
		slots = []int{2}
	case StatusNotDeleted:
		slots = []int{0, 1}
	case StatusAll:
		slots = allFenceSlots
	default:
		return "", 0, false, storage.Invalid("unknown status")
	}
	err = s.st.View(ctx, func(tx *storage.Tx) error {
		if slices.Contains(slots, fenceSlot(StatusDeleted)) {
			// The fences count the items a pending emptying hides: the
			// caller walks the pages, which leave them out.
			if cut, err := readEmptyingCut(tx, memberID); err != nil || cut.pending {
				return cmp.Or(err, ErrOffsetsNotReady)
			}
		}
		fl, err := s.fences(tx, memberID)
		if err != nil {
			return err
		}
		// scan calls fn with each fence's suffix and count of the
		// statuses asked, then with the next fence's suffix (nil past the
		// last), until fn returns false.
		scan := func(fn func(suffix []byte, n int64, next []byte) bool) error {
			for i, suf := range fl.suffixes {
				var next []byte
				if i+1 < len(fl.suffixes) {
					next = fl.suffixes[i+1]
				}
				if !fn(suf, fl.counts[i].of(slots), next) {
					break
				}
			}
			return nil
		}
		// The item the page starts after, by its rank in the ascending
		// order: the one before offset, or in a descending page the one
		// after it (which needs the total first).
		rank := int64(offset - 1)
		var sum int64
		if desc {
			if err := scan(func(_ []byte, n int64, _ []byte) bool { sum += n; return true }); err != nil {
				return err
			}
			total = int(sum)
			rank = sum - int64(offset)
			switch {
			case offset > total:
				past = true
				return nil
			case offset == 0:
				return nil
			}
		} else if offset == 0 {
			return nil
		}
		var before int64
		found := false
		var ferr error
		err = scan(func(suffix []byte, n int64, next []byte) bool {
			if before+n <= rank || n == 0 {
				before += n
				return true
			}
			found = true
			from := suffix
			if len(from) == 0 {
				from = nil
			}
			entries, arena, err := bucketEntries(tx, memberID, from, next, slots)
			if err != nil {
				ferr = err
				return false
			}
			if int64(len(entries)) != n {
				ferr = ErrOffsetsNotReady // the counts disagree with the keys: the caller walks
				return false
			}
			e := entries[rank-before]
			cursor = makeCursor(1, SortCreatedAt, desc, arena[e.start:e.end])
			return false
		})
		if err != nil || ferr != nil {
			return cmp.Or(err, ferr)
		}
		if !found {
			if desc {
				return ErrOffsetsNotReady
			}
			// Ascending past the last item: before is the total.
			total, past = int(before), offset > int(before)
			if !past {
				return ErrOffsetsNotReady
			}
		}
		return nil
	})
	return cursor, total, past, err
}

// fenceList is a member's fences as read at one version of the ready key:
// their suffixes and counts, in order. Shared by the readers of a node:
// never changed once made.
type fenceList struct {
	version  []byte
	suffixes [][]byte
	counts   []fenceCounts
}

type fenceCacheKey struct {
	st       *storage.Store
	memberID string
}

// fenceCacheSize bounds the members whose fences a node keeps (each a few
// hundred short suffixes at 100,000 items); past it an arbitrary one
// makes room.
const fenceCacheSize = 256

// fenceCache holds the fences each node read last, per store and member.
var fenceCache = struct {
	mu sync.Mutex
	m  map[fenceCacheKey]*fenceList
}{m: map[fenceCacheKey]*fenceList{}}

// newFenceVersion returns a version for the ready key, different from
// every one before it (64 random bits).
func newFenceVersion() []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), rand.Uint64())
}

// fences returns the member's fences in tx's snapshot: the node's copy if
// it was read at the version the snapshot holds, else read from the store
// (and kept). ErrOffsetsNotReady while they are not built.
func (s Store) fences(tx *storage.Tx, memberID string) (*fenceList, error) {
	version, err := tx.Get(fenceReadyKey(memberID))
	if errors.Is(err, storage.ErrNotFound) {
		return nil, ErrOffsetsNotReady
	}
	if err != nil {
		return nil, err
	}
	key := fenceCacheKey{s.st, memberID}
	fenceCache.mu.Lock()
	fl := fenceCache.m[key]
	fenceCache.mu.Unlock()
	if fl != nil && bytes.Equal(fl.version, version) {
		return fl, nil
	}
	fl = &fenceList{version: bytes.Clone(version)}
	prefix := fencePrefix(memberID)
	err = tx.Scan(prefix, nil, false, false, func(k, v []byte) (bool, error) {
		c, err := decodeFence(v)
		if err != nil {
			return false, err
		}
		fl.suffixes = append(fl.suffixes, bytes.Clone(k[len(prefix):]))
		fl.counts = append(fl.counts, c)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	fenceCache.mu.Lock()
	if _, ok := fenceCache.m[key]; !ok && len(fenceCache.m) >= fenceCacheSize {
		for k := range fenceCache.m {
			delete(fenceCache.m, k)
			break
		}
	}
	fenceCache.m[key] = fl
	fenceCache.mu.Unlock()
	return fl, nil
}
