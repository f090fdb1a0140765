package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `caddy hearth agent-event` makes the agent's key the first time and
// signs a registration the directory takes (with the proof of work asked
// for), then a note its events endpoint takes; a registration and a note
// at once, or neither, is refused.
func TestAgentEventRegistersAndPosts(t *testing.T) {
	startHearth(t, hearthCaddyfile(t.TempDir(), fmt.Sprintf("%s {\n\thearth_directory\n}\n", testSite)))
	key := filepath.Join(t.TempDir(), "bot.key")
	post := func(path, body string) (int, string) {
		t.Helper()
		resp, err := http.Post(testSite+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	reg, err := runHearth(t, "", "agent-event", "--key", key, "--name", "Hello bot", "--purpose", "Says hello", "--capability", "greetings", "--pow", "4")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(key); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	status, body := post("/api/v1/agents/register", reg)
	var entry struct {
		Name, Pubkey string
		Gates        struct {
			PowBits int `json:"pow_bits"`
		}
	}
	if err := json.Unmarshal([]byte(body), &entry); status != http.StatusCreated || err != nil || entry.Name != "Hello bot" || entry.Gates.PowBits < 4 {
		t.Fatalf("register: HTTP %d %s", status, body)
	}
	// The same key signs the note.
	note, err := runHearth(t, "", "agent-event", "--key", key, "--post", "Hello from the tests")
	if err != nil || !strings.Contains(note, `"pubkey":"`+entry.Pubkey+`"`) {
		t.Fatalf("note: %s %v", note, err)
	}
	if status, body := post("/api/v1/agents/events", "["+note+"]"); status != http.StatusOK || !strings.Contains(body, `true,""]`) {
		t.Fatalf("events: HTTP %d %s", status, body)
	}
	for _, args := range [][]string{{"--name", "A", "--post", "B"}, {}} {
		if _, err := runHearth(t, "", append([]string{"agent-event", "--key", key}, args...)...); err == nil {
			t.Errorf("agent-event %v: no error", args)
		}
	}
}
