package caddymodule

import (
	"context"
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/hearthkit/caddy-hearth/handlers/account"
)

// The landing page: GET / shows the site's name, what
// runs there and a sign-in link, but only when nothing later in the
// site's route answers /. Each Hearth handler on the route adds its
// service and passes the request on, watching whether anything writes;
// the innermost one renders the page when nothing did (an empty answer,
// or a 404 error such as file_server's for a missing index). A file
// server, reverse proxy or respond at / keeps /: their answer goes to the
// client as it is, never buffered.

type landingKey struct{}

// landingServices are the services of the Hearth handlers a request to /
// went through, outermost first.
type landingServices struct{ list []account.Service }

// isLanding reports whether r may get the landing page.
func isLanding(r *http.Request) bool {
	return r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead)
}

// serveLanding passes r on to next and renders the landing page with pages
// if nothing answered. svc is what the calling handler offers.
func serveLanding(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, pages *account.Pages, svc account.Service) error {
	st, ok := r.Context().Value(landingKey{}).(*landingServices)
	if !ok {
		st = new(landingServices)
		r = r.WithContext(context.WithValue(r.Context(), landingKey{}, st))
	}
	st.list = append(st.list, svc)
	aw := &answerWatch{ResponseWriter: w}
	err := next.ServeHTTP(aw, r)
	if aw.answered {
		return err
	}
	var he caddyhttp.HandlerError
	if err != nil && !(errors.As(err, &he) && he.StatusCode == http.StatusNotFound) {
		return err
	}
	pages.RenderLanding(w, r, st.list)
	return nil
}

// What each Hearth handler offers, as the landing page says it.
var (
	oauthService = account.Service{
		Title: "Sign-in for apps",
		Text:  "Mastodon apps can sign in with an account here, with your approval",
	}
	graphqlService = account.Service{
		Title: "Saved articles",
		Text:  "a read-it-later library of articles, newsletters and highlights, with an API for reading apps",
		Path:  "/api/graphql",
	}
	directoryService = account.Service{
		Title: "Agent directory",
		Text:  "AI agents identified by Nostr keys, listed with what they do",
	}
)
