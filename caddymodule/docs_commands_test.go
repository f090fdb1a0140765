package caddymodule

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocumentedCommandsAreRun: every command in a shell block of README.md,
// xcaddy.md and docs/*.md has a row in docs/commands.md, and what the row
// says runs it exists: a Go test of this repository, a stage of .ci/run, or
// .ci/newcomer.sh containing the command.
func TestDocumentedCommandsAreRun(t *testing.T) {
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	table := map[string]string{} // command -> run by
	for _, line := range strings.Split(read("../docs/commands.md"), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := regexp.MustCompile(`\s*(?:^|[^\\])\|\s*`).Split(strings.Trim(line, "| "), -1)
		if len(cells) != 2 {
			t.Fatalf("docs/commands.md: row %q has %d cells", line, len(cells))
		}
		cmd := strings.ReplaceAll(strings.Trim(cells[0], "`"), `\|`, "|")
		table[cmd] = cells[1]
	}

	docs, _ := filepath.Glob("../docs/*.md")
	docs = append(docs, "../README.md", "../xcaddy.md")
	block := regexp.MustCompile("(?s)```(?:sh|bash)\n(.*?)```")
	var commands []string
	ci, newcomer := read("../.ci/run"), read("../.ci/newcomer.sh")
	firstRequests := 0
	for _, f := range docs {
		if strings.HasSuffix(f, "-first-requests.md") {
			// The first-requests pages are run whole, every block in
			// order, against the newcomer's live server.
			firstRequests++
			if !strings.Contains(newcomer, "run_page docs/"+filepath.Base(f)) {
				t.Errorf("%s: .ci/newcomer.sh does not run it (run_page docs/%s)", filepath.Base(f), filepath.Base(f))
			}
			continue
		}
		for _, m := range block.FindAllStringSubmatch(read(f), -1) {
			for _, line := range strings.Split(m[1], "\n") {
				if i := strings.Index(line, "   #"); i >= 0 {
					line = line[:i] // a comment after the command
				}
				if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
					commands = append(commands, line)
					if _, ok := table[line]; !ok {
						t.Errorf("%s: %q is not in docs/commands.md", filepath.Base(f), line)
					}
				}
			}
		}
	}
	if len(commands) < 10 {
		t.Fatalf("found only %d documented commands", len(commands))
	}

	var tests strings.Builder
	for _, pattern := range []string{"*_test.go", "../*/*_test.go", "../handlers/*/*_test.go"} {
		files, _ := filepath.Glob(pattern)
		for _, f := range files {
			tests.WriteString(read(f))
		}
	}
	if firstRequests < 3 {
		t.Errorf("%d first-requests pages in docs/, want one per service (GraphQL, OAuth, directory)", firstRequests)
	}
	asRun := strings.NewReplacer("caddy hearth", "go run -tags nobadger,nomysql,nopgx ./cmd/caddy hearth")
	for cmd, by := range table {
		for _, name := range regexp.MustCompile("`(Test[A-Za-z]+)`").FindAllStringSubmatch(by, -1) {
			if !strings.Contains(tests.String(), "func "+name[1]+"(") {
				t.Errorf("%q: no test %s", cmd, name[1])
			}
		}
		if m := regexp.MustCompile("`.ci/run` stage ([a-z-]+)").FindStringSubmatch(by); m != nil &&
			!strings.Contains(ci, "stage "+m[1]+" ") {
			t.Errorf("%q: .ci/run has no stage %s", cmd, m[1])
		}
		if strings.HasPrefix(by, "`.ci/newcomer.sh`") && !strings.Contains(newcomer, cmd) && !strings.Contains(newcomer, asRun.Replace(cmd)) {
			t.Errorf("%q: not in .ci/newcomer.sh", cmd)
		}
		if !strings.Contains(by, "Test") && !strings.Contains(by, ".ci/") && !strings.HasPrefix(by, "Exception:") {
			t.Errorf("%q: run by %q, which names no test, CI stage or exception", cmd, by)
		}
	}
}
