// Package articles is the library's service for what comes from the web:
// saving a page from its URL (a pending item now, the article fetched in
// the background by the store's fetch queue), saving HTML a client or a
// mail brought, extracting the readable article, sanitising untrusted HTML,
// fetching and storing the images of saved content, and the store's import
// runner. The GraphQL API, the reader's pages, Omnivore's operations, the
// newsletter routes and imports all save through a Service; none of them
// runs a fetch or writes an item's keys itself (storage/library does that).
//
// The fetch queues and the import runner are workers of the store
// (libraryworker.go): one of each per store, from its Open to its Close,
// working with the settings of the latest Service prepared on it.
package articles

import (
	"sync"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/importer"
	"github.com/hearthkit/caddy-hearth/handlers/safefetch"
	"github.com/hearthkit/caddy-hearth/storage"
)

// Options are a site's settings of the service. The library service that
// builds a Service (handlers/libraryservice) fills in their defaults; every
// field is used as given.
type Options struct {
	// Fetcher fetches pages and their images (required): its address
	// policy is the site's fetch policy.
	Fetcher *safefetch.Fetcher
	// ImageQuota bounds the bytes of images a member's items keep; past
	// it images are not stored and the reader shows their placeholder.
	ImageQuota int64
	// ImportDir is where uploads are staged (empty: the store's directory
	// followed by "-imports"); ImportLimits bound the files taken.
	// NoImportFetch keeps imported items without content from being
	// fetched.
	ImportDir     string
	ImportLimits  importer.Limits
	NoImportFetch bool
	// Logger receives errors and notable events (never tokens or secrets).
	Logger *zap.Logger
}

// Service saves items from the web for one site. Build it with Prepare and
// Close it when the site stops; it is safe for concurrent use.
type Service struct {
	store *storage.Store
	opts  Options
	log   *zap.Logger

	fetches *fetchQueue // the store's queue of the Service's fetch policy (libraryWork)
	imports *importer.Runner
	// releaseFetches and releaseImports take back what the Service lent
	// the store's fetch queue and import runner.
	releaseFetches, releaseImports func()
	closeOnce                      sync.Once
}

// Prepare returns the service of a site on store without touching the
// store (Caddy's Provision prepares it). It lends the store's fetch queue
// and import runner (libraryWork) its fetcher, sanitiser and import
// settings: they work from the store's Open (at once if it is open) to its
// Close, or until the Service's Close takes them back.
func Prepare(store *storage.Store, opts Options) *Service {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	s := &Service{store: store, opts: opts, log: opts.Logger}
	work := libraryWorkKind.Of(store)
	s.imports = newImportRunner(store, opts, work.kickFetches)
	s.fetches = work.fetches[0]
	if s.private() {
		s.fetches = work.fetches[1]
	}
	s.releaseFetches = s.fetches.use(s)
	s.releaseImports = work.imports.use(s.imports)
	return s
}

// private is the site's fetch policy: whether its fetches may reach
// private addresses.
func (s *Service) private() bool { return s.opts.Fetcher.Options().AllowPrivate }

// Importer is the site's import runner (the import routes and the admin
// API start imports through it).
func (s *Service) Importer() *importer.Runner { return s.imports }

func newImportRunner(store *storage.Store, opts Options, kick func()) *importer.Runner {
	dir := opts.ImportDir
	if dir == "" {
		dir = store.Path() + "-imports"
	}
	return importer.NewRunner(store, importer.RunnerOptions{
		Dir:      dir,
		Limits:   opts.ImportLimits,
		Sanitize: SanitizeHTML,
		HTMLText: HTMLText,
		// An export's images are taken as this site's fetches take theirs.
		ImageMaxBytes: opts.Fetcher.Options().MaxBytes,
		ImageQuota:    opts.ImageQuota,
		ContentImages: ContentImages,
		NoFetch:       opts.NoImportFetch,
		FetchPrivate:  opts.Fetcher.Options().AllowPrivate,
		FetchQueued:   kick,
		Logger:        opts.Logger.Named("import"),
		Kick:          libraryWorkKind.Of(store).importKick,
	})
}

// Close takes back what the Service lent the store's fetch queue and
// import runner, and closes its import runner. With no other Service of
// its policy on the store, the queue stops (a fetch cut short stays
// pending, and the next Service on the store fetches it again).
func (s *Service) Close() error {
	s.closeOnce.Do(func() {
		s.releaseFetches()
		s.releaseImports()
		s.imports.Close()
	})
	return nil
}

// KickFetches tells the feeder that a fetch is pending: this node's, or,
// when another node works the queue, that one's. While the feeder waits
// for a host's turn it reads on within importHostInterval anyway: an
// import kicks after each batch, and each kick would make it read up to
// its scanBudget of entries, most of them waiting on the same host: a
// sixth of the process's CPU during an import, nearly as much as the
// import's own writes (bench/README.md, "Imports").
func (s *Service) KickFetches() {
	if s.fetches.hostWait.Load() {
		return
	}
	s.fetches.kickAll()
}
