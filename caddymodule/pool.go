package caddymodule

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/storage"
)

// stores holds one open store per absolute directory (per database and
// table prefix for PostgreSQL). Each provisioned App
// takes a reference; during `caddy reload` the new config takes its
// reference before the old one releases, so the database stays open and
// Badger's directory lock is never contended.
var stores = caddy.NewUsagePool()

// storeOpens counts how many times a database was actually opened (not
// reused), for the status endpoint and the reload test.
var storeOpens atomic.Int64

type pooledStore struct{ *storage.Store }

func (p pooledStore) Destruct() error { return p.Store.Close() }

// prepareStore takes a reference to the store known as key (its directory,
// or its database), prepared but not opened: Provision does no I/O (caddy
// validate runs it beside a live server). openStore opens it.
func prepareStore(key, path string, opts storage.Options) (*storage.Store, error) {
	v, _, err := stores.LoadOrNew(key, func() (caddy.Destructor, error) {
		return pooledStore{storage.Prepare(path, opts)}, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(pooledStore).Store, nil
}

// openStore opens a prepared store; a store already open (taken over from
// the previous config at a reload) stays as it is.
func openStore(st *storage.Store) error {
	if st.IsOpen() {
		return nil
	}
	if err := st.Open(); err != nil {
		if errors.Is(err, storage.ErrLocked) {
			return fmt.Errorf("%w; if another Caddy runs with this storage_dir, use 'caddy reload' to change its config", err)
		}
		return err
	}
	storeOpens.Add(1)
	return nil
}

// releaseStore drops a reference to the store known as key; the last one
// closes it. The closing is logged only for a store that was open: `caddy
// validate` prepares the store without opening it, and a "closed store"
// line beside a running server would say something that did not happen.
func releaseStore(key, path string, st *storage.Store, log *zap.Logger) error {
	wasOpen := st.IsOpen()
	deleted, err := stores.Delete(key)
	if deleted && wasOpen {
		log.Info("closed store", zap.String("storage_dir", path))
	}
	if err != nil {
		return fmt.Errorf("close store %s: %w", path, err)
	}
	return nil
}
