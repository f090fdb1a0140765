package graphql_test

import (
	"archive/zip"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	hexport "github.com/hearthkit/caddy-hearth/handlers/export"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// GET /api/export gives an API token the export zip: its Markdown files
// are Markdown (headings, lists, links made absolute, emphasis, quotes,
// code), and each item's file is dated with the item's last change, not
// 1980.
func TestExportAPIGivesATokenTheZipWithRealMarkdownAndItemDates(t *testing.T) {
	e := newEnv(t, options{NoImportFetch: true})
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

	resp, data := e.get(hexport.APIPath)
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
	resp, err = http.Get(e.srv.URL + hexport.APIPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("without a token: HTTP %d %v", resp.StatusCode, resp.Header)
	}
}

// requestExport answers what Inboxt's web app downloads, a data: URL with
// #filename= (ExportDataModal.tsx, Inboxt/inboxt@45f4314): the highlights
// in the chosen format, or the Export page's zip; an export too large for
// a URL is refused with where to get it, which the app's dialog shows.
func TestRequestExportAnswersDataURLsTheAppDownloads(t *testing.T) {
	e := newEnv(t, options{NoImportFetch: true})
	art := e.saveArticle(e.member.ID, 1, func(in *library.NewItem) { in.Title = "Bread & Salt" })
	if _, err := library.Of(e.store).CreateHighlight(t.Context(), e.member.ID, art.ID, []library.HighlightSegment{{XPath: "/p", EndOffset: 4, Text: "Body <1>"}}, ""); err != nil {
		t.Fatal(err)
	}
	export := func(typ, format string) (name, mimeType string, body []byte) {
		t.Helper()
		var out struct{ RequestExport string }
		e.doAs(e.session, `mutation($t: ExportType!, $f: ExportHighlightsFormat!) { requestExport(data: {type: $t, formatForHighlights: $f}) }`,
			map[string]any{"t": typ, "f": format}, &out)
		u, frag, _ := strings.Cut(out.RequestExport, "#filename=")
		head, data, ok := strings.Cut(strings.TrimPrefix(u, "data:"), ";base64,")
		if !strings.HasPrefix(u, "data:") || !ok || frag == "" {
			t.Fatalf("requestExport(%s, %s) = %.200q", typ, format, out.RequestExport)
		}
		body, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			t.Fatal(err)
		}
		return frag, head, body
	}
	for format, want := range map[string][]string{
		"HTML":     {"text/html; charset=utf-8", ".html", `<h3><a href="https://example.com/a/1">Bread &amp; Salt</a></h3>`, "<blockquote>Body &lt;1&gt;</blockquote>"},
		"MARKDOWN": {"text/markdown; charset=utf-8", ".md", "### [Bread & Salt](https://example.com/a/1)\n_", "\n\n> Body <1>\n"},
		"TEXT":     {"text/plain; charset=utf-8", ".txt", "Bread & Salt · https://example.com/a/1 · ", " UTC\nBody <1>\n"},
	} {
		name, mimeType, body := export("HIGHLIGHTS", format)
		if mimeType != want[0] || !strings.HasPrefix(name, "highlights_") || !strings.HasSuffix(name, want[1]) ||
			!strings.Contains(string(body), want[2]) || !strings.Contains(string(body), want[3]) {
			t.Errorf("%s: %s %s\n%s", format, name, mimeType, body)
		}
	}
	// The file is named after the day of the export: the day before or
	// after the request (a run across midnight sees either).
	dayBefore := time.Now().UTC().Format("2006-01-02")
	name, mimeType, body := export("ALL", "HTML")
	dayAfter := time.Now().UTC().Format("2006-01-02")
	if mimeType != "application/zip" || name != "hearth-export-alice-"+dayBefore+".zip" && name != "hearth-export-alice-"+dayAfter+".zip" {
		t.Errorf("ALL: %s %s", name, mimeType)
	}
	zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
	if err != nil {
		t.Fatalf("ALL is not a zip: %v", err)
	}
	var files []string
	for _, f := range zr.File {
		files = append(files, f.Name)
	}
	if len(files) != 3 || files[0] != "labels.json" || files[1] != "saved_items.json" || !strings.HasPrefix(files[2], "markdown/") {
		t.Errorf("ALL holds %v", files)
	}

	// Over what a browser takes as a URL: a message with where to get it.
	for i := 2; i < 6; i++ {
		noise := make([]byte, 600<<10)
		_, _ = rand.Read(noise)
		e.saveArticle(e.member.ID, i, func(in *library.NewItem) { in.Text = base64.StdEncoding.EncodeToString(noise) })
	}
	r := e.wantError(e.session, `mutation { requestExport(data: {type: ALL, formatForHighlights: HTML}) }`, nil, 200, "BAD_REQUEST")
	if msg := r.Errors[0].Message; !strings.Contains(msg, hexport.PagePath) || !strings.Contains(msg, hexport.APIPath) {
		t.Errorf("too large: %q", msg)
	}
}

// A member's exports run one at a time, and so do its books of a search
// (up to 1,000 items each, with their images, deflated): while a zip
// downloads (its reader slower than the store), a second GET of the same
// route is refused with 429 in Inboxt's REST shape and a Retry-After, and
// the first zip is whole; once it has been read, the next one runs.
func TestASecondExportWhileTheFirstDownloadsIsRefused(t *testing.T) {
	e := newEnv(t, options{NoImportFetch: true})
	// Contents that do not compress, more than the connection's buffers
	// hold, so the first export waits on its reader.
	for i := 1; i <= 32; i++ {
		noise := make([]byte, 384<<10)
		rand.Read(noise)
		e.saveArticle(e.member.ID, i, func(in *library.NewItem) {
			in.HTML = "<p>" + base64.StdEncoding.EncodeToString(noise) + "</p>"
			in.Text = ""
		})
	}
	for _, path := range []string{hexport.APIPath, hexport.EPUBPath} {
		t.Run(path, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
			req.Header.Set("Authorization", "Bearer "+e.token)
			first, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer first.Body.Close()
			if first.StatusCode != http.StatusOK {
				t.Fatalf("the first export: HTTP %d", first.StatusCode)
			}

			resp, body := e.get(path)
			var refusal struct {
				Status  int    `json:"status"`
				Message string `json:"message"`
				Path    string `json:"path"`
			}
			if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || json.Unmarshal(body, &refusal) != nil ||
				refusal.Status != http.StatusTooManyRequests || refusal.Path != path || refusal.Message == "" {
				t.Fatalf("a second export while the first downloads: HTTP %d %v %.200q", resp.StatusCode, resp.Header, body)
			}

			data, err := io.ReadAll(first.Body)
			if err != nil {
				t.Fatal(err)
			}
			zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
			if err != nil || len(zr.File) < 32 {
				t.Fatalf("the first export after the refusal: %d bytes, %v", len(data), err)
			}
			first.Body.Close()
			for range 100 { // the handler returns just after its last write
				if resp, _ = e.get(path); resp.StatusCode != http.StatusTooManyRequests {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("an export once the first has been read: HTTP %d", resp.StatusCode)
			}
		})
	}
}
