package graphql_test

import (
	"archive/zip"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/graphql"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// GET /api/export gives an API token the export zip: its Markdown files
// are Markdown (headings, lists, links made absolute, emphasis, quotes,
// code), and each item's file is dated with the item's last change, not
// 1980.
func TestExportAPIGivesATokenTheZipWithRealMarkdownAndItemDates(t *testing.T) {
	e := newEnv(t, graphql.Options{NoImportFetch: true})
	e.saveArticle(e.member.ID, 1, func(in *library.NewItem) {
		in.Title = "Levain"
		in.HTML = `<h2>Method</h2><ul><li>flour</li><li>water</li></ul><p>Mix <em>slowly</em>, see <a href="/recipe">the recipe</a>.</p>` +
			`<blockquote><p>Patience is an ingredient.</p></blockquote><p>Feed the <code>levain</code> daily.</p>`
	})
	// An item saved in 2020 (imported from Pocket with its date).
	status, out := upload(t, e.srv.URL, e.token, "part_000000.csv", []byte("title,url,time_added,cursor,tags,status\nOld,https://example.org/old,1600000000,a,,unread\n"), "")
	if status != http.StatusCreated {
		t.Fatalf("import: HTTP %d %v", status, out)
	}
	waitImport(t, e.store, e.member.ID, out["jobId"].(string))

	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+graphql.ExportAPIPath, nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/zip" {
		t.Fatalf("HTTP %d %v %.200s", resp.StatusCode, resp.Header, data)
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("not a zip: %v", err)
	}
	var md string
	var oldDate time.Time
	for _, f := range zr.File {
		if f.Modified.Year() < 2000 {
			t.Errorf("%s dated %v", f.Name, f.Modified)
		}
		if strings.HasSuffix(f.Name, "-old.md") {
			oldDate = f.Modified
		}
		if strings.HasSuffix(f.Name, "-levain.md") {
			rc, _ := f.Open()
			b, _ := io.ReadAll(rc)
			rc.Close()
			md = string(b)
		}
	}
	if !oldDate.Equal(time.Unix(1600000000, 0)) {
		t.Errorf("the 2020 item's file is dated %v", oldDate)
	}
	for _, want := range []string{"## Method\n", "- flour\n- water\n", "Mix *slowly*, see [the recipe](https://example.com/recipe).",
		"> Patience is an ingredient.", "Feed the `levain` daily."} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks %q:\n%s", want, md)
		}
	}

	// A request without a credential gets Inboxt's REST error, no zip.
	resp, err = http.Get(e.srv.URL + graphql.ExportAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("without a token: HTTP %d %v", resp.StatusCode, resp.Header)
	}
}
