package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	"github.com/hearthkit/caddy-hearth/storage"
)

// TestMain lets a test run this binary as the caddy command (with the
// standard modules and Hearth, like cmd/caddy): HEARTH_TEST_RUN_CADDY=1
// ./caddymodule.test validate --config ... is `caddy validate --config ...`
// in a process of its own.
func TestMain(m *testing.M) {
	if os.Getenv("HEARTH_TEST_RUN_CADDY") == "1" {
		caddycmd.Main()
		return
	}
	os.Exit(m.Run())
}

// dialCounter is a TCP listener that counts connections: a relay address
// that shows whether anything dialled it.
func dialCounter(t *testing.T) (addr string, dials *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	dials = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			c.Close()
		}
	}()
	return ln.Addr().String(), dials
}

// exampleCaddyfile is Caddyfile.example with the test's admin address, site
// and storage_dir (the fixed ports of the other Caddy-level tests), and a
// relay for the directory.
func exampleCaddyfile(t *testing.T, storageDir, relay string) string {
	t.Helper()
	raw, err := os.ReadFile("../Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	for old, repl := range map[string]string{
		"admin localhost:2019":      "admin " + testAdmin + "\n\thttp_port 9080\n\thttps_port 9443",
		"storage_dir ./hearth-data": "storage_dir " + storageDir,
		"http://localhost:8080, ":   testSite + ", ",
		"\thearth_directory\n":      "\thearth_directory {\n\t\trelays ws://" + relay + "\n\t\tallow_private_addresses\n\t}\n",
	} {
		if !strings.Contains(s, old) {
			t.Fatalf("Caddyfile.example no longer contains %q", old)
		}
		s = strings.Replace(s, old, repl, 1)
	}
	// The other addresses of the site, and the catch-all block.
	return strings.ReplaceAll(s, ":8080", ":9080")
}

// TestExampleLANBlockNeedsNoRoot: the commented https:// block that ends
// Caddyfile.example, once uncommented, adds no listener on port 80 for
// redirects to HTTPS (Caddy's default for an https site), which a user who
// is not root cannot open: Caddy would not start.
func TestExampleLANBlockNeedsNoRoot(t *testing.T) {
	raw, err := os.ReadFile("../Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	example, block, ok := strings.Cut(string(raw), "# https://mybox.lan:8443 {")
	if !ok {
		t.Fatal("Caddyfile.example no longer ends with the commented https://mybox.lan:8443 block")
	}
	example += "https://mybox.lan:8443 {" + strings.ReplaceAll(block, "\n# ", "\n")
	cfgJSON, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(example), nil)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Apps struct {
			HTTP struct {
				Servers map[string]struct {
					Listen         []string `json:"listen"`
					AutomaticHTTPS *struct {
						DisableRedirects bool `json:"disable_redirects"`
					} `json:"automatic_https"`
				} `json:"servers"`
			} `json:"http"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(cfgJSON, &cfg); err != nil {
		t.Fatal(err)
	}
	found := false
	for name, srv := range cfg.Apps.HTTP.Servers {
		if slices.Contains(srv.Listen, ":8443") {
			found = true
			if srv.AutomaticHTTPS == nil || !srv.AutomaticHTTPS.DisableRedirects {
				t.Errorf("server %s of https://mybox.lan:8443 redirects from port 80, which needs root", name)
			}
		}
	}
	if !found {
		t.Fatalf("no server listens on :8443 in the uncommented example:\n%s", cfgJSON)
	}
}

// TestProvisionLocksNothingAndDialsNothing: caddy.Validate (Provision, then
// Cleanup, as `caddy validate` does) succeeds on a store another process
// holds (before, Provision opened it and failed on Badger's lock), creates
// no directory and dials no relay; starting the same config opens the store.
func TestProvisionLocksNothingAndDialsNothing(t *testing.T) {
	relay, dials := dialCounter(t)
	tmp := t.TempDir()
	held, fresh := filepath.Join(tmp, "held"), filepath.Join(tmp, "fresh")
	st, err := storage.Open(held, storage.Options{}) // the lock a running server holds
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	for _, dir := range []string{held, fresh} {
		cfgJSON, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(exampleCaddyfile(t, dir, relay)), nil)
		if err != nil {
			t.Fatal(err)
		}
		var cfg caddy.Config
		if err := json.Unmarshal(cfgJSON, &cfg); err != nil {
			t.Fatal(err)
		}
		if err := caddy.Validate(&cfg); err != nil {
			t.Fatalf("validate with storage_dir %s: %v", filepath.Base(dir), err)
		}
	}
	if _, err := os.Stat(fresh); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("validate created the storage directory (stat: %v)", err)
	}
	if n := dials.Load(); n != 0 {
		t.Errorf("validate dialled the relay %d times", n)
	}

	// The same config, started, opens (and locks) the store. (The relay is
	// dialled only once an agent is registered, so it stays quiet here.)
	startHearth(t, exampleCaddyfile(t, fresh, relay))
	if _, err := storage.Open(fresh, storage.Options{}); !errors.Is(err, storage.ErrLocked) {
		t.Errorf("the running server does not hold its store: open gave %v", err)
	}
}

// TestValidateBesideRunningServer runs `caddy validate --config` in a
// process of its own while this process serves the same config (same
// storage_dir): it must say the config is valid, and the server keeps
// serving.
func TestValidateBesideRunningServer(t *testing.T) {
	relay, _ := dialCounter(t)
	tmp := t.TempDir()
	caddyfile := exampleCaddyfile(t, filepath.Join(tmp, "store"), relay)
	startHearth(t, caddyfile)
	adminJSONOK(t, "POST", "/hearth/members", `{"username":"alice","password":"correct horse battery"}`, 201, nil)

	path := filepath.Join(tmp, "Caddyfile")
	if err := os.WriteFile(path, []byte(caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable() // this test binary (caddytest changes os.Args)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "validate", "--config", path, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "HEARTH_TEST_RUN_CADDY=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Valid configuration") {
		t.Fatalf("caddy validate beside the running server: %v\n%s", err, out)
	}
	// Validation opens no store, so it logs no store event either.
	if strings.Contains(string(out), "store") {
		t.Errorf("caddy validate logged a store event:\n%s", out)
	}
	var members []map[string]any
	adminJSONOK(t, "GET", "/hearth/members", "", 200, &members)
	if len(members) != 1 || members[0]["username"] != "alice" {
		t.Errorf("after validate, the running server lists %v", members)
	}
}

// TestStartupLogLine: at start Hearth logs one structured line through
// Caddy's logger with the storage engine and path and, per site, the
// services and the URLs to open, and those URLs answer.
func TestStartupLogLine(t *testing.T) {
	tmp := t.TempDir()
	logFile, storeDir := filepath.Join(tmp, "caddy.log"), filepath.Join(tmp, "store")
	startHearth(t, testCaddyfile(jsonLogTo(logFile), fmt.Sprintf("storage_dir %q", storeDir), fmt.Sprintf(`%s {
	hearth_oauth
	hearth_graphql
	hearth_directory {
		path /agents.json
	}
}
http://127.0.0.1:9080 {
	hearth_oauth
	respond "other"
}
`, testSite)))

	raw, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	var line struct {
		Logger        string       `json:"logger"`
		Msg           string       `json:"msg"`
		StorageEngine string       `json:"storage_engine"`
		StorageDir    string       `json:"storage_dir"`
		Sites         []hearthSite `json:"sites"`
	}
	found := 0
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.Contains(l, `"hearth started"`) {
			found++
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatalf("%v in %s", err, l)
			}
		}
	}
	if found != 1 {
		t.Fatalf("%d start-up lines in the log, want 1:\n%s", found, raw)
	}
	if line.Logger != "hearth" || line.StorageEngine != "badger" || line.StorageDir != storeDir {
		t.Errorf("start-up line: logger %q, engine %q, dir %q", line.Logger, line.StorageEngine, line.StorageDir)
	}
	want := map[string]hearthSite{
		testSite: {URL: testSite, Services: []string{"hearth_directory", "hearth_graphql", "hearth_oauth"},
			SignIn: testSite + "/auth/sign_in", Settings: testSite + "/settings",
			Directory: testSite + "/agents.json", GraphQL: testSite + "/api/graphql"},
		"http://127.0.0.1:9080": {URL: "http://127.0.0.1:9080", Services: []string{"hearth_oauth"},
			SignIn: "http://127.0.0.1:9080/auth/sign_in", Settings: "http://127.0.0.1:9080/settings"},
	}
	if len(line.Sites) != len(want) {
		t.Fatalf("sites %+v, want %+v", line.Sites, want)
	}
	for _, s := range line.Sites {
		slices.Sort(s.Services)
		if !reflect.DeepEqual(s, want[s.URL]) {
			t.Errorf("site %+v, want %+v", s, want[s.URL])
		}
	}
	// The URLs lead somewhere: sign-in page and directory document answer
	// 200; the GraphQL endpoint wants a token.
	for url, status := range map[string]int{
		testSite + "/auth/sign_in": 200, "http://127.0.0.1:9080/auth/sign_in": 200,
		testSite + "/agents.json": 200, testSite + "/settings": 303,
	} {
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != status {
			t.Errorf("GET %s: %d, want %d", url, resp.StatusCode, status)
		}
	}
}
