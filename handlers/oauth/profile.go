package oauth

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/grants"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// ProfilePathPrefix starts a member's public page, /@username: the url
// verify_credentials gives Mastodon apps, which they open when the member
// taps their own name.
const ProfilePathPrefix = "/@"

var profileTmpl = parse("profile.html")

// profile is the data of a member's public page: only what Mastodon's
// public account shows that Hearth has (name, handle, month of joining).
type profile struct {
	DisplayName, Handle, Joined, SiteName string
}

// serveProfile is GET /@username: the member's public page, or a 404 page
// when no member of that name can be shown (none, or suspended).
func (s *Server) serveProfile(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet) {
		return
	}
	username := strings.TrimPrefix(endpoint(r.URL.Path), ProfilePathPrefix)
	if s.opts.Pages == nil {
		http.NotFound(w, r)
		return
	}
	m, err := members.Of(s.store).Member(r.Context(), username)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		s.log.Error("profile page", zap.Error(err))
		s.opts.Pages.Render(w, r, http.StatusServiceUnavailable, "Try again later", messageTmpl,
			message{Text: "This page could not be read from the store. Try again in a moment."})
		return
	}
	if m == nil || m.Suspended {
		s.opts.Pages.Render(w, r, http.StatusNotFound, "No such member", messageTmpl,
			message{Text: "No member of this site is called " + username + ".", Detail: "Check the spelling of the name after @."})
		return
	}
	p := profile{
		DisplayName: m.DisplayName,
		Handle:      "@" + m.Username + "@" + s.accountDomain(r),
		Joined:      m.CreatedAt.UTC().Format("January 2006"),
	}
	if p.DisplayName == "" {
		p.DisplayName = m.Username
	}
	s.opts.Pages.Render(w, r, http.StatusOK, p.DisplayName, profileTmpl, p)
}

// SignInReason names the app of an authorization request the sign-in page
// will return to (account.SignInReason): a member sent from an app to sign
// in sees which app asks before typing a password. "" for other pages, and
// for an unknown app (the authorization page says so after sign-in).
func (s *Server) SignInReason(ctx context.Context, returnTo string) string {
	u, err := url.Parse(returnTo)
	if err != nil || endpoint(u.Path) != AuthorizePath {
		return ""
	}
	id := u.Query().Get("client_id")
	if id == "" || len(id) > maxParamLen {
		return ""
	}
	app, err := grants.Of(s.store).App(ctx, id)
	if err != nil {
		return ""
	}
	return app.Name + " asks to use your account here. Sign in to see what it may do, then approve or deny it."
}
