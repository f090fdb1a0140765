//go:build linux

package graphql_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// On a full disk Omnivore's saves answer what Omnivore's clients read:
// saveUrl.errorCodes (the npm client's saveByUrl) and savePage.errorCodes
// (the browser extension, whose toolbar waits for ever on a GraphQL
// error without data), here UNKNOWN, Omnivore's code for a save that
// failed (SaveErrorCode, packages/api/src/schema.ts, omnivore-app/omnivore
// @322ce62), with a message saying the disk is full; HTTP 200 with
// Retry-After, as every full-disk answer of /api/graphql. Nothing is saved
// and no label made; once space is freed the same saves succeed.
func TestOmnivoreSavesOnAFullDiskAnswerSaveError(t *testing.T) {
	const reserve = 16 << 20
	disk := storagetest.NewSmallDisk(t, 64<<20)
	st := disk.Store(reserve, nil)
	api := newAPI(st, options{Fetcher: localFetcher()})
	t.Cleanup(func() { api.Close() })
	srv := httptest.NewServer(served(api))
	t.Cleanup(srv.Close)
	e := &env{t: t, store: st, api: api, srv: srv}
	e.member, e.token = e.newMember("alice")
	site := articleSite(t, "Baking Bread")
	saveURL := map[string]any{"url": site.URL + "/bread", "source": "API-Client", "clientRequestId": "",
		"labels": []map[string]any{{"name": "Made for the save"}}}
	savePage := map[string]any{"url": "https://example.com/slow-bread", "source": "extension", "clientRequestId": "x",
		"title": "Slow bread", "originalContent": extPage}
	// The clients' operations, asking also for the message they do not read.
	queries := map[string]string{
		"saveUrl":  strings.Replace(omnivoreSaveByURL, "errorCodes", "errorCodes message", 1),
		"savePage": strings.Replace(extSavePage, "errorCodes", "errorCodes message", 1),
	}
	inputs := map[string]map[string]any{"saveUrl": saveURL, "savePage": savePage}
	freeSpace := disk.Fill(reserve / 2)

	for op, q := range queries {
		resp, body := e.postBare("/api/graphql", e.token, map[string]any{"query": q, "variables": map[string]any{"input": inputs[op]}})
		var a struct {
			Data map[string]*struct {
				Typename   string   `json:"__typename"`
				ErrorCodes []string `json:"errorCodes"`
				Message    *string  `json:"message"`
			} `json:"data"`
			Errors []gqlError `json:"errors"`
		}
		if err := json.Unmarshal(body, &a); err != nil {
			t.Fatalf("%s: %s", op, body)
		}
		got := a.Data[op]
		if resp.StatusCode != http.StatusOK || len(a.Errors) > 0 || got == nil {
			t.Fatalf("%s on a full disk: HTTP %d %s; want 200 with a SaveError in data", op, resp.StatusCode, body)
		}
		if len(got.ErrorCodes) != 1 || got.ErrorCodes[0] != "UNKNOWN" || got.Message == nil || !strings.Contains(*got.Message, "disk is full") {
			t.Errorf("%s on a full disk: %s", op, body)
		}
		if resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s on a full disk: no Retry-After", op)
		}
	}
	if got := e.omnivoreSaved("in:all"); len(got) != 0 {
		t.Fatalf("saves refused for space saved %+v", got)
	}
	if ls, _ := library.Of(st).Labels(t.Context(), e.member.ID); len(ls) != 0 {
		t.Fatalf("a save refused for space made labels %+v", ls)
	}

	freeSpace()
	e.omnivoreSave(map[string]any{"url": saveURL["url"], "labels": saveURL["labels"]})
	if a := e.ext(e.token, extSavePage, savePage).Data["savePage"]; a.ClientRequestID == "" || len(a.ErrorCodes) > 0 {
		t.Fatalf("savePage once space was freed: %+v", a)
	}
	if got := e.omnivoreSaved("in:all"); len(got) != 2 {
		t.Fatalf("after space was freed: %+v", got)
	}
}
