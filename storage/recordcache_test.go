package storage

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage/kv"
)

// testRecord is a record cached by the tests of the cache itself.
type testRecord struct{ ClientID, Name string }

func testRecordKey(id string) []byte { return key("test", "rec", id) }

// A lookup that read the record before a write committed must not cache
// what it read once the write has dropped the entry.
func TestRecordCacheIgnoresReadsOlderThanADrop(t *testing.T) {
	c := newRecordCache[testRecord](testRecordKey(""), nil)
	app := &testRecord{ClientID: "c1", Name: "old"}
	gen := c.Generation()
	c.drop([]string{string(testRecordKey("c1"))}) // a write committed meanwhile
	c.Add(gen, "c1", app)
	if got := c.Get("c1"); got != nil {
		t.Fatalf("a read older than the write was cached: %+v", got)
	}
	c.Add(c.Generation(), "c1", app)
	if got := c.Get("c1"); got == nil || got.Name != "old" {
		t.Fatalf("a current read was not cached: %+v", got)
	}
	c.drop([]string{string(key("member", "id", "c1"))}) // another kind's key
	if got := c.Get("c1"); got == nil {
		t.Fatal("a write to another kind of record dropped the entry")
	}
}

func TestRecordCacheIsBounded(t *testing.T) {
	c := newRecordCache[testRecord](testRecordKey(""), nil)
	for i := range recordCacheSize + 10 {
		id := fmt.Sprint(i)
		c.Add(c.Generation(), id, &testRecord{ClientID: id})
	}
	if n := len(c.records); n != recordCacheSize {
		t.Fatalf("%d cached records, want %d", n, recordCacheSize)
	}
}

// The notifications of a commit's cached keys: deduplicated, split to fit
// kv.MaxPayload, or one "drop everything" when they are many or not plain
// ASCII; each starts with the sending node.
func TestCacheNotes(t *testing.T) {
	if got := cacheNotes("n1", []string{"member/id/1", "oauth/token/ab", "member/id/1"}); len(got) != 1 || got[0] != "n1\nmember/id/1\noauth/token/ab" {
		t.Fatalf("notes %q", got)
	}
	if got := cacheNotes("n1", nil); len(got) != 0 {
		t.Fatalf("notes without keys: %q", got)
	}
	var keys []string
	for i := range 300 { // 300 × 76 bytes: three notifications
		keys = append(keys, fmt.Sprintf("oauth/token/%064d", i))
	}
	got := cacheNotes("n1", keys)
	if len(got) != 3 {
		t.Fatalf("%d notes for 300 tokens", len(got))
	}
	var back []string
	for _, p := range got {
		if len(p) > kv.MaxPayload || !strings.HasPrefix(p, "n1\n") {
			t.Fatalf("note of %d bytes: %.20q…", len(p), p)
		}
		back = append(back, strings.Split(p, "\n")[1:]...)
	}
	if !slices.Equal(back, keys) {
		t.Fatal("the notes do not carry the keys")
	}
	for range 300 {
		keys = append(keys, keys[len(keys)-300]+"x")
	}
	if got := cacheNotes("n1", append(keys, keys...)); len(got) != 1 || got[0] != "n1\n*" {
		t.Fatalf("many keys: %d notes", len(got))
	}
	if got := cacheNotes("n1", []string{"oauth/app/é"}); len(got) != 1 || got[0] != "n1\n*" {
		t.Fatalf("a key that is not ASCII: %q", got)
	}
}
