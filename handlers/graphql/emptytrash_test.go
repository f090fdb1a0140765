package graphql_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/library"
)

// Inboxt's web app empties the trash ("Empty Trash Now": emptyTrash, then
// "<count> items permanently deleted"). A large trash is emptied beyond
// the request, and what another device moves to the trash meanwhile stays
// there: the answer counts the items that were in the trash when the
// member asked, and those are the ones deleted.
func TestEmptyTrashSparesWhatIsTrashedMeanwhile(t *testing.T) {
	e := newEnv(t, options{})
	const n = 5000
	lib := library.Of(e.store)
	j, err := lib.CreateImportJob(t.Context(), &library.ImportJob{MemberID: e.member.ID, Format: "POCKET", FileName: "x.zip", Staged: "/tmp/x", Total: n})
	if err != nil {
		t.Fatal(err)
	}
	entries := make([]library.ImportEntry, n)
	for i := range entries {
		entries[i] = library.ImportEntry{Pos: i + 1, Item: &library.ImportItem{URL: fmt.Sprintf("https://example.com/t/%d", i), Title: "Trashed", Status: library.StatusDeleted}}
	}
	if _, err := lib.ImportItems(t.Context(), e.member.ID, j.ID, entries, nil, 0); err != nil {
		t.Fatal(err)
	}
	late := e.saveArticle(e.member.ID, 1, nil)
	inTrash := func() int {
		c, ok, err := lib.StatusCount(context.Background(), e.member.ID, library.StatusDeleted)
		if err != nil || !ok {
			t.Fatalf("trash count: %v, %v", ok, err)
		}
		return c
	}

	// The web app's request, with the member's session.
	type answer struct {
		Data struct {
			EmptyTrash struct {
				Success bool
				Count   float64
			}
		}
		Errors []gqlError
	}
	answered := make(chan answer, 1)
	go func() {
		var a answer
		body, _ := json.Marshal(map[string]any{"query": emptyTrashMutation})
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/api/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		authorize(req, e.session)
		if resp, err := http.DefaultClient.Do(req); err != nil {
			a.Errors = []gqlError{{Message: err.Error()}}
		} else {
			if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
				a.Errors = []gqlError{{Message: err.Error()}}
			}
			resp.Body.Close()
		}
		answered <- a
	}()
	// Once some are deleted, another device (an API token) trashes an item.
	for inTrash() == n {
		time.Sleep(time.Millisecond)
	}
	e.do(updateStatusMutation, map[string]any{"data": map[string]any{"ids": []string{late.ID}, "status": "DELETED"}}, nil)
	a := <-answered
	if len(a.Errors) > 0 || !a.Data.EmptyTrash.Success || a.Data.EmptyTrash.Count != n {
		t.Fatalf("emptyTrash = %+v; want success and count %d", a, n)
	}

	for deadline := time.Now().Add(2 * time.Minute); inTrash() > 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d items still in the trash", inTrash())
		}
	}
	trash := e.allEntries(map[string]any{"first": 100, "q": "in:trash"})
	if len(trash) != 1 || trash[0].ID != late.ID {
		t.Fatalf("the trash holds %d items (%v); want only the one trashed while it was emptied, %s", len(trash), ids(trash), late.ID)
	}
}
