// Package graphql serves Hearth's saved-content API: POST /api/graphql,
// compatible with Inboxt's public schema (schema/*.graphqls, executed by
// gqlgen's generated server in generated/), with Omnivore's operations
// beside Inboxt's, its schema as SDL and a help page for browsers. It is a
// plain net/http handler built from a store and Options; the Caddy module
// only translates configuration. What it saves from the web goes through
// handlers/articles; who a request acts for and the rate limits, through
// one inboxtapi.Gate, which the Server shares with the routes
// hearth_graphql serves beside it, each served by its own package (the
// Server builds them on its articles.Service and Gate: Inbound, Uploads,
// Exports, Content).
package graphql

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/vektah/gqlparser/v2/ast"
	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/access"
	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/articles"
	"github.com/hearthkit/caddy-hearth/handlers/export"
	"github.com/hearthkit/caddy-hearth/handlers/graphql/generated"
	"github.com/hearthkit/caddy-hearth/handlers/importer"
	"github.com/hearthkit/caddy-hearth/handlers/inbound"
	"github.com/hearthkit/caddy-hearth/handlers/inboxtapi"
	"github.com/hearthkit/caddy-hearth/handlers/omnivore"
	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
	"github.com/hearthkit/caddy-hearth/handlers/safefetch"
	"github.com/hearthkit/caddy-hearth/storage"
)

// Paths served by the Server.
const (
	// Path is the GraphQL endpoint.
	Path = "/api/graphql"
)

// Defaults of Options.
const (
	DefaultMaxBodyBytes      int64 = 1 << 20
	DefaultMaxInboundBytes   int64 = 10 << 20
	DefaultMaxDepth                = 15
	DefaultMaxComplexity           = 5000
	DefaultTokenRateLimit          = 600
	DefaultMemberRateLimit         = 1200
	DefaultInboundRateLimit        = 60
	DefaultRateLimitWindow         = time.Minute
	DefaultFetchMaxBytes     int64 = 5 << 20
	DefaultFetchTimeout            = 15 * time.Second
	DefaultQueryCacheEntries       = 1000
	DefaultMaxContentBytes   int64 = 64 << 20
	DefaultMailWebhookHeader       = inbound.DefaultMailWebhookHeader
	// DefaultImageQuota is the image bytes a member may store
	// (image_quota).
	DefaultImageQuota int64 = 256 << 20
)

// Options configure a Server. Zero values take the defaults above; New fills
// them in (see Options.withDefaults), nowhere else.
type Options struct {
	// MaxBodyBytes limits the body of a GraphQL request (default 1 MiB).
	MaxBodyBytes int64
	// MaxInboundBytes limits a newsletter posted to the inbound URL (10 MiB).
	MaxInboundBytes int64
	// MaxDepth limits how deeply selections nest (15: enough for the
	// standard introspection query).
	MaxDepth int
	// MaxComplexity limits a query's cost: one per field, a list field's
	// selection multiplied by the elements counted for it, and highlights
	// nested below an item's own highlights refused; contents and
	// introspection are priced so that aliases multiply them (5000;
	// complexity.go).
	MaxComplexity int
	// MaxContentBytes bounds the article and newsletter contents one
	// response carries (64 MiB); past it further content fields resolve
	// to a CONTENT_LIMIT_EXCEEDED error (content.go).
	MaxContentBytes int64
	// NoIntrospection turns off __schema and __type queries.
	NoIntrospection bool
	// TokenRateLimit and MemberRateLimit bound requests per token and per
	// member within RateLimitWindow (600 and 1200 a minute); beyond them
	// the answer is 429 with Retry-After. Negative disables a limit.
	TokenRateLimit  int
	MemberRateLimit int
	// InboundRateLimit bounds newsletters posted per client IP within
	// RateLimitWindow (60).
	InboundRateLimit int
	RateLimitWindow  time.Duration
	// MailWebhookSecret turns on Inboxt's mail webhook (MailWebhookPath)
	// and is what its requests must carry, in MailWebhookHeader (default
	// X-Webhook-Secret) or as an HTTP Basic password. Never logged.
	MailWebhookSecret string
	MailWebhookHeader string
	// MailDomain is the domain of members' newsletter addresses, <their
	// inbound address id>@MailDomain, the recipients the webhook accepts.
	MailDomain string
	// Fetcher fetches the pages of addArticleFromUrl. Default: public
	// addresses only (AllowPrivateAddresses lifts that), up to 5 redirects
	// (each checked), 15 s, 5 MiB.
	Fetcher *safefetch.Fetcher
	// ImageQuota bounds the bytes of images a member's items keep
	// (DefaultImageQuota); past it images are not stored and the reader
	// shows their placeholder.
	ImageQuota int64
	// RateLimits keeps the rate limiters' counts across rebuilds of the
	// handler (the Caddy app holds one per store); nil: private limiters.
	RateLimits *ratelimit.Registry
	// AllowPrivateAddresses lets the default Fetcher reach private and
	// loopback addresses (tests, intranets).
	AllowPrivateAddresses bool
	// ClientIP returns the client address used for the inbound rate limit
	// and logs. Default: the host of r.RemoteAddr.
	ClientIP func(r *http.Request) string
	// Logger receives errors and notable events (never tokens or secrets).
	Logger *zap.Logger
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
	// AccountDomain is the domain of members' addresses: where Inboxt has
	// an e-mail address (User.emailAddress, signIn's emailAddress), Hearth
	// uses username@AccountDomain. Empty: the host of each request.
	AccountDomain string
	// ImportLimits bound the files POST /api/import takes (see
	// importer.Limits); ImportDir is where uploads are staged (default:
	// the store's directory followed by "-imports"). NoImportFetch keeps
	// imported items without content from being fetched.
	ImportLimits  importer.Limits
	ImportDir     string
	NoImportFetch bool
	// Pages are the member pages: with them, a request without a token
	// acts for the member signed in with the session cookie (as Inboxt's
	// web app does), with the pages' cross-origin protection; only
	// session callers may run the session-only operations.
	Pages *account.Pages
}

func (o Options) withDefaults() Options {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxInboundBytes <= 0 {
		o.MaxInboundBytes = DefaultMaxInboundBytes
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	if o.MaxComplexity <= 0 {
		o.MaxComplexity = DefaultMaxComplexity
	}
	if o.MaxContentBytes <= 0 {
		o.MaxContentBytes = DefaultMaxContentBytes
	}
	if o.TokenRateLimit == 0 {
		o.TokenRateLimit = DefaultTokenRateLimit
	}
	if o.MemberRateLimit == 0 {
		o.MemberRateLimit = DefaultMemberRateLimit
	}
	if o.InboundRateLimit == 0 {
		o.InboundRateLimit = DefaultInboundRateLimit
	}
	if o.RateLimitWindow <= 0 {
		o.RateLimitWindow = DefaultRateLimitWindow
	}
	if o.Fetcher == nil {
		o.Fetcher = safefetch.New(safefetch.Options{
			AllowPrivate:    o.AllowPrivateAddresses,
			Timeout:         DefaultFetchTimeout,
			MaxBytes:        DefaultFetchMaxBytes,
			FollowRedirects: true,
		})
	}
	if o.ImageQuota <= 0 {
		o.ImageQuota = DefaultImageQuota
	}
	if o.MailWebhookHeader == "" {
		o.MailWebhookHeader = DefaultMailWebhookHeader
	}
	if o.ClientIP == nil {
		o.ClientIP = ratelimit.RemoteIP
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Server serves the GraphQL API.
// Build it with New; it is safe for concurrent use.
type Server struct {
	store   *storage.Store
	opts    Options
	log     *zap.Logger
	gql     *handler.Server
	gate    *inboxtapi.Gate   // the caller and the rate limits, shared by GraphQL and the REST routes
	inbound *inbound.Handler  // the newsletter routes
	uploads *importer.Uploads // POST /api/import and the Import page
	exports *export.Exports   // the export zip and books
	content *omnivore.Content // Omnivore's content endpoint
	docs    *documentChecker  // limits.go

	// articles saves from the web: the fetch queue, sanitising, images
	// and imports.
	articles  *articles.Service
	closeOnce sync.Once
	offsets   *offsetPager // Omnivore's offset paging (omnivore_offsets.go)

	fastPathStats
	// statsPages counts the pages of items read for reading statistics.
	statsPages atomic.Int64
}

// New returns the API backed by an open store (Prepare).
func New(store *storage.Store, opts Options) *Server { return Prepare(store, opts) }

// Prepare returns the API backed by store without touching the store
// (Caddy's Provision prepares it). Its articles.Service lends the store's
// fetch queue and import runner the fetcher, sanitiser and import
// settings: they work from the store's Open (at once if it is open) to its
// Close, or until the Server's Close takes them back.
func Prepare(store *storage.Store, opts Options) *Server {
	opts = opts.withDefaults()
	s := &Server{store: store, opts: opts, log: opts.Logger, docs: newDocumentChecker(defaultDocumentLimits()), offsets: newOffsetPager()}
	auth := &access.Authenticator{Store: store, Logger: opts.Logger}
	if opts.Pages != nil {
		auth.Sessions = opts.Pages
	}
	s.gate = &inboxtapi.Gate{Auth: auth, ClientIP: opts.ClientIP}
	if opts.TokenRateLimit > 0 {
		s.gate.Tokens = opts.RateLimits.Counter(ratelimit.Limit{Name: "graphql.token", N: opts.TokenRateLimit, Window: opts.RateLimitWindow, Now: opts.Now})
	}
	if opts.MemberRateLimit > 0 {
		s.gate.Members = opts.RateLimits.Counter(ratelimit.Limit{Name: "graphql.member", N: opts.MemberRateLimit, Window: opts.RateLimitWindow, Now: opts.Now})
	}
	s.gql = s.newGraphQLServer()
	s.articles = articles.Prepare(store, articles.Options{
		Fetcher:       opts.Fetcher,
		ImageQuota:    opts.ImageQuota,
		ImportDir:     opts.ImportDir,
		ImportLimits:  opts.ImportLimits,
		NoImportFetch: opts.NoImportFetch,
		Logger:        opts.Logger,
	})
	io := inbound.Options{
		MaxBytes:      opts.MaxInboundBytes,
		WebhookSecret: opts.MailWebhookSecret,
		WebhookHeader: opts.MailWebhookHeader,
		MailDomain:    opts.MailDomain,
		ClientIP:      opts.ClientIP,
		Logger:        opts.Logger,
	}
	if opts.InboundRateLimit > 0 {
		io.Limit = opts.RateLimits.Counter(ratelimit.Limit{Name: "graphql.inbound", N: opts.InboundRateLimit, Window: opts.RateLimitWindow, Now: opts.Now})
	}
	s.inbound = inbound.New(store, s.articles, io)
	s.uploads = importer.NewUploads(store, s.articles.Importer(), s.gate, opts.Pages, opts.Logger)
	s.exports = export.New(store, export.Options{Gate: s.gate, ParseQuery: exportQuery, Now: opts.Now, Logger: opts.Logger})
	s.content = omnivore.NewContent(store, s.gate, opts.Logger)
	return s
}

// Start does nothing: the work a Server lends its settings to starts with
// the store's Open (Prepare).
func (s *Server) Start() {}

// Close takes back what the Server lent the store's fetch queue and
// import runner (articles.Service.Close).
func (s *Server) Close() error {
	s.closeOnce.Do(func() { _ = s.articles.Close() })
	return nil
}

func (s *Server) newGraphQLServer() *handler.Server {
	cfg := generated.Config{Resolvers: &resolver{s: s}}
	setComplexity(&cfg.Complexity)
	srv := handler.New(generated.NewExecutableSchema(cfg))
	srv.AddTransport(postTransport{})
	srv.SetQueryCache(lru.New[*ast.QueryDocument](DefaultQueryCacheEntries))
	srv.SetParserTokenLimit(DefaultMaxTokens) // also checked before (limits.go)
	if !s.opts.NoIntrospection {
		srv.Use(extension.Introspection{})
	}
	srv.Use(depthLimit{max: s.opts.MaxDepth})
	srv.Use(&complexityLimit{max: s.opts.MaxComplexity})
	srv.AroundOperations(s.checkScope)
	srv.AroundOperations(s.withContentBudget)
	srv.AroundFields(s.limitContent)
	srv.AroundRootFields(s.entriesFast)
	srv.SetErrorPresenter(s.presentError)
	srv.SetRecoverFunc(s.recoverPanic)
	return srv
}

// Handles reports whether r is for the GraphQL endpoint or its schema.
// The routes hearth_graphql serves beside it are their packages' own
// (Inbound, Uploads, Exports, Content, inboxtapi.Config).
func (s *Server) Handles(r *http.Request) bool {
	return r.URL.Path == Path || r.URL.Path == SchemaPath
}

// ServeHTTP serves the GraphQL endpoint and its schema; other paths get
// 404.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case Path:
		s.serveGraphQL(w, r)
	case SchemaPath:
		s.serveSchema(w, r)
	default:
		http.NotFound(w, r)
	}
}

// Inbound is the newsletter routes (the inbound URL and the mail
// webhook), saving through the Server's articles.Service.
func (s *Server) Inbound() *inbound.Handler { return s.inbound }

// Uploads is POST /api/import and the Import page, taking callers through
// the Server's Gate.
func (s *Server) Uploads() *importer.Uploads { return s.uploads }

// Exports is the export zip, books, feeds, the OPDS catalog and the image
// API, taking callers through the Server's Gate.
func (s *Server) Exports() *export.Exports { return s.exports }

// Content is Omnivore's content endpoint, taking callers through the
// Server's Gate.
func (s *Server) Content() *omnivore.Content { return s.content }

func (s *Server) serveGraphQL(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if wantsPage(r) {
		s.serveAPIHelp(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, codeMethodNotAllowed, "use POST with a JSON body")
		return
	}
	// As Inboxt's (Apollo Server 4): a bad token is a GraphQL error with
	// HTTP 200 (code UNAUTHORIZED, extensions.status 401), and a request
	// without one runs, each field needing a member answering UNAUTHORIZED
	// (me is null). Scopes are checked per operation (checkScope).
	c, err := s.gate.Admit(w.Header(), r, routeGraphQL, inboxtapi.GuestsCounted)
	var limited *inboxtapi.LimitError
	if err != nil && r.Context().Err() != nil {
		// The client went away during the lookup (the store stops with
		// the request's context): answer as gqlgen's transport does for
		// a client gone before its operation ran.
		writeResponse(w, nil)
		return
	}
	if writeUnavailable(w, err) {
		return
	}
	switch {
	case errors.As(err, &limited):
		// As Inboxt's GqlRateLimitGuard (modules/rate-limit/
		// rate-limit.guard.ts @ 45f4314): HTTP 200, code
		// TOO_MANY_REQUESTS, extensions.status 429, with Retry-After and
		// the X-RateLimit headers.
		writeError(w, http.StatusOK, codeTooManyRequests, err.Error())
		return
	case errors.Is(err, access.ErrCrossOrigin):
		writeError(w, http.StatusForbidden, codeForbidden, err.Error())
		return
	case err != nil:
		// A bad token names no member (a token is looked up by the digest
		// of all of it), so it counted against the client address's
		// tokenless budget (Admit): guessing costs a store read each, and
		// past the limit the guesser gets TOO_MANY_REQUESTS instead.
		writeError(w, http.StatusOK, codeUnauthorized, inboxtapi.TokenMessage(err))
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, codeBadRequest, "the body must be JSON with Content-Type: application/json")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, codeBadRequest,
				"the request body must be at most "+strconv.FormatInt(s.opts.MaxBodyBytes, 10)+" bytes")
			return
		}
		writeError(w, http.StatusBadRequest, codeBadRequest, "the request body could not be read")
		return
	}
	// Decoded here, as gqlgen's transport would (numbers as json.Number),
	// so that a bad body gets a clear error that does not echo the body
	// back; postTransport takes the result from the context.
	params, err := decodeParams(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, codeBadRequest, "the body must be a JSON object with query and optional variables and operationName")
		return
	}
	if strings.TrimSpace(params.Query) == "" {
		writeError(w, http.StatusBadRequest, codeBadRequest, "the body has no query")
		return
	}
	if derr := s.docs.check(params.Query); derr != nil {
		writeDocumentError(w, derr)
		return
	}
	if r.Context().Err() != nil {
		// The client is gone: no validation, no execution; the answer
		// gqlgen's transport gives then.
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "null")
		return
	}
	ctx := context.WithValue(r.Context(), callerKey{}, &requestState{caller: c, w: w, r: r})
	r = r.WithContext(context.WithValue(ctx, paramsKey{}, params))
	s.gql.ServeHTTP(w, r)
}

// caller is who a request acts for.
type caller = access.Caller

type callerKey struct{}
