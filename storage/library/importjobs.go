package library

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"sort"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// Import jobs: a job records the staged file of an import (imports.go
// writes its items) and how far its entries have been taken.
//
//	import/<member id>/<job id>     ImportJob (outside u/<member>/, so that
//	                                one scan finds every member's unfinished
//	                                jobs at start)

func importJobKey(memberID, id string) []byte { return storage.Key("import", memberID, id) }

// importsTx is the imports' state of a transaction: the staged files of
// the jobs it deleted (DeleteMember), removed once it commits.
type importsTx struct{ staged []string }

var importsState = storage.NewTxState[importsTx]()

func init() {
	// A deleted member's jobs go, and the staged files of the unfinished
	// ones after the commit (a runner reading one finds its job gone and
	// stops); a failed delete keeps them.
	members.OnDelete(func(tx *storage.Tx, memberID string) error {
		staged, err := importStagedFiles(tx, memberID)
		if err != nil {
			return err
		}
		if len(staged) > 0 {
			it := importsState.Of(tx)
			it.staged = append(it.staged, staged...)
		}
		return tx.DeletePrefix(storage.Key("import", memberID, ""))
	})
	storage.OnCommit(nil, func(_ context.Context, _ *storage.Store, tx *storage.Tx) error {
		if it := importsState.Peek(tx); it != nil {
			removeStagedFiles(it.staged)
		}
		return nil
	})
}

// Import job states.
const (
	ImportQueued  = "queued"
	ImportRunning = "running"
	ImportDone    = "done"
	ImportFailed  = "failed"
)

// Limits on import jobs.
const (
	// MaxImportFailures is how many failures a job lists (all are counted).
	MaxImportFailures = 200
	// MaxImportJobs is how many jobs a member's list keeps; the oldest
	// finished ones are dropped past it.
	MaxImportJobs = 20
	// MaxUnfinishedImports is how many imports a member may have queued
	// or running at once.
	MaxUnfinishedImports = 3
)

// ImportJob is one import of a file into a member's saved items.
type ImportJob struct {
	ID       string `json:"id"`
	MemberID string `json:"member_id"`
	Format   string `json:"format"`
	FileName string `json:"file_name"`
	Staged   string `json:"staged"` // the staged file, removed when the job ends
	// Node names the node whose disk holds Staged ("" before several
	// nodes): another node runs the job only if it sees the file too (a
	// shared import directory).
	Node     string   `json:"node,omitempty"`
	LabelIDs []string `json:"label_ids,omitempty"`
	// FetchPrivate: content-less items may be fetched from private
	// addresses (the site allows it).
	FetchPrivate bool   `json:"fetch_private,omitempty"`
	State        string `json:"state"`
	Error        string `json:"error,omitempty"`
	// Total is the file's entry count; Position how many of them are
	// done (written, found already saved, or failed).
	Total    int `json:"total"`
	Position int `json:"position"`
	Created  int `json:"created"`
	Existing int `json:"existing"` // already saved: only missing labels added
	Failed   int `json:"failed"`
	Fetching int `json:"fetching"` // created without content: queued for fetching
	// Of those, fetched since, and not fetched (each listed among the
	// failures with the reason; the item keeps its title).
	Fetched     int `json:"fetched"`
	FetchFailed int `json:"fetch_failed"`
	// Images are the images the export carried that were stored with
	// their items (Hearth's images/), ImagesSkipped those that were not
	// (each listed among the failures with the reason). ImagesFrom, when
	// not 0, is the position of the first entry whose images may not be
	// stored yet: they are stored after their batch is written, and again
	// from there when the job resumes.
	Images        int `json:"images,omitempty"`
	ImagesSkipped int `json:"images_skipped,omitempty"`
	ImagesFrom    int `json:"images_from,omitempty"`
	// HighlightsCut are the entries imported short of highlights their
	// item had no room for (options.maxItemHighlights), each listed among
	// the failures with how many.
	HighlightsCut int `json:"highlights_cut,omitempty"`
	// StraysCounted: the export's images no item took are counted (with
	// the job's last images, before it ends): a job that runs again
	// after a stop does not count them twice.
	StraysCounted bool            `json:"strays_counted,omitempty"`
	Failures      []ImportFailure `json:"failures,omitempty"`
	// ItemsPerSecond is the recent rate, for the estimate of the time left.
	ItemsPerSecond float64    `json:"items_per_second,omitempty"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	FinishedAt     *time.Time `json:"finished_at,omitempty"`
}

// ImportFailure is an entry that was not imported, and why.
type ImportFailure struct {
	Ref    string `json:"ref"`
	Reason string `json:"reason"`
}

// Finished reports whether the job has ended.
func (j *ImportJob) Finished() bool { return j.State == ImportDone || j.State == ImportFailed }

// Left is the estimated time to finish, 0 when unknown.
func (j *ImportJob) Left() time.Duration {
	if j.Finished() || j.ItemsPerSecond <= 0 || j.Total <= j.Position {
		return 0
	}
	return time.Duration(float64(j.Total-j.Position) / j.ItemsPerSecond * float64(time.Second))
}

// CreateImportJob records a new queued job for a file already staged and
// checked. A member may have MaxUnfinishedImports at once; older finished
// jobs past MaxImportJobs are dropped (their files are gone already).
func (s Store) CreateImportJob(ctx context.Context, j *ImportJob) (*ImportJob, error) {
	if j.MemberID == "" || j.Staged == "" {
		return nil, storage.Invalid("an import job needs a member and a staged file")
	}
	out := *j
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		if err := tx.GuardCount(j.MemberID, "import"); err != nil {
			return err
		}
		jobs, err := importJobs(tx, j.MemberID)
		if err != nil {
			return err
		}
		unfinished := 0
		for _, o := range jobs {
			if !o.Finished() {
				unfinished++
			}
		}
		if unfinished >= MaxUnfinishedImports {
			return storage.Invalid("%d imports are still running; wait for one to finish", unfinished)
		}
		for i := MaxImportJobs - 1; i < len(jobs); i++ {
			if jobs[i].Finished() {
				if err := tx.Delete(importJobKey(j.MemberID, jobs[i].ID)); err != nil {
					return err
				}
			}
		}
		t := storage.Now()
		id, err := tx.FreshID(func(id string) []byte { return importJobKey(j.MemberID, id) })
		if err != nil {
			return err
		}
		out.ID, out.State, out.CreatedAt, out.UpdatedAt = id, ImportQueued, t, t
		return tx.PutJSON(importJobKey(j.MemberID, out.ID), &out, 0)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// importStagedFiles returns the staged files of memberID's unfinished jobs.
func importStagedFiles(tx *storage.Tx, memberID string) ([]string, error) {
	jobs, err := importJobs(tx, memberID)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, j := range jobs {
		if !j.Finished() && j.Staged != "" {
			out = append(out, j.Staged)
		}
	}
	return out, nil
}

// removeStagedFiles removes the staged files of jobs that are gone.
func removeStagedFiles(paths []string) {
	for _, p := range paths {
		_ = os.Remove(p)
	}
}

// importJobs lists a member's jobs, newest first.
func importJobs(tx *storage.Tx, memberID string) ([]*ImportJob, error) {
	var out []*ImportJob
	err := tx.Scan(storage.Key("import", memberID, ""), nil, false, false, func(_, v []byte) (bool, error) {
		var j ImportJob
		if err := json.Unmarshal(v, &j); err != nil {
			return false, err
		}
		out = append(out, &j)
		return true, nil
	})
	sort.SliceStable(out, func(a, b int) bool { return idBytes(out[a].ID) > idBytes(out[b].ID) })
	return out, err
}

// ImportJobs lists the member's import jobs, newest first.
func (s Store) ImportJobs(ctx context.Context, memberID string) (out []*ImportJob, err error) {
	err = s.st.View(ctx, func(tx *storage.Tx) error { out, err = importJobs(tx, memberID); return err })
	return out, err
}

// ImportJob returns one of the member's import jobs.
func (s Store) ImportJob(ctx context.Context, memberID, id string) (*ImportJob, error) {
	var j ImportJob
	err := s.st.View(ctx, func(tx *storage.Tx) error { return tx.GetJSON(importJobKey(memberID, id), &j) })
	if err != nil {
		return nil, err
	}
	return &j, nil
}

// UnfinishedImportJobs lists every member's queued and running jobs,
// oldest first.
func (s Store) UnfinishedImportJobs(ctx context.Context) ([]*ImportJob, error) {
	var out []*ImportJob
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		return tx.Scan(storage.Key("import", ""), nil, false, false, func(_, v []byte) (bool, error) {
			var j ImportJob
			if err := json.Unmarshal(v, &j); err != nil {
				return false, err
			}
			if !j.Finished() {
				out = append(out, &j)
			}
			return true, nil
		})
	})
	sort.SliceStable(out, func(a, b int) bool { return idBytes(out[a].ID) < idBytes(out[b].ID) })
	return out, err
}

// UpdateImportJob writes the job's state, error and rate (not its
// progress, which ImportItems writes). storage.ErrNotFound if the job is gone (its
// member was deleted).
func (s Store) UpdateImportJob(ctx context.Context, memberID, id string, fn func(j *ImportJob)) (*ImportJob, error) {
	var out ImportJob
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		if err := tx.GetJSON(importJobKey(memberID, id), &out); err != nil {
			return err
		}
		fn(&out)
		out.UpdatedAt = storage.Now()
		if out.Finished() && out.FinishedAt == nil {
			t := out.UpdatedAt
			out.FinishedAt = &t
		}
		return tx.PutJSON(importJobKey(memberID, id), &out, 0)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Claims of import jobs, so that one node of several carries out each job
// and another takes it over when that node stops:
//
//	impclaim/<job id>   the holder's name, with a TTL renewed while it runs

func importClaimKey(jobID string) []byte { return storage.Key("impclaim", jobID) }

// ClaimImportJob takes (or renews) the claim of holder on job jobID for ttl
// and reports whether holder has it: false while another holder's claim
// lasts.
func (s Store) ClaimImportJob(ctx context.Context, jobID, holder string, ttl time.Duration) (bool, error) {
	ok := false
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		ok = false
		b, err := tx.Get(importClaimKey(jobID))
		switch {
		case err == nil && string(b) != holder:
			return nil
		case err != nil && !errors.Is(err, storage.ErrNotFound):
			return err
		}
		ok = true
		return tx.Put(importClaimKey(jobID), []byte(holder), ttl)
	})
	return ok, err
}

// ReleaseImportJob drops holder's claim on job jobID (another holder's
// stays).
func (s Store) ReleaseImportJob(ctx context.Context, jobID, holder string) error {
	return s.st.Update(ctx, func(tx *storage.Tx) error {
		b, err := tx.Get(importClaimKey(jobID))
		if errors.Is(err, storage.ErrNotFound) || (err == nil && string(b) != holder) {
			return nil
		}
		if err != nil {
			return err
		}
		return tx.Delete(importClaimKey(jobID))
	})
}
