package importer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// RunnerOptions configure a Runner.
type RunnerOptions struct {
	// Dir holds the staged uploads (created 0700 as needed).
	Dir    string
	Limits Limits
	// Sanitize cleans imported HTML the way saved articles are cleaned;
	// HTMLText is the readable text of HTML. Both are required.
	Sanitize func(string) string
	HTMLText func(string) string
	// The images an export carries (Hearth's) are stored as the site's
	// fetches store theirs: at most ImageMaxBytes each (the fetcher's size
	// limit), within the member's ImageQuota (0: none are stored), and
	// ContentImages (the fetch queue's list of the images an item's HTML
	// names) pairs an export's images with its items' when the export does
	// not say which is which.
	ImageMaxBytes int64
	ImageQuota    int64
	ContentImages func(html, base string) []string
	// NoFetch leaves content-less items without content instead of
	// queueing a fetch of their page; FetchPrivate lets such fetches
	// reach private addresses (the site's fetch policy).
	NoFetch      bool
	FetchPrivate bool
	// FetchQueued is called after a batch queued fetches.
	FetchQueued func()
	// Node names this node among several on one store (default: the
	// host name): a job whose staged file is missing here is another
	// node's when it names another node, and is left to it.
	Node   string
	Logger *zap.Logger
	// Kick, when set, is the channel (capacity 1) that tells of a waiting
	// job: the runners of one store share it, so a job started through
	// one is begun at once by whichever of them works (default: the
	// runner's own).
	Kick chan struct{}
}

// Batches: a transaction takes this many entries, or fewer once their
// content reaches batchBytes.
const (
	batchEntries = 200
	batchBytes   = 1 << 20
	pollEvery    = 5 * time.Second // unfinished jobs are looked for again
	// claimTTL is how long a job's claim lasts unrenewed: a node that
	// stops (or loses the database) leaves its job to another after it.
	// The claim is renewed every claimTTL/3.
	claimTTL = 30 * time.Second
)

// Runner carries out import jobs in the background, one at a time, and
// resumes after a restart the jobs left unfinished.
type Runner struct {
	store *storage.Store
	opts  RunnerOptions
	log   *zap.Logger
	kick  chan struct{}

	startOnce sync.Once
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup

	// holder names this runner in the jobs' claims.
	holder string
	// ran counts the jobs this runner carried out, passes its looks for
	// unfinished jobs (tests).
	ran, passes atomic.Int64
	// refusedLogged is when a refusal of the store was last logged
	// (storeRefused; Unix ns).
	refusedLogged atomic.Int64
}

// storeRefused reports whether err is the store's refusal for now (a full
// disk, a restore): the job waits where it stopped and goes on by itself
// once the store takes writes again (the runner looks for unfinished jobs
// every pollEvery). Such refusals are logged once a minute at most, not at
// every look while the disk stays full.
func (r *Runner) storeRefused(j *library.ImportJob, err error) bool {
	if _, _, ok := storage.Unavailable(err); !ok {
		return false
	}
	now := time.Now().UnixNano()
	if last := r.refusedLogged.Load(); now-last >= int64(time.Minute) && r.refusedLogged.CompareAndSwap(last, now) {
		r.log.Warn("imports wait: the store refuses writes; they go on by themselves where they stopped once it takes them again",
			zap.String("job", j.ID), zap.Error(err))
	}
	return true
}

// NewRunner returns a runner for store; Run starts it.
func NewRunner(store *storage.Store, opts RunnerOptions) *Runner {
	opts.Limits = opts.Limits.WithDefaults()
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Node == "" {
		opts.Node, _ = os.Hostname()
	}
	var b [9]byte
	_, _ = rand.Read(b[:])
	if opts.Kick == nil {
		opts.Kick = make(chan struct{}, 1)
	}
	r := &Runner{store: store, opts: opts, log: opts.Logger, kick: opts.Kick, holder: opts.Node + "/" + hex.EncodeToString(b[:])}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r
}

// Limits are the runner's limits, defaults filled in.
func (r *Runner) Limits() Limits { return r.opts.Limits }

// Stage writes an upload to the staging directory, refusing it (a
// *FileError, the staged part removed) past MaxUploadBytes. The caller
// passes the path to Start, or removes it.
func (r *Runner) Stage(body io.Reader) (string, error) {
	if err := os.MkdirAll(r.opts.Dir, 0o700); err != nil {
		return "", fmt.Errorf("create import directory: %w", err)
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	p := filepath.Join(r.opts.Dir, "upload-"+hex.EncodeToString(b[:]))
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return "", fmt.Errorf("stage upload: %w", err)
	}
	n, err := io.Copy(f, io.LimitReader(body, r.opts.Limits.MaxUploadBytes+1))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > r.opts.Limits.MaxUploadBytes {
		err = refuse("the file is larger than %d bytes (the import limit)", r.opts.Limits.MaxUploadBytes)
	}
	if err != nil {
		os.Remove(p)
		return "", err
	}
	return p, nil
}

// Start checks a staged file (see Scan) and records the import job; the
// runner then carries it out. On any error the staged file is removed and
// nothing is written.
func (r *Runner) Start(ctx context.Context, memberID, staged, fileName string, format Format, labelIDs []string) (*library.ImportJob, error) {
	got, total, err := Scan(staged, format, r.opts.Limits)
	if err != nil {
		os.Remove(staged)
		return nil, err
	}
	j, err := library.Of(r.store).CreateImportJob(ctx, &library.ImportJob{
		MemberID: memberID, Format: string(got), FileName: clipString(filepath.Base(fileName), 200), Staged: staged,
		LabelIDs: labelIDs, FetchPrivate: r.opts.FetchPrivate, Total: total, Node: r.opts.Node,
	})
	if err != nil {
		os.Remove(staged)
		return nil, err
	}
	r.Kick()
	return j, nil
}

// Kick tells the runner a job is waiting.
func (r *Runner) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run starts the background work (once): the jobs left unfinished first.
func (r *Runner) Run() {
	r.startOnce.Do(func() {
		r.wg.Add(1)
		go r.loop(r.ctx)
	})
}

// Work carries out jobs, the unfinished ones first, in the caller until
// ctx ends or Close: the store's worker runs it (it stops and starts it
// again around a restore). A job cut short is resumed by the next run on
// the store.
func (r *Runner) Work(ctx context.Context) {
	if r.ctx.Err() != nil {
		return // closed
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(r.ctx, cancel)()
	r.wg.Add(1)
	r.loop(ctx)
}

// Close stops the runner and waits for it; a job cut short is resumed by
// the next runner on the store.
func (r *Runner) Close() {
	r.startOnce.Do(func() {})
	r.cancel()
	r.wg.Wait()
}

// claims are the jobs a runner of this process is carrying out: two
// handlers on one store (two sites, a reload) never run one job twice.
var claims sync.Map // job id -> struct{}

func (r *Runner) loop(ctx context.Context) {
	defer r.wg.Done()
	r.removeOrphans(ctx)
	swept := time.Now()
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		if time.Since(swept) > time.Hour {
			r.removeOrphans(ctx) // files of jobs gone with their member
			swept = time.Now()
		}
		jobs, err := library.Of(r.store).UnfinishedImportJobs(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.Error("list unfinished imports", zap.Error(err))
		}
		for _, j := range jobs {
			if ctx.Err() != nil {
				return
			}
			if _, taken := claims.LoadOrStore(j.ID, struct{}{}); taken {
				continue
			}
			r.claimAndRun(ctx, j)
			claims.Delete(j.ID)
		}
		r.passes.Add(1)
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		case <-t.C:
		}
	}
}

// claimAndRun carries out j if this runner can claim it among the nodes
// of the store: its file is here (or it names no other node, so a missing
// file fails it as before), and no other node's claim lasts. The claim is
// renewed while the job runs; when a renewal fails the job stops where it
// is, to be resumed by whoever claims it next (its batches are written
// with the job's position, so none is taken twice).
func (r *Runner) claimAndRun(run context.Context, j *library.ImportJob) {
	if j.Node != "" && j.Node != r.opts.Node {
		if _, err := os.Stat(j.Staged); err != nil {
			return // another node's file: that node runs it
		}
	}
	ok, err := library.Of(r.store).ClaimImportJob(run, j.ID, r.holder, claimTTL)
	if ok && errors.Is(err, storage.ErrNotSynced) {
		// Claimed, but the disk failed a sync, maybe of this job's batches
		// written without waiting for it.
		r.log.Error("import not synced to disk", zap.String("job", j.ID), zap.Error(err))
		r.finish(run, j, library.ImportFailed, notSynced)
		return
	}
	if err != nil {
		if run.Err() == nil && !r.storeRefused(j, err) {
			r.log.Warn("claim an import", zap.String("job", j.ID), zap.Error(err))
		}
		return
	}
	if !ok {
		return // another node runs it
	}
	// The job as it is now: the list it came from may be older than the
	// end of a run of it by another runner (two sites on one store) that
	// released its claim since; such a job is not run again.
	cur, err := library.Of(r.store).ImportJob(run, j.MemberID, j.ID)
	if err != nil || cur.Finished() {
		if err != nil && !errors.Is(err, storage.ErrNotFound) && run.Err() == nil {
			r.log.Warn("read a claimed import", zap.String("job", j.ID), zap.Error(err))
		}
		r.release(run, j)
		return
	}
	j = cur
	ctx, cancel := context.WithCancel(run)
	renewed := make(chan struct{})
	var unsynced atomic.Bool // a renewal heard that the disk failed a sync
	go func() {
		defer close(renewed)
		t := time.NewTicker(claimTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			ok, err := library.Of(r.store).ClaimImportJob(ctx, j.ID, r.holder, claimTTL)
			if ok && errors.Is(err, storage.ErrNotSynced) {
				r.log.Error("import not synced to disk", zap.String("job", j.ID), zap.Error(err))
				unsynced.Store(true)
				cancel()
				return
			}
			if err != nil || !ok {
				if !r.storeRefused(j, err) {
					r.log.Warn("an import's claim was lost; leaving it to another node", zap.String("job", j.ID), zap.Error(err))
				}
				cancel()
				return
			}
		}
	}()
	r.ran.Add(1)
	beginImportMemory()
	r.runJob(ctx, run, j)
	// The import's memory limit outlasts the job while the search indexer
	// catches up with the texts it wrote (memlimit.go), without holding up
	// the next job.
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer endImportMemory()
		r.awaitIndexed(run, j.MemberID)
	}()
	cancel()
	<-renewed
	if unsynced.Load() {
		r.finish(run, j, library.ImportFailed, notSynced)
	}
	// Released even when the run was stopped (a reload, Close): the next
	// runner on the store resumes the job at once rather than once the
	// claim lapses.
	r.release(run, j)
}

// release drops this runner's claim on j.
func (r *Runner) release(run context.Context, j *library.ImportJob) {
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(run), claimTTL/3)
	defer rcancel()
	if err := library.Of(r.store).ReleaseImportJob(rctx, j.ID, r.holder); err != nil && run.Err() == nil {
		r.log.Debug("release an import's claim", zap.String("job", j.ID), zap.Error(err))
	}
}

// removeOrphans removes staged files no unfinished job names (an upload
// cut short by a crash, the file of a member deleted meanwhile), once they
// are an hour old.
func (r *Runner) removeOrphans(ctx context.Context) {
	entries, err := os.ReadDir(r.opts.Dir)
	if err != nil {
		return
	}
	jobs, err := library.Of(r.store).UnfinishedImportJobs(ctx)
	if err != nil {
		return
	}
	keep := map[string]bool{}
	for _, j := range jobs {
		keep[j.Staged] = true
	}
	for _, e := range entries {
		p := filepath.Join(r.opts.Dir, e.Name())
		if info, err := e.Info(); err == nil && !keep[p] && time.Since(info.ModTime()) > time.Hour {
			os.Remove(p)
		}
	}
}

func (r *Runner) finish(run context.Context, j *library.ImportJob, state, msg string) {
	end := func(state, msg string) error {
		_, err := library.Of(r.store).UpdateImportJob(run, j.MemberID, j.ID, func(x *library.ImportJob) { x.State, x.Error, x.ItemsPerSecond = state, msg, 0 })
		return err
	}
	err := end(state, msg)
	if errors.Is(err, storage.ErrNotSynced) {
		// This end may not be on disk: the job fails, and says so.
		// Importing the file again adds what a power loss took and
		// nothing else.
		r.log.Error("import not synced to disk", zap.String("job", j.ID), zap.Error(err))
		if state != library.ImportFailed {
			state = library.ImportFailed
			err = end(state, notSynced)
		}
		if errors.Is(err, storage.ErrNotSynced) {
			err = nil // the failure is written and shown; the disk is still failing
		}
	}
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		if run.Err() == nil { // else stopped (Close): nothing failed
			r.log.Error("finish import", zap.String("job", j.ID), zap.Error(err))
		}
		return // stays unfinished: tried again
	}
	os.Remove(j.Staged)
	r.log.Info("import finished", zap.String("job", j.ID), zap.String("state", state))
}

// notSynced is a job's error when the store could not bring its items to
// disk.
const notSynced = "the server could not write the imported items to its disk (see its log): they may be lost if the server stops; import the file again once the disk is fixed"

// runJob reads j's file from the entry after j.Position and writes its
// items in batches; stopped by Close, it leaves the job to be resumed. run
// is the runner's run (ctx, the job's, also ends when its claim is lost).
func (r *Runner) runJob(ctx, run context.Context, j *library.ImportJob) {
	rd, err := Open(j.Staged, Format(j.Format), r.opts.Limits)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			r.finish(run, j, library.ImportFailed, "the uploaded file is gone (the server's import directory was emptied); upload it again")
			return
		}
		if IsFileError(err) {
			r.finish(run, j, library.ImportFailed, err.Error())
			return
		}
		r.log.Error("open import", zap.String("job", j.ID), zap.Error(err))
		return
	}
	defer rd.Close()
	// Before the first commit: the batches are committed without waiting
	// for the disk, and a sync of them that fails fails no commit.
	failedSyncs := r.store.FailedSyncs()
	colors, ok := r.exportLabels(ctx, rd, j)
	if !ok {
		return
	}
	start, startPos := time.Now(), j.Position
	var batch []library.ImportEntry
	var images []itemImages // of the batch's items (and, resumed, of those whose images may be missing)
	size := 0
	flush := func(pos int) bool {
		if len(batch) == 0 {
			return len(images) == 0 || r.storeImages(ctx, rd, j, &images)
		}
		rate := 0.0
		if el := time.Since(start).Seconds(); el > 0 {
			rate = float64(pos-startPos) / el
		}
		got, err := library.Of(r.store).ImportItems(ctx, j.MemberID, j.ID, batch, colors, rate)
		if err != nil {
			if !errors.Is(err, storage.ErrNotFound) && !storage.IsInvalid(err) && ctx.Err() == nil && !r.storeRefused(j, err) {
				r.log.Error("import batch", zap.String("job", j.ID), zap.Error(err))
			}
			return false // tried again from the job's position
		}
		adjustImportMemory()
		if got.Fetching > 0 && r.opts.FetchQueued != nil {
			r.opts.FetchQueued()
		}
		batch, size = batch[:0], 0
		return len(images) == 0 || r.storeImages(ctx, rd, j, &images)
	}
	pos := 0
	for {
		if ctx.Err() != nil {
			return
		}
		it, err := rd.Next()
		if err == io.EOF {
			break
		}
		pos++
		var ee *EntryError
		switch {
		case errors.As(err, &ee):
			if pos > j.Position {
				batch = append(batch, library.ImportEntry{Pos: pos, Ref: ee.Ref, Failure: ee.Reason})
			}
		case err != nil:
			if !flush(pos - 1) {
				return
			}
			if IsFileError(err) {
				r.finish(run, j, library.ImportFailed, err.Error())
			} else {
				r.log.Error("read import", zap.String("job", j.ID), zap.Error(err))
				r.finish(run, j, library.ImportFailed, "the file could not be read to its end")
			}
			return
		case pos > j.Position:
			in := r.item(it)
			batch = append(batch, library.ImportEntry{Pos: pos, Ref: it.Ref, Item: in})
			size += len(in.HTML) + len(in.Text) + 512
			if len(it.Images) > 0 {
				images = append(images, itemImages{in: in, files: it.Images})
			}
		case len(it.Images) > 0 && j.ImagesFrom > 0 && pos >= j.ImagesFrom:
			// Written before a restart, its images maybe not: stored
			// again (those stored are found by their address).
			images = append(images, itemImages{in: r.item(it), files: it.Images})
		}
		if len(batch) >= batchEntries || size >= batchBytes {
			if !flush(pos) {
				return
			}
		}
	}
	if !flush(pos) || !r.strayImages(ctx, rd, j) {
		return
	}
	// The batches were committed without waiting for the disk: the job
	// ends as done once they are on it, else as failed, also when a sync
	// that ran while they were written failed (counted, whichever other
	// import's end saw it first).
	err = r.store.Sync()
	if n := r.store.FailedSyncs(); err == nil && n != failedSyncs {
		err = fmt.Errorf("%w: syncs of the store's logs failed during the import (%d; see the log)", storage.ErrNotSynced, n-failedSyncs)
	}
	if err != nil {
		if errors.Is(err, storage.ErrNotSynced) {
			r.log.Error("import not synced to disk", zap.String("job", j.ID), zap.Error(err))
			r.finish(run, j, library.ImportFailed, notSynced)
		} else if ctx.Err() == nil {
			r.log.Error("sync import", zap.String("job", j.ID), zap.Error(err))
		}
		return
	}
	r.finish(run, j, library.ImportDone, "")
}

// exportLabels creates the labels an export lists (LabelLister) first, in
// its order, also those no item carries (again after a restart: only what
// is missing), and returns their colors by name. false: they could not be
// written, and the job stops here (to be resumed, or its member is gone).
func (r *Runner) exportLabels(ctx context.Context, rd Reader, j *library.ImportJob) (map[string]string, bool) {
	ll, ok := rd.(LabelLister)
	if !ok {
		return nil, true
	}
	var names []string
	colors := map[string]string{}
	for _, l := range ll.ExportLabels() {
		names = append(names, l.Name)
		if l.Color != "" {
			colors[l.Name] = l.Color
		}
	}
	if err := library.Of(r.store).ImportLabels(ctx, j.MemberID, names, colors); err != nil {
		if !errors.Is(err, storage.ErrNotFound) && ctx.Err() == nil {
			r.log.Error("import labels", zap.String("job", j.ID), zap.Error(err))
		}
		return nil, false
	}
	return colors, true
}

// item turns an export's item into what the store takes: HTML sanitised,
// text derived where missing, quotes placed in the content.
func (r *Runner) item(it *Item) *library.ImportItem {
	in := &library.ImportItem{
		Type: it.Type, URL: it.URL, Title: it.Title, Description: it.Description, Author: it.Author, LeadImage: it.LeadImage,
		CreatedAt: it.SavedAt, UpdatedAt: it.UpdatedAt, ReadAt: it.ReadAt, Status: it.Status, ReadingProgress: it.ReadingProgress,
		WordCount: it.WordCount, Labels: it.Labels, Text: strings.TrimSpace(it.Text), ByTitle: it.ByTitle,
	}
	if strings.TrimSpace(it.HTML) != "" {
		in.HTML = r.opts.Sanitize(it.HTML)
		if in.Text == "" {
			in.Text = r.opts.HTMLText(in.HTML)
		}
	}
	in.Fetch = !r.opts.NoFetch && in.HTML == "" && in.Text == ""
	in.Images = len(it.Images)
	var body *contentText // the content, parsed once for the quotes to place
	budget := placeBudget
	for _, h := range it.Highlights {
		segs := h.Segments
		// Without a quote (a note on the item as a whole, as Hearth's
		// export writes one), nothing is placed: it stays a note.
		if len(segs) == 0 && strings.TrimSpace(h.Quote) != "" {
			if body == nil {
				body = newContentText(contentBody(in.HTML), len(in.HTML))
			}
			segs = body.placeQuote(h.Quote, &budget)
		}
		in.Highlights = append(in.Highlights, library.ImportHighlight{Segments: segs, Note: h.Note, CreatedAt: h.CreatedAt, UpdatedAt: h.UpdatedAt})
	}
	return in
}
