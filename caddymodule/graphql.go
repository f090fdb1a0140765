package caddymodule

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/articles"
	"github.com/hearthkit/caddy-hearth/handlers/export"
	"github.com/hearthkit/caddy-hearth/handlers/graphql"
	"github.com/hearthkit/caddy-hearth/handlers/importer"
	"github.com/hearthkit/caddy-hearth/handlers/inbound"
	"github.com/hearthkit/caddy-hearth/handlers/libraryservice"
	"github.com/hearthkit/caddy-hearth/handlers/omnivore"
	"github.com/hearthkit/caddy-hearth/handlers/reader"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

func init() {
	registerHandler[GraphQL](httpcaddyfile.Before, "handle")
	registerAdminEndpoint("/hearth/members/{username}/api_tokens", adminMethods{
		http.MethodGet:  adminListAPITokens,
		http.MethodPost: adminCreateAPIToken,
	})
	addHearthCommand(tokenCommand)
}

// GraphQL is the hearth_graphql handler: the Inboxt-compatible GraphQL API
// for saved articles and highlights (handlers/graphql) and the routes
// beside it, each its package's: the newsletter routes (handlers/inbound),
// Inboxt's app configuration (handlers/inboxtapi), imports
// (handlers/importer), Omnivore's content endpoint (handlers/omnivore),
// exports, books, feeds and images (handlers/export); the library pages
// (handlers/reader) and the member pages with the API Tokens, Export and
// Import settings pages.
type GraphQL struct {
	// Largest GraphQL request body of a request without a member's credentials.
	MaxBodySize int64 `json:"max_body_size,omitempty" caddyfile:"max_body_size <size>" default:"1MiB"`
	// Largest GraphQL request body with a member's credentials (a session, an API key, an OAuth token), at least max_body_size: Omnivore's browser extension sends the whole page it saves, up to the 5 MiB of a page Hearth fetches ([omnivore.md](omnivore.md)).
	MaxMemberBodySize int64 `json:"max_member_body_size,omitempty" caddyfile:"max_member_body_size <size>" default:"8MiB"`
	// Largest newsletter message posted to an inbound URL.
	MaxInboundSize int64 `json:"max_inbound_size,omitempty" caddyfile:"max_inbound_size <size>" default:"10MiB"`
	// Content and highlight text one response carries; past it, such fields are CONTENT_LIMIT_EXCEEDED errors.
	MaxContentSize int64 `json:"max_content_size,omitempty" caddyfile:"max_content_size <size>" default:"64MiB"`
	// Bytes of images a member's saved items keep (fetched at save time, served by the site); past it further images are not stored and the reader shows their placeholder.
	ImageQuota int64 `json:"image_quota,omitempty" caddyfile:"image_quota <size>" default:"256MiB"`
	// Deepest query (enough for introspection).
	MaxDepth int `json:"max_depth,omitempty" caddyfile:"max_depth <n>" default:"15"`
	// Dearest query: 1 a field, list selections times their count.
	MaxComplexity int `json:"max_complexity,omitempty" caddyfile:"max_complexity <n>" default:"5000"`
	// Refuse __schema and __type queries (Caddyfile: introspection off).
	NoIntrospection bool `json:"no_introspection,omitempty" caddyfile:"introspection on|off" default:"on"`
	// Requests per token per rate_limit_window; -1 (Caddyfile: off) disables the limit.
	TokenRateLimit int `json:"token_rate_limit,omitempty" caddyfile:"token_rate_limit <n>|off" default:"600"`
	// Requests per member (all their tokens) per rate_limit_window; -1 (Caddyfile: off) disables the limit.
	MemberRateLimit int `json:"member_rate_limit,omitempty" caddyfile:"member_rate_limit <n>|off" default:"1200"`
	// Newsletter posts per client IP per rate_limit_window.
	InboundRateLimit int `json:"inbound_rate_limit,omitempty" caddyfile:"inbound_rate_limit <n>" default:"60"`
	// The window of the three rate limits.
	RateLimitWindow caddy.Duration `json:"rate_limit_window,omitempty" caddyfile:"rate_limit_window <duration>" default:"1m"`
	// Let addArticleFromUrl fetch private, loopback and link-local addresses (tests, intranets).
	AllowPrivateAddresses bool `json:"allow_private_addresses,omitempty" caddyfile:"allow_private_addresses" default:"off"`
	// Turns on Inboxt's mail webhook POST /api/inbox/items/mail-webhook (and POST /inbox/items/mail-webhook, the URL Inboxt's web app shows): the secret its requests carry (placeholders such as {env.HEARTH_MAIL_SECRET} are replaced); needs mail_domain.
	MailWebhookSecret string `json:"mail_webhook_secret,omitempty" caddyfile:"mail_webhook_secret <secret>" default:"off"`
	// The header that carries the mail webhook's secret (HTTP Basic, password the secret, is accepted too).
	MailWebhookHeader string `json:"mail_webhook_header,omitempty" caddyfile:"mail_webhook_header <name>" default:"X-Webhook-Secret"`
	// The domain of members' newsletter addresses (<inbound address id>@mail_domain), the recipients the mail webhook accepts.
	MailDomain string `json:"mail_domain,omitempty" caddyfile:"mail_domain <domain>" default:"none"`
	// The domain of members' addresses, username@domain, where Inboxt has an e-mail address (set it to hearth_oauth's account_domain on a split-domain site). A dotless domain (`localhost`) or an IP address is reported under `.invalid` (`alice@localhost.invalid`), an address Inboxt's web app accepts; `signIn` takes the username, username@domain or that address. The address receives no mail, and `isEmailVerified` is always true.
	AccountDomain string `json:"account_domain,omitempty" caddyfile:"account_domain <domain>" default:"the request's host"`
	// Largest file POST /api/import (and caddy hearth import) takes; staged under <storage_dir>-imports until imported.
	ImportMaxSize int64 `json:"import_max_size,omitempty" caddyfile:"import_max_size <size>" default:"256MiB"`
	// Most items one imported file may hold.
	ImportMaxEntries int `json:"import_max_entries,omitempty" caddyfile:"import_max_entries <n>" default:"100000"`
	// Largest entry of an imported file: a zip member read whole (a page, a metadata file), a CSV row, a JSON item.
	ImportMaxEntrySize int64 `json:"import_max_entry_size,omitempty" caddyfile:"import_max_entry_size <size>" default:"16MiB"`
	// How many times a zip member over 1 MiB may expand; past it the file is refused as a zip bomb.
	ImportMaxRatio int `json:"import_max_ratio,omitempty" caddyfile:"import_max_ratio <n>" default:"100"`

	server  *graphql.Server
	library *libraryservice.Service
	// routes are the API and the routes beside it, each served by its
	// own package, then the library and member pages, in the order they
	// are asked; unlogged are the ones serveUnlogged asks.
	routes, unlogged []service
	reader           *reader.Handler
	pages            *account.Pages
	logger           *zap.Logger
	app              *App

	siteHome
}

// CaddyModule returns the Caddy module information.
func (GraphQL) CaddyModule() caddy.ModuleInfo { return handlerInfo[GraphQL]("hearth_graphql") }

// Provision builds the API on the hearth app's store and adds the API
// Tokens page to the member settings.
func (h *GraphQL) Provision(ctx caddy.Context) error {
	app, err := appFrom(ctx)
	if err != nil {
		return err
	}
	secret := caddy.NewReplacer().ReplaceAll(h.MailWebhookSecret, "")
	if h.MailWebhookSecret != "" && secret == "" {
		return fmt.Errorf("mail_webhook_secret is empty once its placeholders are replaced")
	}
	if secret != "" && h.MailDomain == "" {
		return fmt.Errorf("mail_webhook_secret needs mail_domain: the domain of members' newsletter addresses")
	}
	h.pages, h.app = app.Pages(), app
	h.logger = ctx.Logger()
	// The library service: the articles pipeline, whose workers the
	// store runs with this handler's settings from the store's Open until
	// the service's Close takes them back (before the store is released),
	// the Gate and the REST routes on them.
	h.library = libraryservice.Prepare(app.Store(), libraryservice.Options{
		Articles: articles.Options{
			ImageQuota: h.ImageQuota,
			ImportLimits: importer.Limits{
				MaxUploadBytes:      h.ImportMaxSize,
				MaxEntries:          h.ImportMaxEntries,
				MaxEntryBytes:       h.ImportMaxEntrySize,
				MaxCompressionRatio: h.ImportMaxRatio,
			},
		},
		AllowPrivateAddresses: h.AllowPrivateAddresses,
		Inbound: inbound.Options{
			MaxBytes:      h.MaxInboundSize,
			WebhookSecret: secret,
			WebhookHeader: h.MailWebhookHeader,
			MailDomain:    h.MailDomain,
		},
		InboundRateLimit: h.InboundRateLimit,
		TokenRateLimit:   h.TokenRateLimit,
		MemberRateLimit:  h.MemberRateLimit,
		RateLimitWindow:  time.Duration(h.RateLimitWindow),
		RateLimits:       app.RateLimits(),
		ClientIP:         clientIP,
		Pages:            h.pages,
		Logger:           ctx.Logger(),
	})
	app.setImporter(h.library.Importer())
	app.onCleanup(h.library.Close)
	h.server = graphql.New(app.Store(), h.library, graphql.Options{
		MaxBodyBytes:    h.MaxBodySize,
		MemberBodyBytes: h.MaxMemberBodySize,
		MaxDepth:        h.MaxDepth,
		MaxComplexity:   h.MaxComplexity,
		MaxContentBytes: h.MaxContentSize,
		NoIntrospection: h.NoIntrospection,
		Logger:          ctx.Logger(),
		Pages:           h.pages,
		AccountDomain:   h.AccountDomain,
	})
	// The library pages: the member's library in the browser, where
	// signed-in members of this site land (setSiteHomes).
	h.reader = reader.New(app.Store(), reader.Options{Pages: h.pages, SaveURL: h.library.SaveURL, Logger: ctx.Logger().Named("reader")})
	api := []service{h.server}
	for _, r := range h.library.Routes() {
		api = append(api, r)
	}
	h.routes = append(slices.Clip(api), h.reader, h.pages)
	h.unlogged = append(slices.Clip(api), h.pages)
	h.pages.AddSettingsPage(h.reader.SavingPage())
	h.pages.AddSettingsPage(h.server.APITokensPage(h.pages))
	h.pages.AddSettingsPage(h.library.Exports().Page(h.pages))
	h.pages.AddSettingsPage(h.library.Uploads().Page(h.pages))
	return nil
}

// Cleanup takes back the settings the API lent the store's fetch queue and
// import runner; fetches cut short stay pending in the store for the next
// configuration.
func (h *GraphQL) Cleanup() error {
	if h.library != nil {
		return h.library.Close()
	}
	return nil
}

// ServeHTTP serves the API and member pages, and passes other requests on.
func (h *GraphQL) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if err := h.app.start(); err != nil {
		return caddyhttp.Error(http.StatusServiceUnavailable, err)
	}
	r = h.withHome(r)
	switch {
	case strings.HasPrefix(r.URL.Path, inbound.Path):
		return h.serveUnlogged(w, r, next, inbound.Path+"REDACTED")
	case inbound.IsMailWebhook(r):
		return h.serveUnlogged(w, r, next, r.URL.Path)
	case strings.HasPrefix(r.URL.Path, omnivore.ContentDownloadPath):
		return h.serveUnlogged(w, r, next, omnivore.ContentDownloadPath+"REDACTED")
	case strings.HasPrefix(r.URL.Path, export.FeedPath):
		return h.serveUnlogged(w, r, next, export.FeedPath+"REDACTED")
	}
	if isLanding(r) {
		return serveLanding(w, r, next, h.pages, graphqlService)
	}
	return serveOrNext(w, r, orNotFound{next, h.pages}, h.routes...)
}

// serveUnlogged serves a request that carries a secret Caddy's access log
// would write: a newsletter inbound URL has the member's inbound secret in
// its path, as a content download URL and a feed URL have their
// capability, and the mail webhook has its shared secret in a request
// header (Caddy's log redacts only Authorization and Cookie). The request
// is left out of the access log (the log_skip variable) and logged here
// instead, without headers and with uri as the path to record.
func (h *GraphQL) serveUnlogged(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, uri string) error {
	caddyhttp.SetVar(r.Context(), caddyhttp.LogSkipVar, true)
	start := time.Now()
	rec := caddyhttp.NewResponseRecorder(w, nil, nil)
	err := serveOrNext(rec, r, next, h.unlogged...)
	h.logger.Info("handled request",
		zap.String("method", r.Method),
		zap.String("uri", uri),
		zap.String("remote_ip", clientIP(r)),
		zap.Int("status", rec.Status()),
		zap.Int("size", rec.Size()),
		zap.Duration("duration", time.Since(start)))
	return err
}

// UnmarshalCaddyfile reads the directive's block.
func (h *GraphQL) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return readBlock(d, "hearth_graphql subdirective", func(name string) (err error) {
		switch name {
		case "max_body_size":
			h.MaxBodySize, err = argSize(d, name)
		case "max_member_body_size":
			h.MaxMemberBodySize, err = argSize(d, name)
		case "max_inbound_size":
			h.MaxInboundSize, err = argSize(d, name)
		case "max_content_size":
			h.MaxContentSize, err = argSize(d, name)
		case "image_quota":
			h.ImageQuota, err = argSize(d, name)
		case "max_depth":
			h.MaxDepth, err = argInt(d, name, 1)
		case "max_complexity":
			h.MaxComplexity, err = argInt(d, name, 1)
		case "introspection":
			var on bool
			on, err = argOnOff(d, name)
			h.NoIntrospection = !on
		case "token_rate_limit":
			h.TokenRateLimit, err = argIntOrOff(d, name)
		case "member_rate_limit":
			h.MemberRateLimit, err = argIntOrOff(d, name)
		case "inbound_rate_limit":
			h.InboundRateLimit, err = argInt(d, name, 1)
		case "rate_limit_window":
			h.RateLimitWindow, err = argDuration(d, name)
		case "allow_private_addresses":
			h.AllowPrivateAddresses, err = true, argNone(d)
		case "mail_webhook_secret":
			h.MailWebhookSecret, err = argString(d)
		case "mail_webhook_header":
			h.MailWebhookHeader, err = argString(d)
			if err == nil && !validHeaderName(h.MailWebhookHeader) {
				err = d.Errf("%s: want an HTTP header name, got %q", name, h.MailWebhookHeader)
			}
		case "mail_domain":
			h.MailDomain, err = argString(d)
			if err == nil && (strings.ContainsAny(h.MailDomain, "@/: ") || !strings.Contains(h.MailDomain, ".")) {
				err = d.Errf("%s: want a domain such as in.example.org, got %q", name, h.MailDomain)
			}
		case "account_domain":
			h.AccountDomain, err = argString(d)
		case "import_max_size":
			h.ImportMaxSize, err = argSize(d, name)
		case "import_max_entries":
			h.ImportMaxEntries, err = argInt(d, name, 1)
		case "import_max_entry_size":
			h.ImportMaxEntrySize, err = argSize(d, name)
		case "import_max_ratio":
			h.ImportMaxRatio, err = argInt(d, name, 2)
		default:
			err = errUnrecognized
		}
		return err
	})
}

// validHeaderName reports whether s is an HTTP header field name (RFC 9110 token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// createAPITokenRequest is the body of POST /hearth/members/{username}/api_tokens.
type createAPITokenRequest struct {
	Name    string `json:"name"`
	Expires string `json:"expires"`
}

// apiTokenView is an API token as the admin API shows it; Token is present
// only in the answer that created it.
type apiTokenView struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Username  string     `json:"username"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at"`
	Token     string     `json:"token,omitempty"`
}

func adminCreateAPIToken(w http.ResponseWriter, r *http.Request, app *App) error {
	name := r.PathValue("username")
	var req createAPITokenRequest
	if err := decodeJSONBody(w, r, &req); err != nil {
		return err
	}
	if req.Name == "" {
		return apiError(http.StatusBadRequest, "name is required")
	}
	if req.Expires == "" {
		return apiError(http.StatusBadRequest, "expires is required: one of 1d, 7d, 30d, 90d or never")
	}
	lifetime, err := apitokens.ParseExpiry(req.Expires)
	if err != nil {
		return apiError(http.StatusBadRequest, "%v", err)
	}
	m, err := members.Of(app.Store()).Member(r.Context(), name)
	if err != nil {
		return memberError(name, err)
	}
	tok, secret, err := apitokens.Of(app.Store()).CreateOperator(r.Context(), m.ID, req.Name, lifetime)
	if err != nil {
		return storeError(err, "API token")
	}
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusCreated, apiTokenView{
		ID: tok.ID, Name: tok.Name, Username: m.Username, CreatedAt: tok.CreatedAt, ExpiresAt: tok.ExpiresAt, Token: secret,
	})
}

// tokenCommand is `caddy hearth token create`.
func tokenCommand() *cobra.Command {
	token := &cobra.Command{
		Use:   "token",
		Short: "Creates API tokens for the GraphQL API",
	}
	create := &cobra.Command{
		Use:   "create <username> --name NAME [--expires 1d|7d|30d|90d|never]",
		Short: "Creates an API token for a member and prints it (shown once)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, _ := cmd.Flags().GetString("name")
			expires, _ := cmd.Flags().GetString("expires")
			if name == "" {
				return errors.New("--name is required")
			}
			var tok apiTokenView
			if err := adminJSON(cmd, http.MethodPost, "/hearth/members/"+url.PathEscape(args[0])+"/api_tokens",
				createAPITokenRequest{Name: name, Expires: expires}, &tok); err != nil {
				return err
			}
			expiry := "never expires"
			if tok.ExpiresAt != nil {
				expiry = "expires " + tok.ExpiresAt.Format(time.RFC3339)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "created API token %q for %s (%s); it is shown only now:\n", tok.Name, tok.Username, expiry)
			fmt.Fprintln(cmd.OutOrStdout(), tok.Token)
			return nil
		},
	}
	create.Flags().String("name", "", "The token's name, e.g. the integration using it")
	create.Flags().String("expires", "30d", "Lifetime: 1d, 7d, 30d, 90d or never")
	token.AddCommand(create)
	return token
}

// Interface guards
var (
	_ caddy.Provisioner           = (*GraphQL)(nil)
	_ caddy.CleanerUpper          = (*GraphQL)(nil)
	_ caddyhttp.MiddlewareHandler = (*GraphQL)(nil)
	_ caddyfile.Unmarshaler       = (*GraphQL)(nil)
)
