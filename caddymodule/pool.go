package caddymodule

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/storage"
)

// stores holds one open store per absolute directory. Each provisioned App
// takes a reference; during `caddy reload` the new config takes its
// reference before the old one releases, so the database stays open and
// Badger's directory lock is never contended.
var stores = caddy.NewUsagePool()

// storeOpens counts how many times a database was actually opened (not
// reused), for the status endpoint and the reload test.
var storeOpens atomic.Int64

type pooledStore struct{ *storage.Store }

func (p pooledStore) Destruct() error { return p.Store.Close() }

func openStore(path string, opts storage.Options) (*storage.Store, error) {
	v, _, err := stores.LoadOrNew(path, func() (caddy.Destructor, error) {
		st, err := storage.Open(path, opts)
		if err != nil {
			if errors.Is(err, storage.ErrLocked) {
				return nil, fmt.Errorf("%w; if another Caddy runs with this storage_dir, use 'caddy reload' to change its config", err)
			}
			return nil, err
		}
		storeOpens.Add(1)
		return pooledStore{st}, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(pooledStore).Store, nil
}

func releaseStore(path string, log *zap.Logger) error {
	deleted, err := stores.Delete(path)
	if deleted {
		log.Info("closed store", zap.String("storage_dir", path))
	}
	if err != nil {
		return fmt.Errorf("close store %s: %w", path, err)
	}
	return nil
}
