package graphql_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/importer"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// importChildEnv makes the test binary the server process of
// TestImportSurvivesSIGKILLAndResumes: it opens the store in the directory
// named, starts the import of the file in importChildFile for the member
// "alice", and prints the job's position as it moves, until it is killed.
const (
	importChildEnv  = "HEARTH_IMPORT_CHILD_DIR"
	importChildFile = "HEARTH_IMPORT_CHILD_FILE"
)

func importChild(dir, file string) {
	st, err := storage.Open(dir, storage.Options{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	m, err := members.Of(st).Member(context.Background(), "alice")
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	api := newAPI(st, options{NoImportFetch: true, ImportDir: dir + "-imports"})
	f, err := os.Open(file)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	staged, err := api.Importer().Stage(f)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	job, err := api.Importer().Start(context.Background(), m.ID, staged, "part_000000.csv", importer.Auto, nil)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	w := bufio.NewWriter(os.Stdout)
	for {
		j, err := library.Of(st).ImportJob(context.Background(), m.ID, job.ID)
		if err != nil {
			fmt.Fprintln(w, "error", err)
			w.Flush()
			os.Exit(1)
		}
		fmt.Fprintf(w, "pos %d %d\n", j.Position, j.Total)
		w.Flush()
		time.Sleep(5 * time.Millisecond)
	}
}

// pocketCSV writes a Pocket export of n items (title,url,time_added,cursor,tags,status).
func pocketCSV(t testing.TB, n int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "part_000000.csv")
	var b strings.Builder
	b.WriteString("title,url,time_added,cursor,tags,status\n")
	for i := 0; i < n; i++ {
		status := "unread"
		if i%3 == 0 {
			status = "archive"
		}
		fmt.Fprintf(&b, "Article %d,https://site%d.example/articles/%d,%d,c%d,tag%d|reading,%s\n", i, i%50, i, 1600000000+i, i, i%20, status)
	}
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestImportSurvivesSIGKILLAndResumes(t *testing.T) {
	if dir := os.Getenv(importChildEnv); dir != "" {
		importChild(dir, os.Getenv(importChildFile))
		return
	}
	if testing.Short() {
		t.Skip("-short: a child process killed in the middle of its writes")
	}
	const n = 40000
	dir := filepath.Join(t.TempDir(), "store")
	st, err := storage.Open(dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	alice, err := members.Of(st).CreateMember(t.Context(), "alice", "", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	file := pocketCSV(t, n)

	cmd := exec.Command(os.Args[0], "-test.run=^TestImportSurvivesSIGKILLAndResumes$")
	cmd.Env = append(os.Environ(), importChildEnv+"="+dir, importChildFile+"="+file)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killedAt := -1
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "pos" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("child: %s", sc.Text())
		}
		if pos, _ := strconv.Atoi(f[1]); pos > 0 {
			if pos >= n {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("the import ended before it could be killed (%d entries)", pos)
			}
			cmd.Process.Signal(syscall.SIGKILL)
			killedAt = pos
			break
		}
	}
	cmd.Wait()
	if killedAt < 0 {
		t.Fatal("the child never reported progress")
	}

	// Restarted: the job goes on from where it stopped.
	st, err = storage.Open(dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	jobs, err := library.Of(st).UnfinishedImportJobs(t.Context())
	if err != nil || len(jobs) != 1 || jobs[0].Position < killedAt || jobs[0].Position >= n {
		t.Fatalf("after the kill (at %d): %+v %v", killedAt, jobs, err)
	}
	stoppedAt := jobs[0].Position
	api := newAPI(st, options{NoImportFetch: true, ImportDir: dir + "-imports"})
	defer api.Close()
	job := waitImport(t, st, alice.ID, jobs[0].ID)
	if job.State != library.ImportDone || job.Position != n || job.Created != n || job.Existing != 0 || job.Failed != 0 {
		t.Fatalf("resumed job (stopped at %d): %+v", stoppedAt, job)
	}
	seen := map[string]int{}
	err = library.Of(st).ForEachSavedItem(t.Context(), alice.ID, func(it *library.SavedItem, _ *library.ItemContent) error {
		seen[it.OriginalURL]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != n {
		t.Fatalf("%d distinct items, want %d", len(seen), n)
	}
	for u, c := range seen {
		if c != 1 {
			t.Fatalf("%s saved %d times", u, c)
		}
	}
	if left, _ := os.ReadDir(dir + "-imports"); len(left) != 0 {
		t.Fatalf("staged files left after the import: %v", left)
	}
	t.Logf("killed at entry %d (job at %d), resumed to %d", killedAt, stoppedAt, n)
}
