package caddymodule

import (
	"archive/zip"
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// getWithToken is a GET of the site's path with the API token: status
// and body.
func getWithToken(t *testing.T, token, path string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, testSite+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// onlyEntry is the id of the member's one item.
func onlyEntry(t *testing.T, token string) string {
	t.Helper()
	got := allEntries(t, token, map[string]any{"first": 10}, nil)
	if len(got) != 1 {
		t.Fatalf("entries: %+v", got)
	}
	return got[0].ID
}

// A library taken out of one Hearth and brought into another keeps its
// images, through Caddy: an article saved from its URL has its image
// fetched and stored; its export zip, downloaded with an API token, is
// imported with caddy hearth import after Caddy moved to a fresh store;
// there the new item's reader page shows the image from the site, the
// site serves its bytes, and the new site's export holds it again.
func TestExportedImagesComeBackOnAFreshStoreThroughCaddy(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 4, 3))
	img.Set(1, 1, color.RGBA{200, 10, 10, 255})
	var pngData bytes.Buffer
	if err := png.Encode(&pngData, img); err != nil {
		t.Fatal(err)
	}
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/loaf.png":
			w.Write(pngData.Bytes())
		case "/post":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, `<!doctype html><html><head><title>Bread at home</title></head><body><article><h1>Bread at home</h1>`+
				strings.Repeat("<p>Flour, water, salt and time make bread; the crust comes from a hot oven and steam.</p>", 10)+
				`<p><img src="/loaf.png" alt="A loaf" width="4" height="3"></p></article></body></html>`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer origin.Close()
	fromDir, toDir, files := t.TempDir(), t.TempDir(), t.TempDir()

	addr := startWithAlice(t, hearthCaddyfile(fromDir, graphqlSites()))
	token := createAPIToken(t, "alice")
	gqlData(t, token, `mutation($data: AddArticleFromUrlInput!) { addArticleFromUrl(data: $data) { success } }`,
		map[string]any{"data": map[string]any{"url": origin.URL + "/post"}}, nil)
	var id string
	for deadline := time.Now().Add(time.Minute); ; {
		if got := allEntries(t, token, map[string]any{"first": 10}, nil); len(got) == 1 {
			id = got[0].ID
			if status, _ := getWithToken(t, token, "/api/images/"+id+"/0"); status == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the article's image was not stored")
		}
		time.Sleep(250 * time.Millisecond)
	}
	status, export := getWithToken(t, token, "/api/export")
	if status != http.StatusOK {
		t.Fatalf("export: HTTP %d", status)
	}
	exported := filepath.Join(files, "hearth-export-alice.zip")
	if err := os.WriteFile(exported, export, 0o600); err != nil {
		t.Fatal(err)
	}

	// Another site: Caddy on a fresh store, alice made again.
	loadCaddyfile(t, hearthCaddyfile(toDir, graphqlSites()))
	if _, err := runHearth(t, "a good password\n", "member", "add", "alice", "--password-stdin", addr); err != nil {
		t.Fatal(err)
	}
	out, err := runHearth(t, "", "import", "--member", "alice", exported, addr)
	if err != nil || !strings.Contains(out, "1 new, 0 already saved, 0 not imported; 1 images stored, 0 skipped") {
		t.Fatalf("import: %q, %v", out, err)
	}
	token = createAPIToken(t, "alice")
	newID := onlyEntry(t, token)
	br := newBrowser(t, testSite)
	br.signIn("alice", "a good password")
	p := br.get("/library/item/" + newID)
	if want := `<img src="/library/image/` + newID + `/0" alt="A loaf" width="4" height="3">`; p.StatusCode != http.StatusOK || !strings.Contains(p.body, want) {
		t.Fatalf("reader page: HTTP %d, no %s:\n%s", p.StatusCode, want, p.body)
	}
	if p := br.get("/library/image/" + newID + "/0"); p.StatusCode != http.StatusOK || p.body != pngData.String() || p.Header.Get("Content-Type") != "image/png" {
		t.Errorf("the reader's image: HTTP %d, %d bytes, %s", p.StatusCode, len(p.body), p.Header.Get("Content-Type"))
	}
	if status, b := getWithToken(t, token, "/api/images/"+newID+"/0"); status != http.StatusOK || !bytes.Equal(b, pngData.Bytes()) {
		t.Errorf("/api/images: HTTP %d, %d bytes", status, len(b))
	}
	status, again := getWithToken(t, token, "/api/export")
	zr, err := zip.NewReader(bytes.NewReader(again), int64(len(again)))
	if status != http.StatusOK || err != nil {
		t.Fatalf("second export: HTTP %d, %v", status, err)
	}
	f, err := zr.Open("images/" + newID + "/0.png")
	if err != nil {
		t.Fatalf("the second export lacks the image: %v", err)
	}
	defer f.Close()
	if b, _ := io.ReadAll(f); !bytes.Equal(b, pngData.Bytes()) {
		t.Errorf("the second export's image differs: %d bytes", len(b))
	}
}
