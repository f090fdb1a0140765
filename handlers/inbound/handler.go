// Package inbound takes newsletters into members' libraries: the raw
// messages email-forwarding services POST to a member's secret inbound URL
// (Path), and Inboxt's mail webhook (MailWebhookPath), where a mail
// provider posts the messages received at the site's mail domain as JSON.
// Each message becomes a NEWSLETTER item, saved through articles.Service
// (sanitised, its images fetched). Errors answer in the GraphQL error shape
// Inboxt's API uses (inboxtapi.WriteError).
package inbound

import (
	"net/http"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/articles"
	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
	"github.com/hearthkit/caddy-hearth/storage"
)

// Path is followed by a member's inbound secret: the URL that
// email-forwarding services POST raw newsletters to.
const Path = "/api/newsletters/inbound/"

// Options configure a Handler; the library service (handlers/libraryservice)
// fills in their defaults (hearth_graphql's max_inbound_size,
// inbound_rate_limit, mail_webhook_*), and every field is used as given.
type Options struct {
	// MaxBytes limits a newsletter posted to the inbound URL, and a
	// request to the mail webhook.
	MaxBytes int64
	// WebhookSecret turns on the mail webhook and is what its requests
	// must carry, in WebhookHeader or as an HTTP Basic password. Never
	// logged.
	WebhookSecret string
	WebhookHeader string
	// MailDomain is the domain of members' newsletter addresses, <their
	// inbound address id>@MailDomain, the recipients the webhook accepts.
	MailDomain string
	// Limit bounds the newsletters posted per client address (ClientIP);
	// nil: no limit.
	Limit    ratelimit.Counter
	ClientIP func(r *http.Request) string
	Logger   *zap.Logger
}

// Handler serves Path and the mail webhook. Build it with New; it is safe
// for concurrent use.
type Handler struct {
	store        *storage.Store
	articles     *articles.Service
	opts         Options
	log          *zap.Logger
	limit        ratelimit.Counter // per client address
	indexInbound sync.Once         // IndexInboundIDs, on the webhook's first miss
}

// New returns the newsletter routes of a site, saving through svc.
func New(store *storage.Store, svc *articles.Service, opts Options) *Handler {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	return &Handler{store: store, articles: svc, opts: opts, log: opts.Logger, limit: opts.Limit}
}

// Handles reports whether r is for the Handler: the inbound URL or the
// mail webhook.
func (h *Handler) Handles(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, Path) || IsMailWebhook(r)
}

// ServeHTTP serves the inbound URL and the mail webhook; other paths get
// 404.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case strings.HasPrefix(r.URL.Path, Path):
		h.serveInbound(w, r)
	case IsMailWebhook(r):
		h.serveMailWebhook(w, r)
	default:
		http.NotFound(w, r)
	}
}

// MailAddress is the recipient the mail webhook takes for the inbound
// address id (id@MailDomain), or "" when the webhook is off.
func (h *Handler) MailAddress(id string) string {
	if h.opts.MailDomain == "" || h.opts.WebhookSecret == "" {
		return ""
	}
	return id + "@" + h.opts.MailDomain
}
