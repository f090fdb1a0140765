package graphql_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/importer"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// The Import page follows an import to the end of its background fetches:
// it asks to be reloaded (a Refresh to the page's own address, without a
// fragment, which a browser would take for an in-page jump) while the
// pages the import queued are fetched, says how many are done and, once
// one is, the time left (secondsLeft in importJobs too); then it says
// "finished" and stops refreshing. Until then it does not say the import
// ended, only when its entries were written.
func TestImportPageFollowsTheFetches(t *testing.T) {
	e := newEnv(t, options{Fetcher: localFetcher()})
	release := make(chan struct{})
	pages := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<html><head><title>Page %s</title></head><body><article><p>%s</p></article></body></html>`,
			r.URL.Path, strings.Repeat("A page worth keeping for later. ", 40))
	}))
	t.Cleanup(pages.Close)
	t.Cleanup(func() { close(release) })
	srv, browser := site(t, e)

	csv := fmt.Sprintf("title,url,time_added,cursor,tags,status\nOne,%[1]s/one,1600000000,a,,unread\nTwo,%[1]s/two,1600000001,b,,unread\n", pages.URL)
	status, out := upload(t, e.srv.URL, e.token, "part_000000.csv", []byte(csv), "POCKET")
	if status != http.StatusCreated {
		t.Fatalf("HTTP %d %v", status, out)
	}
	id := out["jobId"].(string)
	waitImport(t, e.store, e.member.ID, id)

	view := func() (refresh, body string) {
		t.Helper()
		resp, err := browser.Get(srv.URL + importer.PagePath)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.Header.Get("Refresh"), string(b)
	}
	secondsLeft := func() *int {
		var got struct{ ImportJobs []struct{ SecondsLeft *int } }
		e.do(`query { importJobs { secondsLeft } }`, nil, &got)
		return got.ImportJobs[0].SecondsLeft
	}
	waitFetched := func(n int) {
		t.Helper()
		for i := 0; ; i++ {
			j, _ := library.Of(e.store).ImportJob(t.Context(), e.member.ID, id)
			if j.Fetched+j.FetchFailed >= n {
				return
			}
			if i > 3000 {
				t.Fatalf("fetches: %+v", j)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	refresh, body := view()
	if refresh != "5; url="+importer.PagePath || !strings.Contains(body, "fetching pages in the background: 0 of 2 done") ||
		strings.Contains(body, ": finished") || strings.Contains(body, "Time left") || !strings.Contains(body, "An import is in progress") ||
		strings.Contains(body, ", ended ") || !strings.Contains(body, ", entries written ") {
		t.Fatalf("rows written, no page fetched: Refresh %q\n%s", refresh, body)
	}
	if s := secondsLeft(); s != nil {
		t.Errorf("secondsLeft before any fetch ended: %d, want null", *s)
	}
	release <- struct{}{}
	waitFetched(1)
	refresh, body = view()
	if refresh == "" || !strings.Contains(body, "fetching pages in the background: 1 of 2 done") || !strings.Contains(body, "Time left:") {
		t.Fatalf("one page fetched: Refresh %q\n%s", refresh, body)
	}
	if s := secondsLeft(); s == nil {
		t.Error("secondsLeft is null with one page of two fetched")
	}
	release <- struct{}{}
	waitFetched(2)
	refresh, body = view()
	if refresh != "" || !strings.Contains(body, ": finished") || strings.Contains(body, "in progress") || !strings.Contains(body, ", ended ") {
		t.Fatalf("all fetched: Refresh %q\n%s", refresh, body)
	}
}
