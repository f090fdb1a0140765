package caddymodule

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/hearthkit/caddy-hearth/handlers/importer"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// Imports through the admin API, for `caddy hearth import`: the file is
// the request body, staged and checked by the hearth_graphql handler's
// import runner as an upload to /api/import is.

func init() {
	registerAdminEndpoint("/hearth/members/{username}/imports", adminMethods{
		http.MethodPost: adminStartImport,
		http.MethodGet:  adminListImports,
	})
	registerAdminEndpoint("/hearth/members/{username}/imports/{id}", adminMethods{http.MethodGet: adminGetImport})
	addHearthCommand(importCommand)
}

// setImporter records the import runner of a hearth_graphql handler (the
// first one provisioned): the admin API starts imports through it.
func (a *App) setImporter(r *importer.Runner) {
	if a.importer == nil {
		a.importer = r
	}
}

// adminStartImport is POST /hearth/members/{username}/imports?format=F&label=NAME...
// with the file as the body; it answers 201 with the job.
func adminStartImport(w http.ResponseWriter, r *http.Request, app *App) error {
	if app.importer == nil {
		return apiError(http.StatusServiceUnavailable, "imports need a hearth_graphql handler in the loaded config")
	}
	m, err := adminMember(r, app)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	format, err := importer.ParseFormat(q.Get("format"))
	if err != nil {
		return apiError(http.StatusBadRequest, "%v", err)
	}
	var labelIDs []string
	if names := q["label"]; len(names) > 0 {
		labels, err := library.Of(app.Store()).Labels(r.Context(), m.ID)
		if err != nil {
			return storeError(err, "label")
		}
		for _, n := range names {
			found := false
			for _, l := range labels {
				if strings.EqualFold(l.Name, strings.TrimSpace(n)) {
					labelIDs, found = append(labelIDs, l.ID), true
					break
				}
			}
			if !found {
				return apiError(http.StatusBadRequest, "%s has no label %q; create it first", m.Username, n)
			}
		}
	}
	// A large file outlasts the admin server's read timeout.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	staged, err := app.importer.Stage(r.Body)
	if err != nil {
		if importer.IsFileError(err) {
			return apiError(http.StatusRequestEntityTooLarge, "%v", err)
		}
		return apiError(http.StatusInternalServerError, "the file could not be received: %v", err)
	}
	name := q.Get("name")
	if name == "" {
		name = "import"
	}
	job, err := app.importer.Start(r.Context(), m.ID, staged, name, format, labelIDs)
	if err != nil {
		if importer.IsFileError(err) || storage.IsInvalid(err) {
			return apiError(http.StatusBadRequest, "%v", err)
		}
		return storeError(err, "import")
	}
	app.logger.Info("import started through the admin API")
	return writeJSON(w, http.StatusCreated, job)
}

func adminListImports(w http.ResponseWriter, r *http.Request, app *App) error {
	m, err := adminMember(r, app)
	if err != nil {
		return err
	}
	jobs, err := library.Of(app.Store()).ImportJobs(r.Context(), m.ID)
	if err != nil {
		return storeError(err, "import")
	}
	if jobs == nil {
		jobs = []*library.ImportJob{}
	}
	return writeJSON(w, http.StatusOK, jobs)
}

func adminGetImport(w http.ResponseWriter, r *http.Request, app *App) error {
	m, err := adminMember(r, app)
	if err != nil {
		return err
	}
	j, err := library.Of(app.Store()).ImportJob(r.Context(), m.ID, r.PathValue("id"))
	if errors.Is(err, storage.ErrNotFound) {
		return apiError(http.StatusNotFound, "%s has no import %s", m.Username, r.PathValue("id"))
	}
	if err != nil {
		return storeError(err, "import")
	}
	return writeJSON(w, http.StatusOK, j)
}

// importCommand is `caddy hearth import --member NAME FILE`.
func importCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "import --member NAME [--format F] [--label L]... FILE",
		Short: "Imports another service's export into a member's saved items, with a progress bar",
		Long: `Sends FILE to the running Caddy's admin API, which checks it, imports it in
the background and goes on after a restart. The command shows the progress
until the import ends, the pages it fetches in the background included
(Ctrl-C stops watching, not the import); --no-fetch-wait returns once the
entries are written, --no-wait once the file is accepted. Formats (detected
from the file unless --format is given): POCKET, POCKET_HTML, OMNIVORE,
RAINDROP, READWISE_READER, READWISE, MATTER, GOODLINKS, KARAKEEP, LINKWARDEN,
INBOXT_CSV, INBOXT_ZIP, WALLABAG, INSTAPAPER, BOOKMARKS, HEARTH; see
docs/import.md.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			member, _ := cmd.Flags().GetString("member")
			if member == "" {
				return errors.New("--member is required")
			}
			format, _ := cmd.Flags().GetString("format")
			if _, err := importer.ParseFormat(format); err != nil {
				return err
			}
			labels, _ := cmd.Flags().GetStringArray("label")
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			q := url.Values{"name": {filepath.Base(args[0])}}
			if format != "" {
				q.Set("format", format)
			}
			for _, l := range labels {
				q.Add("label", l)
			}
			resp, err := adminRequest(cmd, http.MethodPost, memberURI(member, "imports")+"?"+q.Encode(),
				http.Header{"Content-Type": {"application/octet-stream"}}, bufio.NewReader(f))
			if err != nil {
				return fmt.Errorf("import: %w", err)
			}
			var job library.ImportJob
			err = json.NewDecoder(resp.Body).Decode(&job)
			resp.Body.Close()
			if err != nil || job.ID == "" {
				return fmt.Errorf("import: unexpected answer from the admin API (%v)", err)
			}
			out := cmd.ErrOrStderr()
			fmt.Fprintf(out, "importing %s into %s: %d entries (%s), import %s\n", filepath.Base(args[0]), member, job.Total, job.Format, job.ID)
			if noWait, _ := cmd.Flags().GetBool("no-wait"); noWait {
				return nil
			}
			tty := false
			if fd, ok := out.(*os.File); ok {
				tty = term.IsTerminal(int(fd.Fd()))
			}
			noFetchWait, _ := cmd.Flags().GetBool("no-fetch-wait")
			ended := func() bool {
				return job.Finished() && (noFetchWait || !importer.ProgressOf(&job, time.Now()).Working)
			}
			last := time.Time{}
			for {
				if err := adminJSON(cmd, http.MethodGet, memberURI(member, "imports", job.ID), nil, &job); err != nil {
					return err
				}
				if tty {
					fmt.Fprintf(out, "\r%s", progressLine(&job))
				} else if ended() || time.Since(last) >= 5*time.Second {
					fmt.Fprintln(out, progressLine(&job))
					last = time.Now()
				}
				if ended() {
					break
				}
				time.Sleep(500 * time.Millisecond)
			}
			if tty {
				fmt.Fprintln(out)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%d new, %d already saved, %d not imported", job.Created, job.Existing, job.Failed)
			if p := importer.ProgressOf(&job, time.Now()); p.Waiting > 0 {
				fmt.Fprintf(w, "; %d of %d pages still to fetch in the background", p.Waiting, job.Fetching)
			} else if job.Fetching > 0 {
				fmt.Fprintf(w, "; %d pages fetched, %d could not be", job.Fetched, job.FetchFailed)
			}
			if job.Images > 0 || job.ImagesSkipped > 0 {
				fmt.Fprintf(w, "; %d images stored, %d skipped", job.Images, job.ImagesSkipped)
			}
			if job.HighlightsCut > 0 {
				fmt.Fprintf(w, "; %d imported short of highlights", job.HighlightsCut)
			}
			fmt.Fprintln(w)
			for _, f := range job.Failures {
				fmt.Fprintf(w, "  %s: %s\n", f.Ref, f.Reason)
			}
			if more := job.Failed + job.FetchFailed + job.ImagesSkipped + job.HighlightsCut - len(job.Failures); more > 0 {
				fmt.Fprintf(w, "  (and %d more)\n", more)
			}
			if job.State == library.ImportFailed {
				return fmt.Errorf("the import stopped: %s", job.Error)
			}
			return nil
		},
	}
	c.Flags().String("member", "", "The member who gets the items (required)")
	c.Flags().String("format", "", "The export's format; detected from the file when not given")
	c.Flags().StringArray("label", nil, "A label (an existing one, by name) to add to every imported item; repeatable")
	c.Flags().Bool("no-wait", false, "Return once the file is accepted, without watching the progress")
	c.Flags().Bool("no-fetch-wait", false, "Return once the entries are written, without watching the pages fetched in the background")
	return c
}

// progressLine is one line of the terminal progress bar.
func progressLine(j *library.ImportJob) string {
	const width = 30
	done := 0
	if j.Total > 0 {
		done = j.Position * width / j.Total
	}
	p := importer.ProgressOf(j, time.Now())
	if p.Fetching {
		done = (j.Fetching - p.Waiting) * width / j.Fetching
	}
	bar := strings.Repeat("#", done) + strings.Repeat(".", width-done)
	s := fmt.Sprintf("[%s] %d/%d  new %d  existing %d  failed %d", bar, j.Position, j.Total, j.Created, j.Existing, j.Failed)
	if p.Fetching {
		s = fmt.Sprintf("[%s] pages fetched %d/%d  could not %d", bar, j.Fetched, j.Fetching, j.FetchFailed)
	}
	if d := p.Left; d > 0 {
		s += fmt.Sprintf("  ~%s left", d.Round(time.Second))
	}
	return s
}
