package agents

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// A published directory document comes back byte for byte, in several
// parts when it compresses to more than one, with the fields given and a
// new version each time; a smaller one drops the parts it no longer needs;
// every publication is notified with the directory id and its version.
func TestPublishedDirectoryDocumentRoundTrip(t *testing.T) {
	st := openTestStore(t)
	if v, err := st.PublishedVersion(t.Context(), "site"); err != nil || v != "" {
		t.Fatalf("version before any publication: %q, %v", v, err)
	}
	if _, err := st.PublishedDocument(t.Context(), "site"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("document before any publication: %v", err)
	}
	// On PostgreSQL, a subscriber of a store whose listener is not yet
	// connected is told kv.Missed when it connects (pgkv listenOnce), and a
	// notification sent before that is lost: the test subscribes once the
	// store listens, as the directory's document cache trusts only then.
	storagetest.Eventually(t, "the store listens", st.st.Live)
	got := make(chan string, 4)
	stop, err := st.st.Subscribe(DirectoryChannel, func(p string) { got <- p })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	// Random bytes do not compress: 9 MiB take three parts of 4 MiB.
	big := make([]byte, 9<<20)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(r.Uint32())
	}
	v1, err := st.PublishDocument(t.Context(), "site", &PublishedDirectory{ETag: `"a"`, GeneratedAt: 100, AgentsSum: "aa", Count: 3, Body: big})
	if err != nil {
		t.Fatal(err)
	}
	waitPayload(t, got, "site "+v1)
	doc, err := st.PublishedDocument(t.Context(), "site")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(doc.Body, big) || doc.Version != v1 || doc.ETag != `"a"` || doc.GeneratedAt != 100 || doc.AgentsSum != "aa" || doc.Count != 3 || doc.Parts != 3 {
		t.Fatalf("read back: version %q etag %s at %d sum %s count %d parts %d, body equal %v",
			doc.Version, doc.ETag, doc.GeneratedAt, doc.AgentsSum, doc.Count, doc.Parts, bytes.Equal(doc.Body, big))
	}

	small := []byte(`{"version":2,"generated_at":200,"agents":[` + strings.Repeat(`{"name":"x"},`, 1000) + `{}]}`)
	v2, err := st.PublishDocument(t.Context(), "site", &PublishedDirectory{ETag: `"b"`, GeneratedAt: 200, Body: small})
	if err != nil {
		t.Fatal(err)
	}
	if v2 == v1 {
		t.Fatal("a second publication kept the version")
	}
	waitPayload(t, got, "site "+v2)
	doc, err = st.PublishedDocument(t.Context(), "site")
	if err != nil || !bytes.Equal(doc.Body, small) || doc.Parts != 1 || doc.ETag != `"b"` {
		t.Fatalf("second read back: %v parts %d etag %s", err, doc.Parts, doc.ETag)
	}
	for n := 1; n < 3; n++ {
		err := st.st.View(t.Context(), func(tx *storage.Tx) error { _, err := tx.Get(dirPubChunkKey("site", n)); return err })
		if !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("part %d of the bigger document is left: %v", n, err)
		}
	}
	if v, err := st.PublishedVersion(t.Context(), "other"); err != nil || v != "" {
		t.Errorf("another directory's version: %q, %v", v, err)
	}
}

func waitPayload(t *testing.T, got <-chan string, want string) {
	t.Helper()
	select {
	case p := <-got:
		if p != want {
			t.Fatalf("notified %q, want %q", p, want)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("no notification %q", want)
	}
}
