package graphql_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/inboxtapi"
)

// GET /api/config answers Inboxt's runtime configuration (the keys its web
// app's runtime-config.ts reads @ 45f4314): the site as appUrl, which the
// app shows as the API's base URL, and no error reporting.
func TestConfigIsInboxtsRuntimeConfig(t *testing.T) {
	e := newEnv(t, options{})
	resp, err := http.Get(e.srv.URL + inboxtapi.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %d %s %s", inboxtapi.ConfigPath, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	if len(got) != 3 || got["appUrl"] != e.srv.URL || got["webErrorsDsn"] != nil || got["apiErrorsDsnConfigured"] != false {
		t.Fatalf("config = %s", b)
	}
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+inboxtapi.ConfigPath, nil)
	if e.handles(req) {
		t.Fatal("POST /api/config is taken; only reads are Hearth's")
	}
}
