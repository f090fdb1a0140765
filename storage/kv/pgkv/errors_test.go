package pgkv

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage/kv"
	"github.com/jackc/pgx/v5/pgconn"
)

// PostgreSQL's codes (Appendix A, "PostgreSQL Error Codes") as the engine
// reports them: the three a retry can cure are ErrConflict, the connection
// and shutdown classes are ErrUnavailable, anything else passes unchanged.
// The real serialization failure is exercised by kvtest's WriteSkew.
func TestMapErr(t *testing.T) {
	ctx := context.Background()
	for code, want := range map[string]error{
		"40001": kv.ErrConflict,    // serialization_failure
		"40P01": kv.ErrConflict,    // deadlock_detected
		"23505": kv.ErrConflict,    // unique_violation
		"08006": kv.ErrUnavailable, // connection_failure
		"57P01": kv.ErrUnavailable, // admin_shutdown
		"57P03": kv.ErrUnavailable, // cannot_connect_now
		"53300": kv.ErrUnavailable, // too_many_connections
		"42P01": nil,               // undefined_table: a bug, not a condition
	} {
		err := mapErr(ctx, fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: code}))
		for _, sentinel := range []error{kv.ErrConflict, kv.ErrUnavailable} {
			if errors.Is(err, sentinel) != (sentinel == want) {
				t.Errorf("%s: %v; errors.Is(%v) = %v", code, err, sentinel, errors.Is(err, sentinel))
			}
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := mapErr(cctx, errors.New("read tcp: use of closed network connection")); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}
