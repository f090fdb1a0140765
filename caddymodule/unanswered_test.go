package caddymodule

import (
	"bytes"
	"fmt"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// loggingCaddyfile is hearthCaddyfile with Caddy's default log written to
// logFile (only the loggers include names, when given).
func loggingCaddyfile(storageDir, logFile, include, sites string) string {
	if include != "" {
		include = "\n\t\tinclude " + include
	}
	return strings.Replace(hearthCaddyfile(storageDir, sites), "\thearth {",
		fmt.Sprintf("\tlog {\n\t\toutput file %q%s\n\t}\n\thearth {", logFile, include), 1)
}

type answer struct {
	status      int
	contentType string
	body        string
}

func fetchAnswer(t *testing.T, method, url, host string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, b := send(t, req)
	return answer{resp.StatusCode, resp.Header.Get("Content-Type"), string(b)}
}

// A path nothing in the site answers gets the site's 404 page (JSON on API
// paths, Hearth's icon at /favicon.ico) instead of Caddy's empty 200; what
// a later handler answers stays its answer, a file_server's 404 error
// included (the site's handle_errors may want it); /@username is a member's
// public page; a host name no site block names gets a page and a log line
// naming the site address to add; a path below a settings page is not that
// page.
func TestUnansweredPaths(t *testing.T) {
	dir, www := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(www, "hello.txt"), []byte("hello from the site\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	site := fmt.Sprintf(`%s {
	hearth_oauth {
		instance_title "Maple Street Commons"
	}
	hearth_graphql
	hearth_directory
	respond /later "answered later"
	handle /files/* {
		root * %q
		uri strip_prefix /files
		file_server
	}
}
http://:9080 {
	hearth_unknown_host
}
`, testSite, www)
	logFile := filepath.Join(t.TempDir(), "hearth.log")
	startHearth(t, loggingCaddyfile(dir, logFile, "http.handlers.hearth_unknown_host", site))
	adminJSONOK(t, http.MethodPost, "/hearth/members", `{"username":"alice","display_name":"Alice Liddell","password":"battery staple"}`, http.StatusCreated, nil)
	adminJSONOK(t, http.MethodPost, "/hearth/members", `{"username":"mallory","password":"battery staple"}`, http.StatusCreated, nil)
	adminJSONOK(t, http.MethodPost, "/hearth/members/mallory/suspend", "", http.StatusOK, nil)

	for _, tc := range []struct {
		method, path string
		status       int
		contentType  string
		want         []string
	}{
		{"GET", "/settingz", 404, "text/html; charset=utf-8", []string{"<title>Page not found · Maple Street Commons</title>",
			`<a class="brand" href="/">Maple Street Commons</a>`, "Nothing on this site answers /settingz", `href="/"`}},
		{"POST", "/nothing/here", 404, "text/html; charset=utf-8", []string{"<title>Page not found"}},
		{"GET", "/api/nothing", 404, "application/json; charset=utf-8", []string{`{"error":"Record not found"}`}},
		{"GET", "/.well-known/nothing", 404, "application/json; charset=utf-8", []string{`{"error":"Record not found"}`}},
		{"GET", "/later", 200, "text/plain; charset=utf-8", []string{"answered later"}},
		{"GET", "/files/hello.txt", 200, "text/plain; charset=utf-8", []string{"hello from the site"}},
		// file_server's 404 error: Caddy's own empty 404, not Hearth's page.
		{"GET", "/files/missing.txt", 404, "", nil},
		{"GET", "/@alice", 200, "text/html; charset=utf-8", []string{"<title>Alice Liddell · Maple Street Commons</title>",
			"<h1>Alice Liddell</h1>", "@alice@localhost", "Member of this site since"}},
		{"GET", "/@nobody", 404, "text/html; charset=utf-8", []string{"No member of this site is called nobody."}},
		{"GET", "/@mallory", 404, "text/html; charset=utf-8", []string{"No member of this site is called mallory."}},
	} {
		got := fetchAnswer(t, tc.method, testSite+tc.path, "")
		if got.status != tc.status || got.contentType != tc.contentType {
			t.Errorf("%s %s: HTTP %d %q, want %d %q\n%s", tc.method, tc.path, got.status, got.contentType, tc.status, tc.contentType, got.body)
			continue
		}
		if tc.want == nil && got.body != "" {
			t.Errorf("%s %s: %q, want the later handler's empty answer", tc.method, tc.path, got.body)
		}
		for _, w := range tc.want {
			if !strings.Contains(got.body, w) {
				t.Errorf("%s %s lacks %q:\n%s", tc.method, tc.path, w, got.body)
			}
		}
	}

	// Below a settings page, signed in: the site's 404 page, not the
	// settings page again (a 200) nor Go's plain-text 404 (below /oauth/,
	// the OAuth server's, as for /oauth/nothing); the export's download is
	// the one path below a page.
	b := newBrowser(t, testSite)
	b.signIn("alice", "battery staple")
	for _, pg := range []string{"/settings/api_tokens", "/settings/export", "/settings/import", "/settings/saving", "/settings/email",
		"/oauth/authorized_applications"} {
		want := "<title>Page not found · Maple Street Commons</title>"
		if strings.HasPrefix(pg, "/oauth/") {
			want = `{"error":"Record not found"}`
		}
		if got := b.get(pg + "/nothing"); got.StatusCode != 404 || !strings.Contains(got.body, want) {
			t.Errorf("GET %s/nothing signed in: HTTP %d %q\n%s", pg, got.StatusCode, got.Header.Get("Content-Type"), got.body)
		}
	}
	if got := b.get("/settings/export/hearth-export.zip"); got.StatusCode != 200 || got.Header.Get("Content-Type") != "application/zip" {
		t.Errorf("the export's download: HTTP %d %q", got.StatusCode, got.Header.Get("Content-Type"))
	}

	icon := fetchAnswer(t, "GET", testSite+"/favicon.ico", "")
	if icon.status != 200 || icon.contentType != "image/x-icon" || len(icon.body) < 22 {
		t.Fatalf("/favicon.ico: HTTP %d %q, %d bytes", icon.status, icon.contentType, len(icon.body))
	}
	// An ICO directory of one image, whose data is a 32×32 PNG.
	if img, err := png.Decode(bytes.NewReader([]byte(icon.body[22:]))); !strings.HasPrefix(icon.body, "\x00\x00\x01\x00\x01\x00") ||
		err != nil || img.Bounds().Dx() != 32 {
		t.Errorf("/favicon.ico is not a one-image ICO holding a PNG: %v", err)
	}

	other := fetchAnswer(t, "GET", testSite+"/settings", "mybox.example:9080")
	if other.status != 404 || !strings.Contains(other.body, "add http://mybox.example:9080 to the site&#39;s addresses in the Caddyfile") ||
		!strings.Contains(other.body, "give it a site block of its own with https:// and tls internal") {
		t.Errorf("another host name: HTTP %d\n%s", other.status, other.body)
	}
	// A loopback name over plain HTTP keeps its sign-in: no such advice.
	if loop := fetchAnswer(t, "GET", testSite+"/", "box.localhost:9080"); loop.status != 404 ||
		!strings.Contains(loop.body, "add http://box.localhost:9080") || strings.Contains(loop.body, "tls internal") {
		t.Errorf("a loopback host name: HTTP %d\n%s", loop.status, loop.body)
	}
	// Under that name every path is this page: it offers no sign-in and no
	// home link, which would only bring it back.
	if strings.Contains(other.body, "/auth/sign_in") || strings.Contains(other.body, `href="/"`) ||
		!strings.Contains(other.body, `<span class="brand">`) {
		t.Errorf("the page for another host name links back to itself:\n%s", other.body)
	}
	fetchAnswer(t, "GET", testSite+"/again", "mybox.example:9080")
	logged, _ := os.ReadFile(logFile)
	if n := strings.Count(string(logged), `"add_site_address":"http://mybox.example:9080"`); n != 1 {
		t.Errorf("the log names the site address to add %d times, want once:\n%s", n, logged)
	}
}
