package caddymodule

import (
	"bytes"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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

// issueNumber is a mention of one of the project's issues (the word and
// its number): history, which git keeps.
var issueNumber = regexp.MustCompile(`(?i)\bissues? #?[0-9]+\b`)

// TestDocsNameOnlyFilesOfTheRepository: every relative link of the
// repository's Markdown files (README.md, xcaddy.md, docs/, bench/, the
// READMEs of interop/ and of the test data) leads to a file of the
// repository, and every path in backquotes that starts in the repository's
// top level (or in a folder outside it that docs once cited, such as
// specs/ or ../) names a file or folder that exists (a glob names at least
// one). A reader who follows a doc must not look for what is not there;
// nor for an issue a doc names (issueNumber): the doc says what holds.
func TestDocsNameOnlyFilesOfTheRepository(t *testing.T) {
	top := map[string]bool{"specs": true, "design": true, "shared": true, "..": true}
	entries, err := os.ReadDir("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		top[e.Name()] = true
	}
	// build/ holds what the suites write (screenshots), present only after
	// a run and never committed: a doc may name it whether it exists or not.
	delete(top, "build")
	var docs []string
	err = filepath.WalkDir("..", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(name, ".md") {
			docs = append(docs, name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	quoted := regexp.MustCompile("`([A-Za-z0-9_.*-]+(?:/[A-Za-z0-9_.*-]*)+)`")
	// A package path followed by one of its exported names.
	goSymbol := regexp.MustCompile(`^(.*/[a-z0-9_]+)\.[A-Z][A-Za-z0-9_]*$`)
	exists := func(path string) bool {
		m, _ := filepath.Glob(path)
		return len(m) > 0
	}
	checked := 0
	for _, f := range docs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		prose := regexp.MustCompile("`[^`\n]*`").ReplaceAllString(string(b), "") // code is not a link
		if m := issueNumber.FindString(string(b)); m != "" {
			t.Errorf("%s names %q: the issues are not in the repository, say what holds instead", strings.TrimPrefix(f, "../"), m)
		}
		for _, m := range link.FindAllStringSubmatch(prose, -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			if !exists(filepath.Join(filepath.Dir(f), target)) {
				t.Errorf("%s links to %s, which is not in the repository", strings.TrimPrefix(f, "../"), m[1])
			}
		}
		for _, m := range quoted.FindAllStringSubmatch(string(b), -1) {
			first, _, _ := strings.Cut(m[1], "/")
			if !top[first] {
				continue
			}
			checked++
			path := m[1]
			if sym := goSymbol.FindStringSubmatch(path); sym != nil {
				path = sym[1] // storage/storagetest.Interleaver: the package
			}
			if !exists(filepath.Join("..", path)) {
				t.Errorf("%s names `%s`, which is not in the repository", strings.TrimPrefix(f, "../"), m[1])
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d paths checked: the patterns no longer find the docs' paths", checked)
	}
}

// TestCommentsNameOnlyFilesOfTheRepository: every path a comment names —
// in Go code (tests included), templates, stylesheets, scripts (shell,
// Python, Lua, JavaScript) and .ci/run — that starts in the repository's
// top level names a file or folder that exists (a glob names at least one;
// storage/... is the folder; a Go symbol after the path, as
// storage/storagetest.Interleaver, names its package). A comment that
// sends the reader to a file that moved or went is worse than none, and
// so is one that sends them to an issue (issueNumber).
func TestCommentsNameOnlyFilesOfTheRepository(t *testing.T) {
	const root = ".."
	top := map[string]bool{}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		top[e.Name()] = true
	}
	path := regexp.MustCompile(`[A-Za-z0-9_.*-]+(?:/[A-Za-z0-9_.*{}-]+)+`)
	goSymbol := regexp.MustCompile(`^(.*/[a-z0-9_]+)\.[A-Z][A-Za-z0-9_]*$`)
	// The comments of each kind of file.
	hash := regexp.MustCompile(`(?m)(?:^|\s)#(.*)$`)
	lua := regexp.MustCompile(`(?m)--(.*)$`)
	js := regexp.MustCompile(`(?ms)//(.*?)$|/\*(.*?)\*/`)
	markup := regexp.MustCompile(`(?s)\{\{-?\s*/\*(.*?)\*/|<!--(.*?)-->|/\*(.*?)\*/`)
	comments := func(name string, b []byte) []string {
		var out []string
		collect := func(re *regexp.Regexp) {
			for _, m := range re.FindAllSubmatch(b, -1) {
				out = append(out, string(bytes.Join(m[1:], nil)))
			}
		}
		switch ext := filepath.Ext(name); {
		case ext == ".go":
			f, err := parser.ParseFile(token.NewFileSet(), name, b, parser.ParseComments)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				return nil
			}
			for _, c := range f.Comments {
				out = append(out, c.Text())
			}
		case ext == ".sh" || ext == ".py" || filepath.Base(name) == "run":
			collect(hash)
		case ext == ".lua":
			collect(lua)
		case ext == ".js" || ext == ".mjs":
			collect(js)
		case ext == ".html" || ext == ".tmpl" || ext == ".css":
			collect(markup)
		}
		return out
	}
	exists := func(p string) bool {
		m, _ := filepath.Glob(filepath.Join(root, p))
		return len(m) > 0
	}
	checked := 0
	err = walkRepo(func(name string) error {
		b, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		for _, c := range comments(name, b) {
			if m := issueNumber.FindString(c); m != "" {
				rel, _ := filepath.Rel(root, name)
				t.Errorf("%s: a comment names %q: the issues are not in the repository, say what holds instead", rel, m)
			}
			for _, p := range path.FindAllString(c, -1) {
				p = strings.TrimRight(p, ".")
				first, _, _ := strings.Cut(p, "/")
				if !top[first] {
					continue
				}
				checked++
				file := strings.TrimSuffix(p, "/...")
				if sym := goSymbol.FindStringSubmatch(file); sym != nil && !exists(file) {
					file = sym[1]
				}
				if !exists(file) {
					rel, _ := filepath.Rel(root, name)
					t.Errorf("%s: a comment names %s, which is not in the repository", rel, p)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("only %d paths checked: the patterns no longer find the comments' paths", checked)
	}
}

// TestDocsAndCommentsNameOnlyTestsThatExist: a Go test or benchmark that a
// doc (Markdown), a script, .ci/run or a Go comment names exists: its name
// is a test function's, or begins one (TestCluster… for a family, a -run
// pattern's TestSearch(Pairs|Costs)). A renamed test leaves no pointer to
// nothing behind.
func TestDocsAndCommentsNameOnlyTestsThatExist(t *testing.T) {
	const root = ".."
	defined := regexp.MustCompile(`(?m)^func ((?:Test|Benchmark)[A-Z][A-Za-z0-9_]*)\(`)
	named := regexp.MustCompile(`\b(?:Test|Benchmark)[A-Z][A-Za-z0-9_]*`)
	var tests []string
	type mention struct{ file, name string }
	var mentions []mention
	err := walkRepo(func(name string) error {
		rel, _ := filepath.Rel(root, name)
		var texts []string
		switch ext := filepath.Ext(name); {
		case ext == ".go":
			b, err := os.ReadFile(name)
			if err != nil {
				return err
			}
			if strings.HasSuffix(name, "_test.go") {
				for _, m := range defined.FindAllSubmatch(b, -1) {
					tests = append(tests, string(m[1]))
				}
			}
			f, err := parser.ParseFile(token.NewFileSet(), name, b, parser.ParseComments)
			if err != nil {
				return err
			}
			for _, c := range f.Comments {
				texts = append(texts, c.Text())
			}
		case ext == ".md" || ext == ".sh" || rel == filepath.Join(".ci", "run"):
			b, err := os.ReadFile(name)
			if err != nil {
				return err
			}
			texts = append(texts, string(b))
		}
		for _, s := range texts {
			for _, n := range named.FindAllString(s, -1) {
				mentions = append(mentions, mention{rel, n})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(tests) < 500 || len(mentions) < 100 {
		t.Fatalf("found %d tests and %d mentions: the walk no longer finds them", len(tests), len(mentions))
	}
	for _, m := range mentions {
		if !slices.ContainsFunc(tests, func(test string) bool { return strings.HasPrefix(test, m.name) }) {
			t.Errorf("%s names %s, which no test's name is or begins with", m.file, m.name)
		}
	}
}
