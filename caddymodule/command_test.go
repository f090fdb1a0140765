package caddymodule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/cobra"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// runHearth runs `caddy hearth <args>` in-process, as the caddy binary
// would, with stdin as standard input. It returns stdout and the error.
func runHearth(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	root := &cobra.Command{Use: "hearth"}
	setupHearthCommand(root)
	var out, errOut bytes.Buffer
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestCLIManagesMembersThroughAdminAPI(t *testing.T) {
	startHearth(t, hearthCaddyfile(t.TempDir(), oauthSite))
	addr := "--address=" + testAdmin

	out, err := runHearth(t, "first password\n", "member", "add", "alice", "--display-name", "Alice L", "--password-stdin", addr)
	if err != nil || !strings.Contains(out, "created member alice") {
		t.Fatalf("member add: %q, %v", out, err)
	}
	if _, err := runHearth(t, "another password\n", "member", "add", "ALICE", "--password-stdin", addr); err == nil ||
		!strings.Contains(err.Error(), "taken") {
		t.Fatalf("duplicate add: %v", err)
	}
	if _, err := runHearth(t, "short\n", "member", "add", "bob", "--password-stdin", addr); err == nil {
		t.Fatal("a 5-character password was accepted")
	}
	if _, err := runHearth(t, "", "member", "add", "bob", addr); err == nil ||
		!strings.Contains(err.Error(), "--password-stdin") {
		t.Fatalf("add without a terminal: %v", err)
	}

	out, err = runHearth(t, "", "member", "list", "--json", addr)
	var list []memberView
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || list[0].DisplayName != "Alice L" {
		t.Fatalf("member list: %q, %v", out, err)
	}

	if _, err := runHearth(t, "", "member", "suspend", "alice", addr); err != nil {
		t.Fatal(err)
	}
	if p := newBrowser(t, testSite).signIn("alice", "first password"); p.StatusCode != 403 {
		t.Fatalf("suspended sign-in: HTTP %d", p.StatusCode)
	}
	if _, err := runHearth(t, "", "member", "unsuspend", "alice", addr); err != nil {
		t.Fatal(err)
	}
	if _, err := runHearth(t, "second password\n", "member", "passwd", "alice", "--password-stdin", addr); err != nil {
		t.Fatal(err)
	}
	if p := newBrowser(t, testSite).signIn("alice", "first password"); p.StatusCode != 401 {
		t.Fatalf("old password after passwd: HTTP %d", p.StatusCode)
	}
	if p := newBrowser(t, testSite).signIn("alice", "second password"); p.StatusCode != 303 {
		t.Fatalf("new password: HTTP %d", p.StatusCode)
	}
	// Without a terminal, remove needs --yes.
	if _, err := runHearth(t, "alice\n", "member", "remove", "alice", addr); err == nil || !strings.Contains(err.Error(), "--yes") {
		t.Fatalf("remove without --yes and without a terminal: %v", err)
	}
	adminJSONOK(t, http.MethodGet, "/hearth/members/alice", "", http.StatusOK, nil)
	if _, err := runHearth(t, "", "member", "remove", "alice", "--yes", addr); err != nil {
		t.Fatal(err)
	}
	if _, err := runHearth(t, "", "member", "remove", "alice", "--yes", addr); err == nil {
		t.Fatal("removing a missing member succeeded")
	}
}

func TestCLIBackupAndRestore(t *testing.T) {
	dir := t.TempDir()
	caddyfile := hearthCaddyfile(dir, oauthSite)
	cfgPath := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(cfgPath, []byte(caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := startWithAlice(t, caddyfile)
	backup := filepath.Join(t.TempDir(), "hearth.backup")
	if out, err := runHearth(t, "", "backup", "--output", backup, addr); err != nil || !strings.Contains(out, "wrote backup") {
		t.Fatalf("backup: %q, %v", out, err)
	}
	// Written after the backup: the restore must take it away again.
	if _, err := runHearth(t, "a good password\n", "member", "add", "bob", "--password-stdin", addr); err != nil {
		t.Fatal(err)
	}

	// While Caddy runs, restore goes through the admin API. A file that is
	// not a backup is refused and changes nothing.
	bad := filepath.Join(t.TempDir(), "bad.backup")
	if err := os.WriteFile(bad, []byte("root:x:0:0:root:/root:/bin/bash\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := runHearth(t, "", "restore", "--input", bad, addr); err == nil || !strings.Contains(err.Error(), "not a complete Hearth backup") {
		t.Fatalf("restore of a text file while running: %v", err)
	}
	adminJSONOK(t, "GET", "/hearth/members/bob", "", 200, nil)
	out, err := runHearth(t, "", "restore", "--input", backup, addr)
	m := regexp.MustCompile(`previous records are in (\S+);`).FindStringSubmatch(out)
	if err != nil || !strings.Contains(out, "restored") || m == nil {
		t.Fatalf("restore while running: %q, %v", out, err)
	}
	previous := m[1]
	adminJSONOK(t, "GET", "/hearth/members/alice", "", 200, nil)
	adminJSONOK(t, "GET", "/hearth/members/bob", "", 404, nil)
	if p := newBrowser(t, testSite).signIn("alice", "a good password"); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("alice signs in after the restore: HTTP %d", p.StatusCode)
	}

	// Stopped (an empty config releases the store), restore works on the
	// directory; the earlier records saved by the live restore bring bob back.
	loadCaddyfile(t, "{\n\tadmin "+testAdmin+"\n}\n")
	// Without a config naming the store (none here, or one without Hearth)
	// nothing is restored into a default directory the site never opens.
	noHearth := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(noHearth, []byte(testSite+" {\n\trespond \"hello\"\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{addr}, {addr, "--config", noHearth}} {
		out, err := runHearth(t, "", append([]string{"restore", "--input", previous}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "pass --config with the site's Caddyfile") {
			t.Fatalf("restore %v while stopped: %q, %v; want a refusal naming --config", args, out, err)
		}
	}
	// Run as root (sudo), the restore gives the new store the owner of the
	// one it replaces (a caddy user's), whose Caddy could not open it else.
	asRoot := os.Geteuid() == 0
	if asRoot {
		if err := chownTree(dir, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	out, err = runHearth(t, "", "restore", "--config", cfgPath, "--input", previous)
	if err != nil || !strings.Contains(out, "restored") {
		t.Fatalf("restore: %q, %v", out, err)
	}
	if asRoot {
		filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
			if fi, serr := os.Lstat(p); err != nil || serr != nil || fi.Sys().(*syscall.Stat_t).Uid != 65534 {
				t.Errorf("%s after a restore run as root: not owned by the uid of the store it replaced (%v, %v)", p, err, serr)
			}
			return nil
		})
	}
	st, err := storage.Open(dir, storage.Options{GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, name := range []string{"alice", "bob"} {
		if _, err := members.Of(st).Member(t.Context(), name); err != nil {
			t.Fatalf("%s after restoring the earlier records: %v", name, err)
		}
	}
}

// A missing or mistyped subcommand is an error (exit status 1), not the
// help with status 0 that a script would take for success.
func TestCLIRefusesUnknownSubcommands(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"member", "suspnd", "alice"}, `unknown command "suspnd" for 'hearth member'; did you mean suspend?`},
		{[]string{"bogus"}, `unknown command "bogus" for 'hearth'`},
		{[]string{"member"}, `'hearth member' needs a command`},
		{[]string{"token"}, `'hearth token' needs a command`},
		{[]string{}, `'hearth' needs a command`},
	} {
		if _, err := runHearth(t, "", tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("hearth %v: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
	if out, err := runHearth(t, "", "member", "--help"); err != nil || !strings.Contains(out, "suspend") {
		t.Errorf("member --help: %q, %v", out, err)
	}
}

// Pointed at a site instead of the admin endpoint, the CLI says so.
func TestCLIPointedAtASite(t *testing.T) {
	startHearth(t, hearthCaddyfile(t.TempDir(), oauthSite))
	_, err := runHearth(t, "", "member", "list", "--address", strings.TrimPrefix(testSite, "http://"))
	if err == nil || !strings.Contains(err.Error(), "did not answer like Caddy's admin API") {
		t.Fatalf("member list against the site: %v", err)
	}
}

// `caddy hearth member add` first asks whether the name is free; that
// lookup's 404 is an answer, and leaves no error line in the server's log
// (Caddy logs every error an admin route returns as "request error").
func TestCLIMemberAddLeavesNoErrorInTheLog(t *testing.T) {
	logFile := filepath.Join(t.TempDir(), "caddy.log")
	startHearth(t, loggingCaddyfile(t.TempDir(), logFile, "", fmt.Sprintf("%s {\n\thearth_graphql\n}\n", testSite)))
	if _, err := runHearth(t, "a long password\n", "member", "add", "bob", "--password-stdin", "--address="+testAdmin); err != nil {
		t.Fatal(err)
	}
	if _, err := runHearth(t, "", "member", "suspend", "nobody", "--address="+testAdmin); err == nil || !strings.Contains(err.Error(), "nobody") {
		t.Fatalf("suspend nobody: %v", err)
	}
	logged, _ := os.ReadFile(logFile)
	if n := strings.Count(string(logged), `"level":"error"`); n != 1 || !strings.Contains(string(logged), `no member \"nobody\"`) {
		t.Errorf("%d error lines, want only the failed suspension's:\n%s", n, logged)
	}
}

// Run as root, a restore gives the new store's files away (chownTree) in a
// directory whose parent another user owns, who could swap a path for a
// link to root's files: links in the tree are changed, never followed,
// and a store directory that is itself a link out of its parent is
// refused, root's files left as they were.
func TestChownTreeFollowsNoLinkOut(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing owners needs root")
	}
	base := t.TempDir()
	outside, parent := filepath.Join(base, "outside"), filepath.Join(base, "parent")
	dir := filepath.Join(parent, "hearth")
	for _, d := range []string{outside, dir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(outside, "passwd")
	for _, f := range []string{secret, filepath.Join(dir, "MANIFEST")} {
		if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(secret, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	uidOf := func(p string) uint32 {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Uid
	}
	if err := chownTree(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, "MANIFEST"), filepath.Join(dir, "link")} {
		if uid := uidOf(p); uid != 65534 {
			t.Errorf("%s: uid %d after chownTree, want 65534", p, uid)
		}
	}
	swapped := filepath.Join(parent, "swapped")
	if err := os.Symlink(outside, swapped); err != nil {
		t.Fatal(err)
	}
	if err := chownTree(swapped, 65534, 65534); err == nil {
		t.Error("chownTree of a link out of its parent: no error")
	}
	for _, p := range []string{outside, secret} {
		if uid := uidOf(p); uid != 0 {
			t.Errorf("%s, outside the store: uid %d, want root's", p, uid)
		}
	}
}

// TestCLIConfigLoadLogsOnce: a command given --config, run as the caddy
// binary runs it, prints Caddy's "using config from file", "adapted
// config to JSON" and the adapter's warnings once, however many times it asks the admin API (member
// add asks whether the name is free, then creates it) or reads the config
// for the site's address (reset-link).
func TestCLIConfigLoadLogsOnce(t *testing.T) {
	caddyfile := hearthCaddyfile(t.TempDir(), oauthSite)
	cfgPath := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(cfgPath, []byte(caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	startHearth(t, caddyfile)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"correct horse battery\n", []string{"member", "add", "bob", "--password-stdin"}, "created member bob"},
		{"", []string{"member", "list"}, "bob"},
		{"", []string{"member", "reset-link", "bob"}, testSite + "/auth/reset/hrt_"},
	} {
		cmd := exec.Command(self, append(append([]string{"hearth"}, tc.args...), "--config", cfgPath)...)
		cmd.Env = append(os.Environ(), "HEARTH_TEST_RUN_CADDY=1")
		cmd.Stdin = strings.NewReader(tc.stdin)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), tc.want) {
			t.Fatalf("hearth %v --config: %v\n%s", tc.args, err, out)
		}
		// The test's Caddyfile is not as caddy fmt writes it: the adapter
		// warns, at each load.
		for _, line := range []string{"using config from file", "adapted config to JSON", "Caddyfile input is not formatted"} {
			if n := strings.Count(string(out), line); n != 1 {
				t.Errorf("hearth %v --config printed %q %d times, want once:\n%s", tc.args, line, n, out)
			}
		}
	}
}
