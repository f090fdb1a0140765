package caddymodule

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage/kv"
)

// TestMigrationBadgerToPostgresAndBack is docs/storage-engines.md's
// migration, step by step, with the commands a site's owner runs: `caddy
// hearth backup` of a Badger site, the Caddyfile switched to `storage
// postgres`, `caddy hearth restore` into the running PostgreSQL-backed site
// (admin API) and into a stopped one (the database directly), a backup of
// that, the Caddyfile switched back to Badger in a new storage_dir, an
// offline `caddy hearth restore`. Every backup holds exactly the records of
// the first, and the member signs in and uses their API token on each.
func TestMigrationBadgerToPostgresAndBack(t *testing.T) {
	srv := startPostgres(t)
	t.Setenv("HEARTH_TEST_DSN", srv.DSN("postgres"))
	sites := testSite + " {\n\thearth_oauth\n\thearth_graphql\n}\n"
	badgerDir := t.TempDir()
	pgCaddyfile := testCaddyfile("", postgresStore(t.TempDir(), "migrated"), sites)
	pgConfig := writeConfig(t, pgCaddyfile)
	addr := "--address=" + testAdmin
	tmp := t.TempDir()

	// A Badger site with a member, an API token and labels.
	startHearth(t, hearthCaddyfile(badgerDir, sites))
	if _, err := runHearth(t, "a good password\n", "member", "add", "alice", "--password-stdin", addr); err != nil {
		t.Fatal(err)
	}
	out, err := runHearth(t, "", "token", "create", "alice", "--name", "migration", addr)
	token := strings.TrimSpace(lastLine(out))
	if err != nil || !strings.HasPrefix(token, "app_") {
		t.Fatalf("token create: %q, %v", out, err)
	}
	for _, name := range []string{"Kitchen", "Garden"} {
		gqlData(t, token, fmt.Sprintf(`mutation { createLabel(data: {name: %q, color: "#336791"}) { id } }`, name), nil, nil)
	}
	fromBadger := filepath.Join(tmp, "badger.backup")
	if _, err := runHearth(t, "", "backup", "--output", fromBadger, addr); err != nil {
		t.Fatal(err)
	}
	want := backupRecords(t, fromBadger)
	if len(want) < 5 {
		t.Fatalf("the Badger backup holds %d records", len(want))
	}

	// Switched to PostgreSQL: restored into the running site.
	loadCaddyfile(t, pgCaddyfile)
	if out, err := runHearth(t, "", "restore", "--input", fromBadger, addr); err != nil || !strings.Contains(out, "restored") {
		t.Fatalf("restore into the running PostgreSQL site: %q, %v", out, err)
	}
	fromPostgres := filepath.Join(tmp, "postgres.backup")
	if _, err := runHearth(t, "", "backup", "--output", fromPostgres, addr); err != nil {
		t.Fatal(err)
	}
	sameBackupRecords(t, "Badger → PostgreSQL (live restore)", want, backupRecords(t, fromPostgres))
	useSite(t, token)

	// Stopped: restore goes into the database directly.
	loadCaddyfile(t, "{\n\tadmin "+testAdmin+"\n}\n")
	out, err = runHearth(t, "", "restore", "--config", pgConfig, "--input", fromBadger)
	if err != nil || !strings.Contains(out, "restored "+fromBadger+" into the database") {
		t.Fatalf("restore into the stopped PostgreSQL site: %q, %v", out, err)
	}
	loadCaddyfile(t, pgCaddyfile)
	again := filepath.Join(tmp, "postgres-again.backup")
	if _, err := runHearth(t, "", "backup", "--output", again, addr); err != nil {
		t.Fatal(err)
	}
	sameBackupRecords(t, "Badger → PostgreSQL (offline restore)", want, backupRecords(t, again))

	// And back to Badger, in a new storage_dir, offline.
	loadCaddyfile(t, "{\n\tadmin "+testAdmin+"\n}\n")
	backDir := filepath.Join(t.TempDir(), "store")
	backConfig := writeConfig(t, hearthCaddyfile(backDir, sites))
	if out, err := runHearth(t, "", "restore", "--config", backConfig, "--input", fromPostgres); err != nil || !strings.Contains(out, "restored") {
		t.Fatalf("restore of the PostgreSQL backup into Badger: %q, %v", out, err)
	}
	loadCaddyfile(t, hearthCaddyfile(backDir, sites))
	back := filepath.Join(tmp, "back.backup")
	if _, err := runHearth(t, "", "backup", "--output", back, addr); err != nil {
		t.Fatal(err)
	}
	sameBackupRecords(t, "PostgreSQL → Badger", want, backupRecords(t, back))
	useSite(t, token)
}

// useSite checks what alice sees: her labels through her API token, and a
// sign-in with her password.
func useSite(t *testing.T, token string) {
	t.Helper()
	var got struct{ Labels []struct{ Name string } }
	gqlData(t, token, `{ labels { name } }`, nil, &got)
	if len(got.Labels) != 2 {
		t.Fatalf("labels: %+v", got)
	}
	if p := newBrowser(t, testSite).signIn("alice", "a good password"); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("alice signs in: HTTP %d", p.StatusCode)
	}
}

func writeConfig(t *testing.T, caddyfile string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(p, []byte(caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// backupRecords reads a backup file (checked whole by kv.ReadStream) into
// key → value and expiry.
func backupRecords(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	next, closeFn, err := kv.ReadStream(f, t.TempDir())
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer closeFn()
	out := map[string]string{}
	for {
		r, err := next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[string(r.Key)] = fmt.Sprintf("%x/%d", r.Value, r.ExpiresAt)
	}
}

func sameBackupRecords(t *testing.T, what string, want, got map[string]string) {
	t.Helper()
	for k, v := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("%s: record %q missing", what, k)
		} else if g != v {
			t.Errorf("%s: record %q differs:\n got %.120s\nwant %.120s", what, k, g, v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: record %q added", what, k)
		}
	}
}
