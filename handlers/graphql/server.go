// Package graphql serves Hearth's saved-content API: POST /api/graphql,
// compatible with Inboxt's public schema (schema/*.graphqls, executed by
// gqlgen's generated server in generated/), with Omnivore's operations
// beside Inboxt's, its schema as SDL and a help page for browsers. It is a
// plain net/http handler built from a store, the site's library service
// (handlers/libraryservice) and Options; the Caddy module only translates
// configuration. What it saves from the web goes through the service's
// handlers/articles pipeline; who a request acts for and the rate limits,
// through the service's one inboxtapi.Gate, which the routes hearth_graphql
// serves beside the API share.
package graphql

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/access"
	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/articles"
	"github.com/hearthkit/caddy-hearth/handlers/export"
	"github.com/hearthkit/caddy-hearth/handlers/graphql/generated"
	"github.com/hearthkit/caddy-hearth/handlers/inbound"
	"github.com/hearthkit/caddy-hearth/handlers/inboxtapi"
	"github.com/hearthkit/caddy-hearth/handlers/libraryservice"
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
	DefaultMemberBodyBytes   int64 = 8 << 20
	DefaultMaxDepth                = 15
	DefaultMaxComplexity           = 5000
	DefaultQueryCacheEntries       = 1000
	DefaultMaxContentBytes   int64 = 64 << 20
)

// Options configure a Server. Zero values take the defaults above; New fills
// them in (see Options.withDefaults), nowhere else. What the API shares with
// the REST routes (the pipeline, the caller and the rate limits, imports,
// the newsletter routes) is the library service's (libraryservice.Options).
type Options struct {
	// MaxBodyBytes limits the body of a GraphQL request (default 1 MiB).
	MaxBodyBytes int64
	// MemberBodyBytes is the larger limit of a request with a member's
	// credentials (default 8 MiB; never below MaxBodyBytes): a saved page
	// sent whole, as Omnivore's browser extension sends it, may be as
	// large as a page Hearth fetches (5 MiB) written as a JSON string,
	// while a request that names nobody keeps the small limit.
	MemberBodyBytes int64
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
	// Logger receives errors and notable events (never tokens or secrets).
	Logger *zap.Logger
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
	// AccountDomain is the domain of members' addresses: where Inboxt has
	// an e-mail address (User.emailAddress, signIn's emailAddress), Hearth
	// uses username@AccountDomain. Empty: the host of each request.
	AccountDomain string
	// Pages are the member pages: with them (and the library service's
	// Gate built with the same pages), a request without a token acts for
	// the member signed in with the session cookie, as Inboxt's web app
	// does; only session callers may run the session-only operations.
	Pages *account.Pages
}

func (o Options) withDefaults() Options {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MemberBodyBytes <= 0 {
		o.MemberBodyBytes = DefaultMemberBodyBytes
	}
	o.MemberBodyBytes = max(o.MemberBodyBytes, o.MaxBodyBytes)
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	if o.MaxComplexity <= 0 {
		o.MaxComplexity = DefaultMaxComplexity
	}
	if o.MaxContentBytes <= 0 {
		o.MaxContentBytes = DefaultMaxContentBytes
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
	gate    *inboxtapi.Gate  // the caller and the rate limits, shared with the REST routes
	inbound *inbound.Handler // the newsletter addresses
	exports *export.Exports  // exportData's zip
	docs    *documentChecker // limits.go

	// articles saves from the web: the fetch queue, sanitising, images
	// and imports.
	articles *articles.Service
	offsets  *offsetPager // Omnivore's offset paging (omnivore_offsets.go)
	// omnivoreQueries are queries posted to OmnivorePath with their
	// Omnivore names replaced (omnivoreQuery), by the query's digest.
	omnivoreQueries renamedQueries
	// documents are gqlgen's parsed and validated documents (textcache.go).
	documents documentCache

	fastPathStats
	// statsPages counts the pages of items read for reading statistics.
	statsPages atomic.Int64
}

// New returns the API on store and the site's library service lib, which
// saves what the API saves from the web, says who a request acts for and
// counts the rate limits the API shares with the REST routes. New does not
// touch the store, and the Server holds nothing to close: lib's Close
// takes back what the service lent the store's workers.
func New(store *storage.Store, lib *libraryservice.Service, opts Options) *Server {
	opts = opts.withDefaults()
	s := &Server{
		store: store, opts: opts, log: opts.Logger,
		gate: lib.Gate(), inbound: lib.Inbound(), exports: lib.Exports(), articles: lib.Articles(),
		docs: newDocumentChecker(defaultDocumentLimits()), offsets: newOffsetPager(),
		omnivoreQueries: newRenamedQueries(DefaultQueryCacheEntries, DefaultQueryCacheBytes),
		documents:       newDocumentCache(DefaultQueryCacheEntries, DefaultQueryCacheBytes),
	}
	s.gql = s.newGraphQLServer()
	return s
}

func (s *Server) newGraphQLServer() *handler.Server {
	cfg := generated.Config{Resolvers: &resolver{s: s}}
	setComplexity(&cfg.Complexity)
	srv := handler.New(generated.NewExecutableSchema(cfg))
	srv.AddTransport(postTransport{})
	srv.SetQueryCache(s.documents)
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

// Handles reports whether r is for the GraphQL endpoint (Path, or
// OmnivorePath) or its schema. The routes hearth_graphql serves beside it
// are their packages' own (libraryservice.Service.Routes).
func (s *Server) Handles(r *http.Request) bool {
	return r.URL.Path == Path || r.URL.Path == SchemaPath || r.URL.Path == OmnivorePath
}

// ServeHTTP serves the GraphQL endpoint and its schema; other paths get
// 404.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case Path, OmnivorePath:
		s.serveGraphQL(w, r)
	case SchemaPath:
		s.serveSchema(w, r)
	default:
		http.NotFound(w, r)
	}
}

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
	case err != nil && access.SentBareKey(r):
		// Omnivore's server ran a request whose key it did not know as
		// one without a key: each of its operations answered its error
		// type with UNAUTHORIZED (authorized, utils/gql-utils.ts,
		// omnivore-app/omnivore @322ce62), which its browser extension
		// shows as "not logged in", and a GraphQL error without data
		// leaves the extension's toolbar waiting. Only Omnivore's
		// clients send a key without "Bearer"; it counted against the
		// client address's tokenless budget as below (Admit), and acts
		// for nobody.
		c = nil
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
	limit := s.opts.MaxBodyBytes
	if c != nil && c.Member != nil {
		limit = s.opts.MemberBodyBytes
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, codeBadRequest,
				"the request body must be at most "+strconv.FormatInt(limit, 10)+" bytes")
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
	if r.URL.Path == OmnivorePath {
		params.Query = s.omnivoreQueries.of(params.Query)
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

// APITokensPage is the "API Tokens" settings page of pages
// (account.Pages.APITokensPage), with the addresses this server's routes
// answer at.
func (s *Server) APITokensPage(pages *account.Pages) account.SettingsPage {
	return pages.APITokensPage(account.APITokensOptions{GraphQLPath: Path, OmnivoreAPIURLPath: OmnivoreAPIURLPath, InboundPath: inbound.Path, FeedURLs: export.FeedURLs, Now: s.opts.Now})
}
