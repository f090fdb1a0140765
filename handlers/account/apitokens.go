package account

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/inboxtapi"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// APITokensPath is the settings page of API tokens; APITokensTitle its
// entry in the settings menu.
const (
	APITokensPath  = "/settings/api_tokens"
	APITokensTitle = "API Tokens"
)

var apiTokensTmpl = parse("api_tokens.html")

// APITokensOptions are what the API Tokens page shows beside the tokens:
// the addresses of routes other services serve.
type APITokensOptions struct {
	// GraphQLPath is the API's endpoint, shown with the site's address.
	GraphQLPath string
	// OmnivoreAPIURLPath is the "API URL" Omnivore's browser extension
	// takes, shown with the site's address beside a new token.
	OmnivoreAPIURLPath string
	// InboundPath is followed by a member's new inbound secret.
	InboundPath string
	// FeedURLs are the Atom and OPDS URLs of a new feed secret on site.
	FeedURLs func(site, secret string) (atom, opds string)
	// Now is the clock tokens expire by; default time.Now.
	Now func() time.Time
}

// expiryChoices are the lifetimes offered on the page, in the store's names.
var expiryChoices = []struct{ Value, Label string }{
	{"1d", "1 day"}, {"7d", "7 days"}, {"30d", "30 days"}, {"90d", "90 days"}, {"never", "Never"},
}

// APITokensPage returns the "API Tokens" settings page for pages: create a
// token (name and expiration; shown once), list tokens with their created,
// expires and last-used times, delete one; and create the secret newsletter
// inbound URL (also shown once). Add it with AddSettingsPage; the
// member pages run it only for a signed-in member, behind cross-origin form
// protection.
func (p *Pages) APITokensPage(opts APITokensOptions) SettingsPage {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return p.MemberPage(APITokensPath, APITokensTitle, func(w http.ResponseWriter, r *http.Request, m *members.Member) {
		p.serveAPITokens(opts, w, r, m)
	})
}

// feedLinks are the feed URLs a renewal made, shown once.
type feedLinks struct{ Atom, OPDS string }

// tokensView is the data of the page.
type tokensView struct {
	Path, GraphQLURL string
	OmnivoreAPIURL   string
	Error, Notice    string
	Name             string
	MaxName          int
	Expiries         []expiryOption
	Tokens           []tokenRow
	NewToken         *apitokens.Token
	NewSecret        string
	Inbound          *apitokens.Inbound
	NewInboundURL    string
	Feeds            *apitokens.FeedSecret
	NewFeeds         *feedLinks
}

type expiryOption struct {
	Value, Label string
	Selected     bool
}

type tokenRow struct {
	*apitokens.Token
	Expired bool
}

func (p *Pages) serveAPITokens(opts APITokensOptions, w http.ResponseWriter, r *http.Request, m *members.Member) {
	if r.URL.Path != APITokensPath {
		p.NotFound(w, r)
		return
	}
	site := inboxtapi.SiteURL(r)
	v := &tokensView{Path: APITokensPath, GraphQLURL: site + opts.GraphQLPath, OmnivoreAPIURL: site + opts.OmnivoreAPIURLPath, MaxName: apitokens.MaxNameLen}
	status := http.StatusOK
	expires := "30d"
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodPost:
		if !p.ParseForm(w, r) {
			return
		}
		switch r.PostFormValue("action") {
		case "create":
			v.Name = strings.TrimSpace(r.PostFormValue("name"))
			expires = r.PostFormValue("expires")
			lifetime, err := apitokens.ParseExpiry(expires)
			if err != nil {
				status, v.Error = http.StatusBadRequest, "Choose an expiration from the list."
				break
			}
			if v.Name == "" {
				status, v.Error = http.StatusBadRequest, "Give the token a name, such as the app that will use it."
				break
			}
			t, secret, err := apitokens.Of(p.store).CreateFromSession(r.Context(), m, v.Name, lifetime)
			if errors.Is(err, members.ErrCredentialsChanged) || errors.Is(err, members.ErrSuspended) {
				// The session ended while this ran: sign in again.
				http.Redirect(w, r, SignInURL(APITokensPath), http.StatusSeeOther)
				return
			}
			if err != nil {
				status, v.Error = p.tokensError(w, err, "create API token")
				break
			}
			p.opts.Logger.Info("API token created", zap.String("member", m.Username), zap.String("token_id", t.ID))
			v.NewToken, v.NewSecret, v.Name = t, secret, ""
		case "delete":
			if err := apitokens.Of(p.store).Delete(r.Context(), m.ID, r.PostFormValue("id")); err != nil {
				status, v.Error = p.tokensError(w, err, "delete API token")
				break
			}
			p.opts.Logger.Info("API token deleted", zap.String("member", m.Username))
			v.Notice = "The token was deleted; it no longer works."
		case "rotate_inbound":
			secret, err := apitokens.Of(p.store).RotateInboundSecret(r.Context(), m.ID, site)
			if err != nil {
				status, v.Error = p.tokensError(w, err, "create inbound address")
				break
			}
			v.NewInboundURL = site + opts.InboundPath + secret
		case "renew_feeds":
			secret, err := apitokens.Of(p.store).RenewFeedSecret(r.Context(), m.ID)
			if err != nil {
				status, v.Error = p.tokensError(w, err, "create feed URLs")
				break
			}
			v.NewFeeds = &feedLinks{}
			v.NewFeeds.Atom, v.NewFeeds.OPDS = opts.FeedURLs(site, secret)
		case "revoke_feeds":
			if err := apitokens.Of(p.store).RevokeFeedSecret(r.Context(), m.ID); err != nil && !errors.Is(err, storage.ErrNotFound) {
				status, v.Error = p.tokensError(w, err, "revoke feed URLs")
				break
			}
			v.Notice = "The feed URLs were turned off; they no longer work."
		default:
			status, v.Error = http.StatusBadRequest, "Unknown action."
		}
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "This page can only be opened or submitted.", http.StatusMethodNotAllowed)
		return
	}
	for _, e := range expiryChoices {
		v.Expiries = append(v.Expiries, expiryOption{e.Value, e.Label, e.Value == expires})
	}
	tokens, err := apitokens.Of(p.store).List(r.Context(), m.ID)
	if err != nil {
		status, v.Error = p.tokensError(w, err, "list API tokens")
	}
	now := opts.Now()
	for _, t := range tokens {
		v.Tokens = append(v.Tokens, tokenRow{t, t.Expired(now)})
	}
	if in, err := apitokens.Of(p.store).InboundInfo(r.Context(), m.ID); err == nil {
		v.Inbound = in
	}
	if fs, err := apitokens.Of(p.store).FeedSecretInfo(r.Context(), m.ID); err == nil {
		v.Feeds = fs
	}
	p.Render(w, r, status, APITokensTitle, apiTokensTmpl, v)
}

// tokensError turns a store error into a status and a message for the page.
// A store that refused for now (a restore, a reload, a full disk) gives
// its 503 or 507 and Retry-After.
func (p *Pages) tokensError(w http.ResponseWriter, err error, what string) (int, string) {
	var ie *storage.InvalidError
	if status, _, ok := inboxtapi.Refusal(w, err); ok {
		return status, StoreRefusalText(status)
	}
	switch {
	case errors.As(err, &ie):
		return http.StatusBadRequest, ie.Msg
	case errors.Is(err, storage.ErrNotFound):
		return http.StatusNotFound, "That token does not exist (any more)."
	}
	p.opts.Logger.Error(what, zap.Error(err))
	return http.StatusInternalServerError, "Something went wrong; try again."
}
