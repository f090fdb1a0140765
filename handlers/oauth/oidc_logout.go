package oauth

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"

	"github.com/go-jose/go-jose/v4"

	"github.com/hearthkit/caddy-hearth/storage/grants"
)

var logoutTmpl = parse("oidc_logout.html")

// hintClaims are the claims RP-initiated logout reads from id_token_hint.
type hintClaims struct {
	Issuer   string `json:"iss"`
	Subject  string `json:"sub"`
	Audience string `json:"aud"`
}

// readHint verifies an ID token this server signed (with any published
// key; an expired one is still a fine hint, RP-Initiated Logout 1.0
// section 2) and returns its claims, or nil.
func (s *Server) readHint(ctx context.Context, r *http.Request, hint string) *hintClaims {
	if hint == "" || len(hint) > 16<<10 {
		return nil
	}
	obj, err := jose.ParseSignedCompact(hint, []jose.SignatureAlgorithm{jose.RS256, jose.ES256})
	if err != nil || len(obj.Signatures) != 1 {
		return nil
	}
	keys, err := grants.Of(s.store).SigningKeys(ctx, s.keyPolicy())
	if err != nil {
		return nil
	}
	kid := obj.Signatures[0].Header.KeyID
	alg := obj.Signatures[0].Header.Algorithm
	for _, k := range keys.Published {
		var pub any
		switch {
		case k.ID == kid && alg == string(jose.RS256):
			pub = &k.Private().PublicKey
		case k.ECKeyID() == kid && k.ECPrivate() != nil && alg == string(jose.ES256):
			pub = &k.ECPrivate().PublicKey
		default:
			continue
		}
		payload, err := obj.Verify(pub)
		if err != nil {
			return nil
		}
		var c hintClaims
		if json.Unmarshal(payload, &c) != nil || c.Issuer != s.issuer(r) {
			return nil
		}
		return &c
	}
	return nil
}

// serveEndSession is RP-initiated logout (RP-Initiated Logout 1.0): the
// member confirms on a page (a POST from this site: a link from another
// site signs nobody out, as for the sign-out page), is signed out and sent
// back to a post_logout_redirect_uri the client registered, with state. A
// member already signed out goes back at once.
func (s *Server) serveEndSession(w http.ResponseWriter, r *http.Request) {
	p := s.opts.Pages
	if r.URL.Query().Has("id_token_hint") {
		// The URL carries the member's ID token: keep it out of the
		// access log, and out of the Referer of the confirmation's POST
		// (whose request headers the access log records).
		s.opts.KeepOutOfAccessLog(r)
		w.Header().Set("Referrer-Policy", "no-referrer")
	}
	if p == nil || !allow(w, r, http.MethodGet, http.MethodPost) {
		if p == nil {
			http.Error(w, "Sign-out is not available on this server.", http.StatusServiceUnavailable)
		}
		return
	}
	if r.Method == http.MethodPost {
		p.Protect(http.HandlerFunc(s.endSession)).ServeHTTP(w, r)
		return
	}
	s.endSession(w, r)
}

func (s *Server) endSession(w http.ResponseWriter, r *http.Request) {
	p := s.opts.Pages
	if r.Method == http.MethodPost && !p.ParseForm(w, r) {
		return
	}
	v := r.URL.Query()
	if r.Method == http.MethodPost {
		v = r.PostForm
	}
	for _, k := range []string{"id_token_hint", "client_id", "post_logout_redirect_uri", "state"} {
		if len(v[k]) > 1 || len(v.Get(k)) > 16<<10 {
			s.errorPage(w, r, http.StatusBadRequest, "The sign-out request is malformed: "+k+" must be sent once.")
			return
		}
	}
	ctx := r.Context()
	hint := s.readHint(ctx, r, v.Get("id_token_hint"))
	if v.Get("id_token_hint") != "" && hint == nil {
		s.errorPage(w, r, http.StatusBadRequest, "The sign-out request carries an ID token this site did not issue.")
		return
	}
	clientID := v.Get("client_id")
	if hint != nil {
		if clientID != "" && clientID != hint.Audience {
			s.errorPage(w, r, http.StatusBadRequest, "The sign-out request names two different applications.")
			return
		}
		clientID = hint.Audience
	}
	back := v.Get("post_logout_redirect_uri")
	var app *grants.App
	if clientID != "" {
		a, err := grants.Of(s.store).App(ctx, clientID)
		if err == nil && a.Client != nil {
			app = a
		}
	}
	if back != "" && (app == nil || !slices.Contains(app.Client.PostLogoutRedirectURIs, back)) {
		s.errorPage(w, r, http.StatusBadRequest, "The address to return to after signing out is not registered for this application, so this site will not send you there.")
		return
	}
	m, _ := s.signedIn(r)
	confirmed := r.Method == http.MethodPost && v.Get("decision") == "sign_out"
	if m != nil && !confirmed {
		w.Header().Set("Content-Security-Policy", p.ContentSecurityPolicy(formActionSource(back)))
		name := ""
		if app != nil {
			name = app.Name
		}
		p.Render(w, r, http.StatusOK, "Sign out", logoutTmpl, struct {
			AppName                           string
			ClientID, Hint, PostLogout, State string
		}{name, clientID, v.Get("id_token_hint"), back, v.Get("state")})
		return
	}
	if m != nil {
		p.SignOut(w, r)
	}
	if back == "" {
		s.opts.Pages.Render(w, r, http.StatusOK, "Signed out", messageTmpl, message{Text: "You are signed out of this site."})
		return
	}
	params := url.Values{}
	if st := v.Get("state"); st != "" {
		params.Set("state", st)
	}
	to := back
	if len(params) > 0 {
		to = redirectWith(back, params)
	}
	redirect(w, to)
}
