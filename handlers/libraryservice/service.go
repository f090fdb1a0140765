// Package libraryservice builds a site's library service: the pipeline of
// handlers/articles (saving from URLs, the fetch queue, imports,
// sanitising, whose workers the store runs with the service's settings),
// the one inboxtapi.Gate through which the GraphQL API and the REST routes
// take their caller within the same rate limits, and the REST routes on
// them, each served by its own package: the newsletter routes
// (handlers/inbound), imports (handlers/importer), Omnivore's content
// endpoint (handlers/omnivore), exports, books, feeds and images
// (handlers/export). The Caddy module builds one Service per hearth_graphql
// handler and gives it to the GraphQL API (handlers/graphql).
package libraryservice

import (
	"context"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/access"
	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/articles"
	"github.com/hearthkit/caddy-hearth/handlers/export"
	"github.com/hearthkit/caddy-hearth/handlers/importer"
	"github.com/hearthkit/caddy-hearth/handlers/inbound"
	"github.com/hearthkit/caddy-hearth/handlers/inboxtapi"
	"github.com/hearthkit/caddy-hearth/handlers/omnivore"
	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
	"github.com/hearthkit/caddy-hearth/handlers/safefetch"
	"github.com/hearthkit/caddy-hearth/storage"
)

// Defaults of Options.
const (
	DefaultMaxInboundBytes   int64 = 10 << 20
	DefaultTokenRateLimit          = 600
	DefaultMemberRateLimit         = 1200
	DefaultInboundRateLimit        = 60
	DefaultRateLimitWindow         = time.Minute
	DefaultFetchMaxBytes     int64 = 5 << 20
	DefaultFetchTimeout            = 15 * time.Second
	DefaultMailWebhookHeader       = inbound.DefaultMailWebhookHeader
	// DefaultImageQuota is the image bytes a member may store
	// (image_quota).
	DefaultImageQuota int64 = 256 << 20
)

// Options configure a Service. Zero values take the defaults above;
// Prepare fills them in (Options.withDefaults), nowhere else.
type Options struct {
	// Articles are the pipeline's settings: the Fetcher of saved pages
	// and their images (default: public addresses only unless
	// AllowPrivateAddresses, up to 5 redirects, each checked, 15 s,
	// 5 MiB), the ImageQuota (DefaultImageQuota), where imports are
	// staged and their limits, NoImportFetch. Its Logger is Logger.
	Articles articles.Options
	// AllowPrivateAddresses lets the default Fetcher reach private and
	// loopback addresses (tests, intranets).
	AllowPrivateAddresses bool
	// Inbound are the newsletter routes' settings: MaxBytes (10 MiB),
	// the mail webhook's secret, header (X-Webhook-Secret) and domain.
	// Its Limit comes from InboundRateLimit, its ClientIP and Logger are
	// the Service's.
	Inbound inbound.Options
	// InboundRateLimit bounds newsletters posted per client address
	// within RateLimitWindow (60).
	InboundRateLimit int
	// TokenRateLimit and MemberRateLimit bound requests per token and per
	// member within RateLimitWindow (600 and 1200 a minute), counted by
	// the Gate for the GraphQL API and the REST routes alike; beyond them
	// the answer is 429 with Retry-After. Negative disables a limit.
	TokenRateLimit  int
	MemberRateLimit int
	RateLimitWindow time.Duration
	// RateLimits keeps the rate limiters' counts across rebuilds of the
	// service (the Caddy app holds one per store); nil: private limiters.
	RateLimits *ratelimit.Registry
	// ClientIP returns the client address of the rate limits and logs.
	// Default: the host of r.RemoteAddr.
	ClientIP func(r *http.Request) string
	// Pages are the member pages: with them a request without a token
	// acts for the member signed in with the session cookie, and the
	// Import and Export settings pages are theirs.
	Pages *account.Pages
	// Logger receives errors and notable events (never tokens or secrets).
	Logger *zap.Logger
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ClientIP == nil {
		o.ClientIP = ratelimit.RemoteIP
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
	if o.Articles.Fetcher == nil {
		o.Articles.Fetcher = safefetch.New(safefetch.Options{
			AllowPrivate:    o.AllowPrivateAddresses,
			Timeout:         DefaultFetchTimeout,
			MaxBytes:        DefaultFetchMaxBytes,
			FollowRedirects: true,
		})
	}
	if o.Articles.ImageQuota <= 0 {
		o.Articles.ImageQuota = DefaultImageQuota
	}
	o.Articles.Logger = o.Logger
	if o.Inbound.MaxBytes <= 0 {
		o.Inbound.MaxBytes = DefaultMaxInboundBytes
	}
	if o.Inbound.WebhookHeader == "" {
		o.Inbound.WebhookHeader = DefaultMailWebhookHeader
	}
	o.Inbound.ClientIP, o.Inbound.Logger = o.ClientIP, o.Logger
	return o
}

// Service is a site's library service. Build it with Prepare and Close it
// when the site stops; it is safe for concurrent use.
type Service struct {
	articles *articles.Service
	gate     *inboxtapi.Gate
	inbound  *inbound.Handler
	uploads  *importer.Uploads
	exports  *export.Exports
	content  *omnivore.Content
}

// Prepare returns the library service of a site on store without touching
// the store (Caddy's Provision prepares it). Its articles.Service lends the
// store's fetch queue and import runner the fetcher, sanitiser and import
// settings: they work from the store's Open (at once if it is open) to its
// Close, or until the Service's Close takes them back.
func Prepare(store *storage.Store, opts Options) *Service {
	opts = opts.withDefaults()
	auth := &access.Authenticator{Store: store, Logger: opts.Logger}
	if opts.Pages != nil {
		auth.Sessions = opts.Pages
	}
	gate := &inboxtapi.Gate{Auth: auth, ClientIP: opts.ClientIP}
	if opts.TokenRateLimit > 0 {
		gate.Tokens = opts.RateLimits.Counter(ratelimit.Limit{Name: "graphql.token", N: opts.TokenRateLimit, Window: opts.RateLimitWindow, Now: opts.Now})
	}
	if opts.MemberRateLimit > 0 {
		gate.Members = opts.RateLimits.Counter(ratelimit.Limit{Name: "graphql.member", N: opts.MemberRateLimit, Window: opts.RateLimitWindow, Now: opts.Now})
	}
	if opts.InboundRateLimit > 0 {
		opts.Inbound.Limit = opts.RateLimits.Counter(ratelimit.Limit{Name: "graphql.inbound", N: opts.InboundRateLimit, Window: opts.RateLimitWindow, Now: opts.Now})
	}
	svc := articles.Prepare(store, opts.Articles)
	return &Service{
		articles: svc,
		gate:     gate,
		inbound:  inbound.New(store, svc, opts.Inbound),
		uploads:  importer.NewUploads(store, svc.Importer(), gate, opts.Pages, opts.Logger),
		exports:  export.New(store, export.Options{Gate: gate, ParseQuery: exportQuery, Now: opts.Now, Logger: opts.Logger}),
		content:  omnivore.NewContent(store, gate, opts.Logger),
	}
}

// Close takes back what the Service lent the store's fetch queue and
// import runner (articles.Service.Close); fetches cut short stay pending
// in the store for the next Service.
func (s *Service) Close() error { return s.articles.Close() }

// Articles saves from the web: the fetch queue, sanitising, images and
// imports.
func (s *Service) Articles() *articles.Service { return s.articles }

// Gate says who a request acts for, within the rate limits the GraphQL API
// and the REST routes share.
func (s *Service) Gate() *inboxtapi.Gate { return s.gate }

// Importer is the site's import runner (the admin API starts imports
// through it).
func (s *Service) Importer() *importer.Runner { return s.articles.Importer() }

// SaveURL saves rawURL for the member as addArticleFromUrl does: a pending
// item now, the article fetched in the background. Its error is for the
// member (articles.MemberMessage).
func (s *Service) SaveURL(ctx context.Context, memberID, rawURL string, labelIDs []string) error {
	_, err := s.articles.QueueURL(ctx, memberID, rawURL, articles.Placement{LabelIDs: labelIDs})
	return err
}

// Inbound is the newsletter routes (the inbound URL and the mail webhook).
func (s *Service) Inbound() *inbound.Handler { return s.inbound }

// Uploads is POST /api/import and the Import page.
func (s *Service) Uploads() *importer.Uploads { return s.uploads }

// Exports is the export zip, books, feeds, the OPDS catalog and the image
// API.
func (s *Service) Exports() *export.Exports { return s.exports }

// Content is Omnivore's content endpoint.
func (s *Service) Content() *omnivore.Content { return s.content }

// A Route is one package's handler that says which requests are its own.
type Route interface {
	http.Handler
	Handles(r *http.Request) bool
}

// Routes are the service's REST routes in the order hearth_graphql asks
// them after the GraphQL API: the newsletter routes, Inboxt's app
// configuration, imports, Omnivore's content, exports.
func (s *Service) Routes() []Route {
	return []Route{s.inbound, inboxtapi.Config{}, s.uploads, s.content, s.exports}
}
