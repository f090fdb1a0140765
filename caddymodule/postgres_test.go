package caddymodule

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/kv/pgkv/pgtest"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// caddymodulePostgresPort is this package's PostgreSQL test port.
const caddymodulePostgresPort = 15435

// startPostgres starts a PostgreSQL server for the test (Debian's
// postgresql, initdb into a temp dir): the test fails without one unless
// HEARTH_TEST_POSTGRES=skip says locally that it may skip.
func startPostgres(t *testing.T) *pgtest.Server {
	t.Helper()
	srv, err := pgtest.Start(caddymodulePostgresPort)
	if errors.Is(err, pgtest.ErrMissing) && pgtest.Skip() {
		t.Skip("PostgreSQL not installed and HEARTH_TEST_POSTGRES=skip")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

// TestPostgresStorageServesTheSiteAndOutlivesTheDatabase: `storage postgres
// { dsn {env.…} }` in the Caddyfile puts the store in PostgreSQL: a member
// made with the storage package before Caddy starts signs in to GraphQL
// with their API token, a label written through GraphQL is read back and is
// in the database (a second store on the same tables sees it); while the
// database is stopped the same requests get GraphQL's 503 refusal
// (SERVICE_UNAVAILABLE, extensions.status 503, Retry-After, a message naming
// no host) and
// never a panic or 500; once the database is back the same Caddy serves
// again without a restart.
func TestPostgresStorageServesTheSiteAndOutlivesTheDatabase(t *testing.T) {
	srv := startPostgres(t)
	dsn := srv.DSN("postgres")
	t.Setenv("HEARTH_TEST_DSN", dsn)
	pg := &storage.PostgresOptions{DSN: dsn, Prefix: "site_a"}
	seed, m, token := seedAlice(t, t.TempDir(), storage.Options{Postgres: pg}, "pg")
	if err := seed.Close(); err != nil {
		t.Fatal(err)
	}

	startHearth(t, testCaddyfile("grace_period 1ms", postgresStore(t.TempDir(), "site_a"), testSite+` {
	hearth_graphql
}
`))

	createLabel := func(name string) string {
		return fmt.Sprintf(`mutation { createLabel(data: {name: %q, color: "#336791"}) { id name } }`, name)
	}
	var created struct{ CreateLabel struct{ ID, Name string } }
	gqlData(t, token, createLabel("Postgres"), nil, &created)
	if created.CreateLabel.Name != "Postgres" {
		t.Fatalf("createLabel: %+v", created)
	}
	labelsQuery := `{ labels { name } }`
	var got struct{ Labels []struct{ Name string } }
	gqlData(t, token, labelsQuery, nil, &got)
	if len(got.Labels) != 1 || got.Labels[0].Name != "Postgres" {
		t.Fatalf("labels: %+v", got)
	}
	// The label is in the database, not in this process: another store on
	// the same tables (another node) reads it.
	other, err := storage.Open(t.TempDir(), storage.Options{Postgres: pg})
	if err != nil {
		t.Fatal(err)
	}
	labels, err := library.Of(other).Labels(t.Context(), m.ID)
	other.Close()
	if err != nil || len(labels) != 1 || labels[0].Name != "Postgres" {
		t.Fatalf("labels read by a second store: %+v, %v", labels, err)
	}

	if err := srv.StopServer(); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{labelsQuery, createLabel("Away")} {
		r := gql(t, testSite, token, q, nil)
		// As Inboxt answers a refusal (handlers/graphql/unavailable.go):
		// HTTP 200, extensions.status 503, Retry-After.
		if r.status != http.StatusOK || r.code() != "SERVICE_UNAVAILABLE" || r.Errors[0].Extensions["status"] != float64(503) ||
			r.header.Get("Retry-After") == "" {
			t.Fatalf("with the database stopped: HTTP %d, Retry-After %q, errors %+v; want SERVICE_UNAVAILABLE with extensions.status 503 and Retry-After",
				r.status, r.header.Get("Retry-After"), r.Errors)
		}
		if msg := r.Errors[0].Message; strings.Contains(msg, "127.0.0.1") || strings.Contains(msg, fmt.Sprint(caddymodulePostgresPort)) {
			t.Fatalf("the refusal names the database's address: %q", msg)
		}
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	// The pool reconnects on the next request; wait for the first answer
	// (the event), never for a duration: a minute at most, asked five
	// times a second (a faster poll would meet the token's rate limit of
	// 600 a minute before the minute is over).
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := gql(t, testSite, token, labelsQuery, nil)
		if r.status == http.StatusOK && len(r.Errors) == 0 {
			break
		}
		if r.code() != "SERVICE_UNAVAILABLE" || time.Now().After(deadline) {
			t.Fatalf("after the database came back: HTTP %d, errors %+v", r.status, r.Errors)
		}
		time.Sleep(200 * time.Millisecond)
	}
	gqlData(t, token, createLabel("Back"), nil, nil)
	gqlData(t, token, labelsQuery, nil, &got)
	if len(got.Labels) != 2 {
		t.Fatalf("labels after the database came back: %+v", got)
	}
}
