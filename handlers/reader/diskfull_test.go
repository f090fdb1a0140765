//go:build linux

package reader_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// On a full disk the reader's buttons answer 507 with Retry-After and a
// page that says the disk is full (the library still reads fine, so "can't
// be reached" would send the member looking for the wrong fault), as the
// member pages say it; the item is unchanged, and the same button works
// once space is freed.
func TestReaderOnAFullDiskSaysSoAndChangesNothing(t *testing.T) {
	const reserve = 16 << 20
	disk := storagetest.NewSmallDisk(t, 64<<20)
	st := disk.Store(reserve, nil)
	f := newFixtureOn(t, st)
	it := f.save("Alpha", "a.example", 100, library.NewItem{})
	freeSpace := disk.Fill(reserve / 2)

	archive := url.Values{"id": {it.ID}, "action": {"archive"}, "return": {"/library"}}
	resp, err := f.client.PostForm(f.srv.URL+"/library/items", archive)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInsufficientStorage || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("archive on a full disk: HTTP %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if !strings.Contains(string(b), "disk is full") {
		t.Fatalf("the page does not say the disk is full:\n%s", b)
	}
	if got := f.item(it.ID).Status; got != library.StatusActive {
		t.Fatalf("the refused archive left the item %s", got)
	}
	if code, _, _ := f.get("/library"); code != http.StatusOK {
		t.Fatalf("the library on a full disk: HTTP %d", code)
	}

	freeSpace()
	if resp := f.post("/library/items", archive); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("archive once space was freed: HTTP %d", resp.StatusCode)
	}
	if got, err := library.Of(st).SavedItem(context.Background(), f.member.ID, it.ID); err != nil || got.Status != library.StatusArchived {
		t.Fatalf("after the archive: %+v, %v", got, err)
	}
}
