//go:build nostrtools

// Package nostr runs docs/directory.md's example, as written, with
// nostr-tools (npm, this folder's package-lock.json) and curl against a
// directory on loopback.
package nostr

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/directory"
	"github.com/hearthkit/caddy-hearth/storage"
)

// docBlocks returns the fenced blocks of docs/directory.md marked
// <!-- file: NAME --> by NAME, and the shell block marked
// <!-- commands: sign and send -->.
func docBlocks(t *testing.T) (map[string]string, []string) {
	b, err := os.ReadFile("../../docs/directory.md")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, m := range regexp.MustCompile("(?s)<!-- file: ([^ ]+) -->\n```[a-z]*\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		files[m[1]] = m[2]
	}
	m := regexp.MustCompile("(?s)<!-- commands: sign and send -->\n```sh\n(.*?)```").FindStringSubmatch(string(b))
	if len(files) != 3 || m == nil {
		t.Fatalf("docs/directory.md: found files %v and commands %v", len(files), m != nil)
	}
	return files, strings.Split(strings.TrimSpace(m[1]), "\n")
}

func TestDocumentedEventsSignedWithNostrTools(t *testing.T) {
	files, commands := docBlocks(t)
	work, err := os.MkdirTemp(".", "docs-example-") // under node_modules' folder
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(work, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sync := false
	store, err := storage.Open(t.TempDir(), storage.Options{GCInterval: -1, SyncWrites: &sync})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	dir, err := directory.New(store, directory.Options{NIP05Domain: "example.org", RegenerateDelay: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(dir)
	t.Cleanup(func() { srv.Close(); dir.Close() })

	var outputs []string
	for _, c := range commands {
		if strings.HasPrefix(c, "npm install ") {
			continue // run.sh's npm ci installs the same version
		}
		cmd := exec.Command("bash", "-c", strings.ReplaceAll(c, "https://example.org", srv.URL))
		cmd.Dir = work
		out, err := cmd.Output()
		if err != nil {
			var stderr string
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("%s: %v\n%s%s", c, err, out, stderr)
		}
		outputs = append(outputs, string(out))
	}
	var entry directory.Entry
	if err := json.Unmarshal([]byte(outputs[1]), &entry); err != nil || entry.Name != "Baker Bot" ||
		strings.Join(entry.Capabilities, ",") != "answer-questions,take-orders" || entry.Operator == nil || *entry.Operator != "Jane Baker" {
		t.Fatalf("registration answer: %s (%v)", outputs[1], err)
	}
	var ok []directory.OKResult
	if err := json.Unmarshal([]byte(outputs[3]), &ok); err != nil || len(ok) != 1 || !ok[0].OK || ok[0].Message != "" {
		t.Fatalf("note answer: %s (%v)", outputs[3], err)
	}
	agents, err := dir.Agents(t.Context())
	if err != nil || len(agents) != 1 || agents[0].Posts != 1 || agents[0].Npub != entry.Npub {
		t.Fatalf("the directory holds %+v, %v", agents, err)
	}
	if key, err := os.ReadFile(filepath.Join(work, "agent.key")); err != nil || len(strings.TrimSpace(string(key))) != 64 {
		t.Errorf("agent.key: %q, %v", key, err)
	}
}
