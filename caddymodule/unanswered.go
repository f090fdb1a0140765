package caddymodule

import (
	"errors"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/oauth"
)

// orNotFound is the rest of the site's route, seen from a Hearth handler:
// it passes a request the handler does not serve on to next and, when
// nothing there wrote a response, answers it instead of leaving Caddy's
// empty 200 (what Caddy sends when no handler writes): the site's 404 page
// in the member pages' look, a JSON 404 on API paths, Hearth's icon at
// /favicon.ico. Each Hearth handler of a route wraps its next this way;
// the innermost one answers, and the outer ones see that it did.
//
// A 404 error from a later handler (a file_server's missing file) is that
// handler's answer and goes on to Caddy's error handling (the site's
// handle_errors, if any), except on API paths, where clients expect JSON.
type orNotFound struct {
	next  caddyhttp.Handler
	pages *account.Pages
}

func (n orNotFound) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	aw := &answerWatch{ResponseWriter: w}
	err := n.next.ServeHTTP(aw, r)
	if aw.answered {
		return err
	}
	api := isAPIPath(r.URL.Path)
	if err != nil {
		var he caddyhttp.HandlerError
		if !api || !errors.As(err, &he) || he.StatusCode != http.StatusNotFound {
			return err
		}
	}
	switch {
	case api:
		oauth.NotFound(w)
	case r.URL.Path == account.FaviconPath:
		account.ServeFavicon(w, r)
	default:
		n.pages.NotFound(w, r)
	}
	return nil
}

// isAPIPath reports whether path is one programs call rather than people
// open: Mastodon's API and OAuth paths and everything under /api/ and
// /.well-known/.
func isAPIPath(path string) bool {
	return oauth.IsAPIPath(path) || strings.HasPrefix(path, "/api/") || path == "/api" ||
		strings.HasPrefix(path, "/.well-known/")
}
