// Package caddymodule is Hearth's Caddy glue: the hearth app that owns the
// shared store, the handler modules, Caddyfile parsing, the admin API and the
// caddy hearth subcommands. It translates configuration into the plain
// handlers of the handlers/ packages and holds no service logic.
package caddymodule

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/importer"
	"github.com/hearthkit/caddy-hearth/handlers/metrics"
	"github.com/hearthkit/caddy-hearth/storage"
)

func init() {
	caddy.RegisterModule(App{})
}

// App is the hearth app: it opens the store every Hearth handler shares.
// Configure it with the Caddyfile global option `hearth { ... }`; a handler
// used without that option gets an app with default settings.
type App struct {
	// The store's directory; placeholders such as {env.HOME} are replaced,
	// relative paths are taken from Caddy's working directory.
	StorageDir string `json:"storage_dir,omitempty" caddyfile:"storage_dir <path>" default:"hearth under Caddy's data directory"`
	// Show a sign-up page; without it, members are added by the admin.
	OpenRegistration bool `json:"open_registration,omitempty" caddyfile:"open_registration" default:"off"`
	// Size of each of Badger's two memtables.
	MemTableSize int64 `json:"memtable_size,omitempty" caddyfile:"memtable_size <size>" default:"8MiB"`
	// Badger's block cache; raise it on a machine with memory to spare and a large store.
	BlockCacheSize int64 `json:"block_cache_size,omitempty" caddyfile:"block_cache_size <size>" default:"32MiB"`
	// Badger's index cache.
	IndexCacheSize int64 `json:"index_cache_size,omitempty" caddyfile:"index_cache_size <size>" default:"16MiB"`
	// Free space the store's filesystem keeps: below it writes are refused (OAuth server_error 503/507,
	// GraphQL extensions.status 507) and reads go on, so Badger never meets a full disk; off turns it off.
	MinFreeSpace int64 `json:"min_free_space,omitempty" caddyfile:"min_free_space <size>|off" default:"2 value-log files + 6 memtables (304MiB)"`
	// A commit returns only once it is on disk; concurrent commits share one flush.
	SyncWrites *bool `json:"sync_writes,omitempty" caddyfile:"sync_writes on|off" default:"on"`
	// How often value-log garbage collection runs.
	GCInterval caddy.Duration `json:"gc_interval,omitempty" caddyfile:"gc_interval <duration>" default:"10m"`
	// How long a member stays signed in.
	SessionLifetime caddy.Duration `json:"session_lifetime,omitempty" caddyfile:"session_lifetime <duration>" default:"336h"`
	// The domain of the session cookie, for one sign-in across its subdomains (apps behind hearth_gate on
	// app.example.org signing in at example.org); sign-in may then return to pages on them.
	CookieDomain string `json:"cookie_domain,omitempty" caddyfile:"cookie_domain <domain>" default:"the host of each page (no Domain attribute)"`
	// Keep the records in PostgreSQL (≥ 15) instead of Badger in storage_dir, so several Caddy nodes
	// serve one site: `storage postgres { dsn {env.HEARTH_DATABASE_URL} }`, with optional `prefix <name>`
	// (table names, default hearth) and `max_conns <n>` (default 10). The Badger options then do
	// nothing; storage_dir still holds staged imports. See docs/storage-engines.md.
	Storage *StorageConfig `json:"storage,omitempty" caddyfile:"storage postgres { dsn <dsn> }" default:"badger (embedded, in storage_dir)"`

	store  *storage.Store
	path   string
	key    string // the store's identity in the pool: path, or the database
	logger *zap.Logger
	pages  *account.Pages
	dirs   *directories
	run    *appRun
	ctx    caddy.Context
	// importer runs imports for the admin API (set by hearth_graphql).
	importer *importer.Runner
}

// StorageConfig chooses the storage engine.
type StorageConfig struct {
	// Engine is "postgres" ("badger", the default, needs no block).
	Engine string `json:"engine"`
	// DSN is the libpq connection string or URL; placeholders such as
	// {env.HEARTH_DATABASE_URL} are replaced at provisioning.
	DSN      string `json:"dsn,omitempty"`
	Prefix   string `json:"prefix,omitempty"`
	MaxConns int    `json:"max_conns,omitempty"`
}

// appRun is whether the app has started: the store open, the directories
// running.
type appRun struct {
	started  atomic.Bool
	mu       sync.Mutex     // held by start
	stoppers []func() error // what ends handlers' use of the store; run before it is released
}

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "hearth",
		New: func() caddy.Module { return new(App) },
	}
}

// DefaultSessionLifetime is how long a web session lasts by default.
const DefaultSessionLifetime = 14 * 24 * time.Hour

// Provision prepares the store for the configured directory (or takes the
// running one over, at a reload) without touching the disk: no directory is
// locked and no relay dialled until Start, so `caddy validate` works beside
// a running server with the same config.
func (a *App) Provision(ctx caddy.Context) error {
	a.logger, a.ctx = ctx.Logger(), ctx
	dir := caddy.NewReplacer().ReplaceKnown(a.StorageDir, "")
	if dir == "" {
		dir = defaultStorageDir()
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("storage_dir %q: %w", dir, err)
	}
	a.path = abs
	if a.SessionLifetime == 0 {
		a.SessionLifetime = caddy.Duration(DefaultSessionLifetime)
	}
	opts := storage.Options{
		MemTableSize:   a.MemTableSize,
		BlockCacheSize: a.BlockCacheSize,
		IndexCacheSize: a.IndexCacheSize,
		MinFreeBytes:   a.MinFreeSpace,
		SyncWrites:     a.SyncWrites,
		GCInterval:     time.Duration(a.GCInterval),
		Logger:         a.logger.Named("badger"),
		OnSync:         metrics.StoreSynced,
	}
	a.key = abs
	if c := a.Storage; c != nil && c.Engine == "postgres" {
		dsn := caddy.NewReplacer().ReplaceKnown(c.DSN, "")
		if dsn == "" {
			return fmt.Errorf("storage postgres: dsn is empty (is the environment variable set?)")
		}
		opts.Postgres = &storage.PostgresOptions{DSN: dsn, Prefix: c.Prefix, MaxConns: int32(c.MaxConns)}
		// One store per database and table prefix, whatever storage_dir.
		a.key = "postgres\x00" + c.Prefix + "\x00" + dsn
	}
	st, err := prepareStore(a.key, abs, opts)
	if err != nil {
		return err
	}
	a.store = st
	if err := metrics.Register(ctx.GetMetricsRegistry(), storeSize(st, "tables"), storeSize(st, "value_logs")); err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	a.pages = a.newPages()
	a.dirs = new(directories)
	a.run = new(appRun)
	return nil
}

// storeSize is the gauge hearth_store_size_bytes{part} of st.
func storeSize(st *storage.Store, part string) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "hearth_store_size_bytes",
		Help:        "Bytes on disk of the store, by part: tables, value_logs (Badger's figures, updated about once a minute).",
		ConstLabels: prometheus.Labels{"part": part},
	}, func() float64 {
		tables, valueLogs := st.Size()
		if part == "tables" {
			return float64(tables)
		}
		return float64(valueLogs)
	})
}

// defaultStorageDir is where the store lives when storage_dir is not set.
func defaultStorageDir() string { return filepath.Join(caddy.AppDataDir(), "hearth") }

// Start implements caddy.App: it opens the store and starts the
// directories' background work.
func (a *App) Start() error {
	if err := a.start(); err != nil {
		return err
	}
	a.logStarted(a.ctx)
	return nil
}

// start opens the store and starts the directories, once. Caddy starts its
// apps in no fixed order, so the handlers also call it before serving a
// request (the http app may be listening before this app has started).
func (a *App) start() error {
	if a.run.started.Load() {
		return nil
	}
	a.run.mu.Lock()
	defer a.run.mu.Unlock()
	if a.run.started.Load() {
		return nil
	}
	if err := openStore(a.store); err != nil {
		return err
	}
	for _, d := range a.directories() {
		if err := d.Start(); err != nil {
			return fmt.Errorf("hearth_directory: %w", err)
		}
	}
	a.setSiteHomes()
	a.run.started.Store(true)
	return nil
}

// onCleanup runs stop in the app's Cleanup before the store is released:
// it ends a handler's background work that uses the store. Caddy cleans up
// a config's modules in no fixed order (a map), so a handler's own Cleanup
// may come after the app's and find the store closed under its goroutines
// ("the store is closed" errors, at worst writes lost); stop must be safe
// to call again from there.
func (a *App) onCleanup(stop func() error) {
	a.run.mu.Lock()
	defer a.run.mu.Unlock()
	a.run.stoppers = append(a.run.stoppers, stop)
}

// Stop implements caddy.App; the store is released in Cleanup.
func (a *App) Stop() error { return nil }

// Cleanup releases this config's reference to the store; the last
// reference closes it.
func (a *App) Cleanup() error {
	if a.store == nil {
		return nil
	}
	a.run.mu.Lock()
	stoppers := a.run.stoppers
	a.run.stoppers = nil
	a.run.mu.Unlock()
	for _, stop := range stoppers {
		if err := stop(); err != nil {
			a.logger.Error("stop background work", zap.Error(err))
		}
	}
	return releaseStore(a.key, a.path, a.store, a.logger)
}

// Store is the shared store.
func (a *App) Store() *storage.Store { return a.store }

// Pages is the app's member web pages (sign-in, settings): one per app, so
// the settings pages every handler module adds show in one menu.
func (a *App) Pages() *account.Pages { return a.pages }

// appFrom returns the hearth app of ctx's config: the configured one, or one
// with default settings when the Caddyfile has no `hearth` global option.
func appFrom(ctx caddy.Context) (*App, error) {
	v, err := ctx.App("hearth")
	if err != nil {
		return nil, err
	}
	return v.(*App), nil
}

// Interface guards
var (
	_ caddy.App          = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
)
