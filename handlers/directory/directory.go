// Package directory is Hearth's agent directory: it publishes one JSON
// document listing AI agents identified by Nostr keys, with their admission
// level, gates, anomaly flags and activity.
//
// Agents get in by POSTing a signed registration event (NIP-01, with
// optional NIP-13 proof of work and a NIP-05 identifier). Their kind-1 posts,
// sent to the events endpoint or read from the configured relays, feed the
// activity counters and anomaly flags. The document is rebuilt shortly after
// every change and on a schedule, and served from precomputed bytes.
package directory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/metrics"
	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
	"github.com/hearthkit/caddy-hearth/handlers/safefetch"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/agents"
)

// Fixed paths of the directory's endpoints.
const (
	RegisterPath   = "/api/v1/agents/register"
	EventsPath     = "/api/v1/agents/events"
	ProfilePrefix  = "/agents/"
	WellKnownNIP05 = "/.well-known/nostr.json"
)

// Defaults of Options, documented in docs/configuration.md.
const (
	DefaultPath             = "/directory.json"
	DefaultKind             = 31339
	DefaultPowMinBits       = 20
	DefaultNIP05Recheck     = 24 * time.Hour
	DefaultNIP05Grace       = 72 * time.Hour
	DefaultNIP05Timeout     = 5 * time.Second
	DefaultNIP05Port        = 443
	DefaultBurstMaxPosts    = 30
	DefaultBurstWindow      = 10 * time.Minute
	DefaultTemplateMinPosts = 5
	DefaultTemplateRatio    = 0.6
	DefaultTemplateSample   = 20
	DefaultRegenerateEvery  = time.Minute
	DefaultRegenerateDelay  = time.Second
	DefaultMaxAge           = time.Minute
	DefaultMaxBatch         = 500
	DefaultRelayRetryMin    = 2 * time.Second
	DefaultRelayRetryMax    = 5 * time.Minute
)

// Limit is n events per window for one key.
type Limit struct {
	N      int
	Window time.Duration
}

// Default rate limits.
var (
	DefaultRegisterLimitIP     = Limit{20, time.Hour}
	DefaultRegisterLimitPubkey = Limit{10, time.Hour}
	DefaultEventsLimitIP       = Limit{120, time.Minute}
	DefaultEventsLimitPubkey   = Limit{600, 10 * time.Minute}
)

// Options configure a Directory. Zero fields take the defaults above.
type Options struct {
	// Pages renders the profile pages in the site's layout (its name and
	// style); nil: the layout with the default name.
	Pages *account.Pages
	// RateLimits keeps the rate limiters' counts across rebuilds of the
	// handler (the Caddy app holds one per store); nil: private limiters.
	RateLimits *ratelimit.Registry
	// Path is where the document is served.
	Path string
	// Kind is the registration event kind.
	Kind int
	// PowMinBits is the proof-of-work (committed) difficulty for pow_ok.
	PowMinBits int
	// PowRequiredBits refuses registrations with less committed work
	// ("pow:" error). 0 accepts registrations without proof of work.
	PowRequiredBits int
	// Maintainers are the site maintainers' public keys (npub or hex).
	Maintainers []string
	// Relays are read for kind-1 posts of registered agents.
	Relays []string
	// RelayRetryMin and RelayRetryMax bound the delay before reconnecting
	// to a relay; it doubles after each failure and resets once the relay
	// answers.
	RelayRetryMin time.Duration
	RelayRetryMax time.Duration
	// NIP05Domain makes the directory serve /.well-known/nostr.json for
	// agents that claim name@NIP05Domain.
	NIP05Domain string
	// NIP05OpenClaims lets a claim on a free, unreserved name under
	// NIP05Domain count as verified at once (first come). By default the
	// operator approves each claim (Directory.ApproveName) first.
	NIP05OpenClaims bool
	// NIP05Reserved are local names under NIP05Domain that only maintainers
	// may claim, beside ReservedNames and the site's members' usernames.
	NIP05Reserved []string
	// NIP05Port is the port NIP-05 checks fetch on every domain (443);
	// identifiers naming another port are refused, so a registration
	// cannot make the server connect to any host:port it chooses.
	NIP05Port int
	// NIP05Recheck is how often a verified identifier is checked again.
	NIP05Recheck time.Duration
	// NIP05Grace is how long a verified identifier stays verified while
	// checks fail for network reasons.
	NIP05Grace time.Duration
	// NIP05CheckEvery is how often the schedule looks for identifiers due
	// for a recheck; default NIP05Recheck/24, between 1 minute and 1 hour.
	NIP05CheckEvery time.Duration
	// NIP05Timeout bounds one NIP-05 fetch.
	NIP05Timeout time.Duration
	// AllowPrivate lets NIP-05 fetches and relay connections reach private
	// and loopback addresses.
	AllowPrivate bool
	// Burst flag: more than BurstMaxPosts posts in any BurstWindow of the
	// last 24 hours.
	BurstMaxPosts int
	BurstWindow   time.Duration
	// Template flag: of the last TemplateSample posts of the last 7 days, at
	// least TemplateMinPosts and at least TemplateRatio share one skeleton.
	TemplateMinPosts int
	TemplateRatio    float64
	TemplateSample   int
	// RegenerateEvery rebuilds the document on a schedule, so time-driven
	// changes (levels, flags expiring) appear without new events.
	RegenerateEvery time.Duration
	// RegenerateDelay debounces rebuilds after changes.
	RegenerateDelay time.Duration
	// MaxAge is the Cache-Control max-age of the document.
	MaxAge time.Duration
	// BaseURL (scheme://host) makes profile_url absolute; empty keeps it a
	// path on this site.
	BaseURL string
	// Rate limits.
	RegisterLimitIP     Limit
	RegisterLimitPubkey Limit
	EventsLimitIP       Limit
	EventsLimitPubkey   Limit
	// MaxBatch is the most events one POST to the events endpoint may carry.
	MaxBatch int

	// Now is the clock (tests move it). Default time.Now.
	Now func() time.Time
	// Fetcher does the NIP-05 fetches; nil builds one from AllowPrivate and
	// NIP05Timeout (tests pass one that trusts their TLS server).
	Fetcher *safefetch.Fetcher
	// ClientIP returns the client address used for rate limits; the
	// default is the host of r.RemoteAddr. Caddy passes its client_ip,
	// which honors trusted_proxies.
	ClientIP func(r *http.Request) string
	// Logger receives operational messages; nil discards them.
	Logger *zap.Logger
}

func (o Options) withDefaults() Options {
	if o.Path == "" {
		o.Path = DefaultPath
	}
	if o.Kind == 0 {
		o.Kind = DefaultKind
	}
	if o.PowMinBits == 0 {
		o.PowMinBits = DefaultPowMinBits
	}
	if o.NIP05Recheck <= 0 {
		o.NIP05Recheck = DefaultNIP05Recheck
	}
	if o.NIP05Grace <= 0 {
		o.NIP05Grace = DefaultNIP05Grace
	}
	if o.NIP05CheckEvery <= 0 {
		o.NIP05CheckEvery = min(max(o.NIP05Recheck/24, time.Minute), time.Hour)
	}
	if o.NIP05Port <= 0 {
		o.NIP05Port = DefaultNIP05Port
	}
	if o.NIP05Timeout <= 0 {
		o.NIP05Timeout = DefaultNIP05Timeout
	}
	if o.BurstMaxPosts <= 0 {
		o.BurstMaxPosts = DefaultBurstMaxPosts
	}
	if o.BurstWindow <= 0 {
		o.BurstWindow = DefaultBurstWindow
	}
	if o.TemplateMinPosts <= 0 {
		o.TemplateMinPosts = DefaultTemplateMinPosts
	}
	if o.TemplateRatio <= 0 {
		o.TemplateRatio = DefaultTemplateRatio
	}
	if o.TemplateSample <= 0 {
		o.TemplateSample = DefaultTemplateSample
	}
	if o.RegenerateEvery <= 0 {
		o.RegenerateEvery = DefaultRegenerateEvery
	}
	if o.RegenerateDelay <= 0 {
		o.RegenerateDelay = DefaultRegenerateDelay
	}
	if o.MaxAge < 0 {
		o.MaxAge = 0
	} else if o.MaxAge == 0 {
		o.MaxAge = DefaultMaxAge
	}
	for _, l := range []struct {
		p *Limit
		d Limit
	}{{&o.RegisterLimitIP, DefaultRegisterLimitIP}, {&o.RegisterLimitPubkey, DefaultRegisterLimitPubkey},
		{&o.EventsLimitIP, DefaultEventsLimitIP}, {&o.EventsLimitPubkey, DefaultEventsLimitPubkey}} {
		if l.p.N <= 0 || l.p.Window <= 0 {
			*l.p = l.d
		}
	}
	if o.RelayRetryMin <= 0 {
		o.RelayRetryMin = DefaultRelayRetryMin
	}
	if o.RelayRetryMax <= 0 {
		o.RelayRetryMax = DefaultRelayRetryMax
	}
	if o.RelayRetryMax < o.RelayRetryMin {
		o.RelayRetryMax = o.RelayRetryMin
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ClientIP == nil {
		o.ClientIP = ratelimit.RemoteIP
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	o.BaseURL = strings.TrimSuffix(o.BaseURL, "/")
	o.NIP05Domain = strings.ToLower(o.NIP05Domain)
	return o
}

// Directory is the agent directory service. Build it with New; it runs
// background work (document schedule, NIP-05 rechecks, relay
// subscriptions) until Close.
type Directory struct {
	store       *storage.Store
	agents      agents.Store // the agent records in store
	opts        Options
	rules       activityRules
	maintainers map[string]bool
	fetcher     *safefetch.Fetcher

	regLimitIP, regLimitPK, evLimitIP, evLimitPK ratelimit.Counter
	commits                                      groupCommit // posts of concurrent requests, written together

	doc       atomic.Pointer[document]
	browse    atomic.Pointer[browseList] // doc's agents for the browse page
	browseMu  sync.Mutex                 // held while decoding them
	buildMu   sync.Mutex
	stampedAt time.Time // last agents.Store.StampDocument, under buildMu
	// records is the leader's copy of the agent records it builds from.
	records   records
	dirty     chan struct{} // a change happened; rebuild after RegenerateDelay
	authorsCh chan struct{} // the set of registered authors changed

	// id names this configuration's document among the nodes and sites
	// of the store (configID): the lease "directory:<id>" and the
	// published document are under it.
	id string
	// leading is set while this Directory holds the lease: it builds and
	// publishes the document, follows the relays and re-checks NIP-05
	// identifiers. The others load what it published (cluster.go).
	leading atomic.Bool
	// published is the version of the published document this Directory
	// serves or published last ("" none), under buildMu; publishedAt when
	// it published it.
	published   string
	publishedAt time.Time
	// publishedHere is the version this Directory published in memory
	// (localDocs, Badger), under buildMu.
	publishedHere string
	// pubKick wakes the goroutine that publishes changes (Changed) to
	// every node; pendingAuthors says one of them was AuthorsChanged.
	pubKick        chan struct{}
	pendingAuthors atomic.Bool
	// docKick wakes the follower: a document was published.
	docKick chan struct{}
	// origin tells this Directory's published changes from others': it
	// has acted on its own already (when it leads).
	origin string
	// leads counts the times this Directory took the lease, nip05Passes
	// its passes over the identifiers due for a recheck (tests).
	leads, nip05Passes atomic.Int64
	// relayFetcher dials relay connections: public addresses only unless
	// AllowPrivate, checked when connecting.
	relayFetcher *safefetch.Fetcher
	// relayLive counts live relay subscriptions that reached the end of
	// their stored events (tests wait on it).
	relayLive atomic.Int64

	ctx     context.Context
	cancel  context.CancelFunc // set by Start
	startMu sync.Mutex         // held by Start and Close
	wg      sync.WaitGroup
	closed  sync.Once
}

// New returns a Directory serving from store, builds the first document and
// starts the background work: Prepare, then Start.
func New(store *storage.Store, opts Options) (*Directory, error) {
	d, err := Prepare(store, opts)
	if err != nil {
		return nil, err
	}
	if err := d.Start(); err != nil {
		return nil, err
	}
	return d, nil
}

// Prepare checks opts and returns a Directory that does nothing yet: it
// neither reads the store nor dials a relay until Start.
func Prepare(store *storage.Store, opts Options) (*Directory, error) {
	opts = opts.withDefaults()
	if opts.Kind < 0 || opts.Kind > maxKind {
		return nil, fmt.Errorf("kind %d is out of range", opts.Kind)
	}
	if opts.PowMinBits < 0 || opts.PowMinBits > 256 || opts.PowRequiredBits < 0 || opts.PowRequiredBits > 256 {
		return nil, errors.New("proof-of-work bits must be between 0 and 256")
	}
	if opts.TemplateRatio > 1 {
		return nil, errors.New("template_ratio must be between 0 and 1")
	}
	if opts.NIP05Domain != "" && !validDomain(opts.NIP05Domain) {
		return nil, fmt.Errorf("nip05_domain %q is not a domain name", opts.NIP05Domain)
	}
	if opts.NIP05Port > 65535 {
		return nil, fmt.Errorf("nip05_port %d is out of range", opts.NIP05Port)
	}
	for _, n := range opts.NIP05Reserved {
		if !nip05LocalRE.MatchString(strings.ToLower(n)) {
			return nil, fmt.Errorf("nip05_reserved %q is not a NIP-05 name (a-z 0-9 . _ -)", n)
		}
	}
	if !strings.HasPrefix(opts.Path, "/") {
		return nil, fmt.Errorf("path %q must start with /", opts.Path)
	}
	d := &Directory{
		store:       store,
		agents:      agents.Of(store),
		opts:        opts,
		rules:       newActivityRules(opts),
		maintainers: map[string]bool{},
		fetcher:     opts.Fetcher,
		regLimitIP:  opts.RateLimits.Counter(ratelimit.Limit{Name: "directory.register.ip", N: opts.RegisterLimitIP.N, Window: opts.RegisterLimitIP.Window, Now: opts.Now}),
		regLimitPK:  opts.RateLimits.Counter(ratelimit.Limit{Name: "directory.register.pubkey", N: opts.RegisterLimitPubkey.N, Window: opts.RegisterLimitPubkey.Window, Now: opts.Now}),
		evLimitIP:   opts.RateLimits.Counter(ratelimit.Limit{Name: "directory.events.ip", N: opts.EventsLimitIP.N, Window: opts.EventsLimitIP.Window, Now: opts.Now}),
		evLimitPK:   opts.RateLimits.Counter(ratelimit.Limit{Name: "directory.events.pubkey", N: opts.EventsLimitPubkey.N, Window: opts.EventsLimitPubkey.Window, Now: opts.Now}),
		dirty:       make(chan struct{}, 1),
		authorsCh:   make(chan struct{}, 1),
		pubKick:     make(chan struct{}, 1),
		docKick:     make(chan struct{}, 1),
	}
	for _, m := range opts.Maintainers {
		pk, err := ParsePubkey(m)
		if err != nil {
			return nil, fmt.Errorf("maintainer: %w", err)
		}
		d.maintainers[pk] = true
	}
	for _, r := range opts.Relays {
		if err := checkRelayURL(r); err != nil {
			return nil, err
		}
	}
	if d.fetcher == nil {
		d.fetcher = safefetch.New(safefetch.Options{
			AllowPrivate: opts.AllowPrivate,
			Timeout:      opts.NIP05Timeout,
			MaxBytes:     256 << 10,
		})
	}
	d.relayFetcher = safefetch.New(safefetch.Options{AllowPrivate: opts.AllowPrivate, Timeout: 30 * time.Second})
	d.id = configID(opts, d.maintainers)
	d.origin = newVersion()
	return d, nil
}

// Start builds the first document from the (open) store and starts the
// background work: on the node that holds the directory's lease (every
// node of a store shared by several), the regeneration schedule, NIP-05
// rechecks and relay subscriptions; on the others, loading the document the
// leader publishes (cluster.go). Calling it again does nothing.
func (d *Directory) Start() error {
	d.startMu.Lock()
	defer d.startMu.Unlock()
	if d.cancel != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	stops, err := d.subscribe()
	if err != nil {
		cancel()
		return fmt.Errorf("subscribe to directory changes: %w", err)
	}
	if err := d.firstBuild(ctx); err != nil {
		cancel()
		for _, stop := range stops {
			stop()
		}
		return fmt.Errorf("build directory document: %w", err)
	}
	d.ctx, d.cancel = ctx, cancel
	d.wg.Add(4)
	go func() {
		defer d.wg.Done()
		<-ctx.Done()
		for _, stop := range stops {
			stop()
		}
	}()
	go d.publishChanges(ctx)
	go d.follow(ctx)
	go func() {
		defer d.wg.Done()
		d.store.Lead(ctx, "directory:"+d.id, d.lead)
	}()
	return nil
}

// Close stops the background work. It is safe to call more than once, and
// before Start.
func (d *Directory) Close() error {
	d.closed.Do(func() {
		d.startMu.Lock()
		defer d.startMu.Unlock()
		if d.cancel == nil {
			d.cancel = func() {} // a later Start does nothing
			return
		}
		d.cancel()
		d.wg.Wait()
		d.forgetLocal()
	})
	return nil
}

// Options returns the effective options (defaults filled in).
func (d *Directory) Options() Options { return d.opts }

func (d *Directory) now() time.Time { return d.opts.Now() }

// Changed schedules a debounced rebuild of the document by the node that
// leads the directory, whichever node it is; call it after changing agent
// records outside this Directory (admin bans). The rebuild reads every
// agent again.
func (d *Directory) Changed() {
	d.records.touchAll()
	d.changed()
}

// changedAgents is Changed after a change to the records of pks alone
// (written already): the rebuild reads only theirs again.
func (d *Directory) changedAgents(pks ...string) {
	d.records.touch(pks...)
	d.changed()
}

func (d *Directory) changed() {
	if d.leading.Load() {
		d.changedHere() // at once here; the others by publishChanges
	}
	kick(d.pubKick)
}

// AuthorsChanged is Changed for changes that add or remove authors (new
// registrations, bans): the relay subscriptions restart too.
func (d *Directory) AuthorsChanged() {
	d.records.touchAll()
	d.authorsChanged()
}

// authorsChangedOf is AuthorsChanged after a change to the records of pks
// alone.
func (d *Directory) authorsChangedOf(pks ...string) {
	d.records.touch(pks...)
	d.authorsChanged()
}

func (d *Directory) authorsChanged() {
	if d.leading.Load() {
		d.changedHere()
		d.authorsChangedHere()
	}
	d.pendingAuthors.Store(true)
	kick(d.pubKick)
}

// changedHere schedules a rebuild on this node (its leader loop).
func (d *Directory) changedHere() {
	select {
	case d.dirty <- struct{}{}:
	default:
	}
}

// authorsChangedHere tells this node's relay subscriptions to restart with
// the new set of registered authors.
func (d *Directory) authorsChangedHere() {
	select {
	case d.authorsCh <- struct{}{}:
	default:
	}
}

// regenerateLoop rebuilds the document on the schedule and after changes,
// while ctx (the lease) lasts.
func (d *Directory) regenerateLoop(ctx context.Context) {
	tick := time.NewTicker(d.opts.RegenerateEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-d.dirty:
			// Debounce: let a burst of changes settle into one rebuild.
			t := time.NewTimer(d.opts.RegenerateDelay)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		if err := d.Rebuild(ctx); err != nil {
			d.logStoreFailure("rebuild agent directory", err)
		}
	}
}

// Handles reports whether r is one of the directory's requests.
func (d *Directory) Handles(r *http.Request) bool {
	p := r.URL.Path
	switch {
	case p == d.opts.Path, p == RegisterPath, p == EventsPath, p == BrowsePath:
		return true
	case strings.HasPrefix(p, ProfilePrefix) && len(p) > len(ProfilePrefix) && !strings.Contains(p[len(ProfilePrefix):], "/"):
		return true
	case p == WellKnownNIP05 && d.opts.NIP05Domain != "":
		return true
	}
	return false
}

// ServeHTTP serves the directory's endpoints.
func (d *Directory) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case p == d.opts.Path:
		d.serveDocument(w, r)
	case p == RegisterPath:
		d.serveRegister(w, r)
	case p == EventsPath:
		d.serveEvents(w, r)
	case p == BrowsePath:
		d.serveBrowse(w, r)
	case p == WellKnownNIP05 && d.opts.NIP05Domain != "":
		d.serveWellKnown(w, r)
	case strings.HasPrefix(p, ProfilePrefix):
		d.serveProfile(w, r)
	default:
		writeError(w, http.StatusNotFound, "invalid: not found")
	}
}

// writeError writes the directory's error shape: {"error": "<prefix>: ..."}.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"error: could not encode the answer"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// cors answers CORS for public, credential-less endpoints; it returns true
// when r was a preflight and has been answered.
func cors(w http.ResponseWriter, r *http.Request, methods string) bool {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	// Without this a cross-origin script cannot read the validators it
	// needs for conditional requests.
	h.Set("Access-Control-Expose-Headers", "ETag, Last-Modified")
	if r.Method == http.MethodOptions {
		h.Set("Access-Control-Allow-Methods", methods)
		h.Set("Access-Control-Allow-Headers", "Content-Type, If-None-Match, If-Modified-Since")
		h.Set("Access-Control-Max-Age", "86400")
		w.WriteHeader(http.StatusNoContent)
		return true
	}
	return false
}

// allowPublic answers CORS for a public endpoint (cors) and refuses with
// 405 a method other than methods ("GET, HEAD, OPTIONS"); it returns
// false when r has been answered.
func allowPublic(w http.ResponseWriter, r *http.Request, methods string) bool {
	if cors(w, r, methods) {
		return false
	}
	for rest := methods; rest != ""; {
		var m string
		m, rest, _ = strings.Cut(rest, ", ")
		if m == r.Method {
			return true
		}
	}
	methodNotAllowed(w, methods)
	return false
}

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	writeError(w, http.StatusMethodNotAllowed, "invalid: method not allowed; use "+allow)
}

// rateLimited answers 429 for a refusal of the limit named (metrics.Limit*).
func rateLimited(w http.ResponseWriter, res ratelimit.Result, limit, what string) {
	metrics.RateLimited(limit)
	secs := ratelimit.RetryAfterSeconds(res.RetryAfter)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	writeError(w, http.StatusTooManyRequests, fmt.Sprintf("rate-limited: too many %s; retry in %d s", what, secs))
}
