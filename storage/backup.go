package storage

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/kv"
)

// A backup is the engine-neutral stream of storage/kv (kv.WriteStream:
// format 3, Hearth's records in frames, an end record and a SHA-256
// checksum), the same from either engine; backups of formats 1 and 2
// (Badger's backup frames, written by earlier versions) still restore
// (kv.SpoolStream). A restore reads the whole input into a spool next to
// the store and checks it before anything is loaded, so a foreign,
// truncated or damaged file is refused (ErrNotBackup) before any change.

// ErrNotBackup is returned by Restore and Replace for input that is not a
// complete, intact backup written by Backup.
var ErrNotBackup = kv.ErrNotStream

// restoreCtx is the context of a backup's and a restore's engine calls.
// It is never cancelled: Close waits for them (the gate) rather than cut
// a restore short halfway.
var restoreCtx = context.Background()

// Backup writes a full backup of the database to w: one consistent
// snapshot (the store keeps serving), without deleted or expired records.
func (s *Store) Backup(w io.Writer) error {
	if err := s.enter(false); err != nil {
		return err
	}
	defer s.leave(false)
	return kv.WriteStream(restoreCtx, w, s.eng)
}

// spoolBackup checks the backup read from r whole, in a spool file next to
// the store (kv.SpoolStream), before anything is loaded from it.
func (s *Store) spoolBackup(r io.Reader) (*kv.Spool, error) {
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return kv.SpoolStream(r, dir)
}

// ErrRestoreRunning is returned by Replace while another Replace runs.
var ErrRestoreRunning = errors.New("another restore is running")

// loadBackup loads the backup read from r into a new directory next to dir
// and returns the store open there. Input that is not a complete backup, or
// one without any record, fails with ErrNotBackup (wrapped) and leaves no
// directory behind.
func loadBackup(dir string, r io.Reader, opts Options) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".restoring-*")
	if err != nil {
		return nil, err
	}
	fresh, err := Open(tmp, opts)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	err = fresh.Restore(r)
	if err == nil {
		var had bool
		if had, err = fresh.hasRecords(restoreCtx); err == nil && !had {
			err = fmt.Errorf("%w: it holds no records", ErrNotBackup)
		}
	}
	if err != nil {
		fresh.Close()
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("load backup: %w", err)
	}
	return fresh, nil
}

// Replace makes the running store hold exactly the records of the backup
// read from r (caddy hearth restore while Caddy runs); one at a time
// (ErrRestoreRunning otherwise). The backup is checked whole first
// (kv.SpoolStream), so input that is not a complete, intact backup changes
// nothing. Then writes are refused (ErrRestoring) and the running ones
// awaited, and the current records are saved to a backup file next to the
// store (returned as previous, when there were any) before the store is
// brought to the backup's records. An engine shared by several nodes
// (kv.Replacer: PostgreSQL) replaces the records in one transaction that
// first saves the current ones (replaceAll); another engine (Badger) saves
// them, then imports (importReplacing), and should that fail, brings the
// store back to the saved records the same way; the error then says
// whether that worked. Reads go on throughout and may see a mix of old and
// restored records while the records are written.
func (s *Store) Replace(r io.Reader) (previous string, err error) {
	if !s.replacing.TryLock() {
		return "", ErrRestoreRunning
	}
	defer s.replacing.Unlock()
	// Keeps Close waiting until the restore has ended.
	if err := s.enter(false); err != nil {
		return "", err
	}
	defer s.leave(false)
	sp, err := s.spoolBackup(r)
	if err != nil {
		return "", fmt.Errorf("load backup: %w", err)
	}
	defer sp.Close()
	next, err := sp.Records()
	if err != nil {
		return "", fmt.Errorf("load backup: %w", err)
	}
	first, err := next()
	if errors.Is(err, io.EOF) {
		return "", fmt.Errorf("load backup: %w: it holds no records", ErrNotBackup)
	}
	if err != nil {
		return "", fmt.Errorf("load backup: %w", err)
	}
	if rp, ok := s.eng.(kv.Replacer); ok {
		previous, err = s.replaceAll(rp, sp)
	} else {
		previous, err = s.importReplacing(first, next)
	}
	if err != nil {
		return previous, err
	}
	// A backup of an earlier version holds records written the old way
	// (writes are admitted again).
	return previous, s.migrate()
}

// replaceAllAttempts bounds the runs of a restore that writes on other
// nodes made conflict.
const replaceAllAttempts = 3

// replaceAll restores the records of sp on an engine several nodes share
// (kv.Replacer): writes on this node are refused meanwhile (ErrRestoring),
// the engine's transaction is exclusive among the nodes (ErrRestoreRunning),
// and the records it saves to the previous file and those it replaces are
// one snapshot, so a write acknowledged on any node is in the previous
// file or still in the store afterwards; a conflicting one makes the
// transaction fail and run again, changing nothing. Its commit tells every
// node to drop its cached records.
func (s *Store) replaceAll(rp kv.Replacer, sp *kv.Spool) (previous string, err error) {
	s.startRestoring()
	defer s.stopRestoring()
	defer s.caches.drop(nil) // after the commit or not: dropping is safe
	for attempt := 1; ; attempt++ {
		previous, err = s.replaceAllOnce(rp, sp)
		switch {
		case err == nil:
			return previous, nil
		case errors.Is(err, kv.ErrReplaceRunning):
			return "", ErrRestoreRunning
		case errors.Is(err, kv.ErrConflict) && attempt < replaceAllAttempts:
			continue
		case errors.Is(err, kv.ErrConflict):
			return "", fmt.Errorf("restore failed: writes on other nodes conflicted with it %d times; the store holds its earlier records again: %w", attempt, err)
		case errors.Is(err, kv.ErrUnavailable) && previous == "":
			return "", fmt.Errorf("restore failed: %w", s.engineErr(err))
		case errors.Is(err, kv.ErrUnavailable):
			// The commit's outcome may be unknown: keep the saved records.
			return previous, fmt.Errorf("restore failed: the database went away; the store holds either its earlier records (saved in %q) or the backup's: %w", previous, s.engineErr(err))
		}
		return "", fmt.Errorf("restore failed; the store holds its earlier records again (the import is one transaction): %w", err)
	}
}

// replaceAllOnce runs rp.ReplaceAll once, saving the current records to a
// new file next to the store (previous; "" when there were none). The file
// is removed when the replace failed, except for kv.ErrUnavailable.
func (s *Store) replaceAllOnce(rp kv.Replacer, sp *kv.Spool) (previous string, err error) {
	next, err := sp.Records()
	if err != nil {
		return "", err
	}
	f, err := s.createBeforeRestore()
	if err != nil {
		return "", err
	}
	saved := 0
	defer func() {
		f.Close()
		if saved == 0 || err != nil && !errors.Is(err, kv.ErrUnavailable) {
			os.Remove(f.Name())
			previous = ""
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	sw, err := kv.NewStreamWriter(bw)
	if err != nil {
		return "", err
	}
	n := 0
	err = rp.ReplaceAll(restoreCtx, kv.Replacement{
		Save: func(r kv.Record) error {
			saved++
			return sw.Add(r)
		},
		Saved: func() error {
			if err := sw.Close(); err != nil {
				return err
			}
			if err := bw.Flush(); err != nil {
				return err
			}
			if err := f.Sync(); err != nil {
				return err
			}
			return fsyncPath(filepath.Dir(s.path))
		},
		Next: func() (kv.Record, error) {
			rec, err := next()
			if err != nil {
				return rec, err
			}
			if n++; s.restoreHook != nil {
				if err := s.restoreHook(n); err != nil {
					return kv.Record{}, err
				}
			}
			return rec, nil
		},
		Notes: []kv.Note{{Channel: cacheChannel, Payload: s.node + "\n" + cacheDropAll}},
	})
	return f.Name(), err
}

// importReplacing refuses writes, backs the current records up to a file,
// and imports first and what next yields in place of every record. Should
// the import fail, the saved records are imported back the same way.
func (s *Store) importReplacing(first kv.Record, next func() (kv.Record, error)) (previous string, err error) {
	s.startRestoring()
	defer s.stopRestoring()
	had, err := s.hasRecords(restoreCtx)
	if err != nil {
		return "", err
	}
	if had {
		if previous, err = s.backupToNewFile(); err != nil {
			return "", fmt.Errorf("back up the current records first: %w", err)
		}
	}
	// From here the store changes. Whatever happens, cached records are
	// dropped and what was written reaches the disk.
	defer func() {
		s.caches.drop(nil)
		if serr := s.syncEngine(); err == nil && serr != nil {
			err = serr
		}
	}()
	pending, n := &first, 0
	err = s.eng.Import(restoreCtx, func() (kv.Record, error) {
		rec, err := first, error(nil)
		if pending != nil {
			pending = nil
		} else if rec, err = next(); err != nil {
			return rec, err
		}
		if n++; s.restoreHook != nil {
			if err := s.restoreHook(n); err != nil {
				return kv.Record{}, err
			}
		}
		return rec, nil
	}, kv.ImportReplace)
	if err == nil {
		return previous, nil
	}
	if rerr := s.rollBack(previous); rerr != nil {
		return previous, fmt.Errorf("restore failed (%v) and so did putting the earlier records back: the store may hold a mix; the earlier records are in %q: %w", err, previous, rerr)
	}
	return previous, fmt.Errorf("restore failed; the store holds its earlier records again: %w", err)
}

// rollBack brings the store back to the records of the backup file
// previous, or to no records when previous is empty.
func (s *Store) rollBack(previous string) error {
	next := func() (kv.Record, error) { return kv.Record{}, io.EOF }
	if previous != "" {
		f, err := os.Open(previous)
		if err != nil {
			return err
		}
		defer f.Close()
		sp, err := s.spoolBackup(f)
		if err != nil {
			return err
		}
		defer sp.Close()
		if next, err = sp.Records(); err != nil {
			return err
		}
	}
	return s.eng.Import(restoreCtx, next, kv.ImportReplace)
}

// createBeforeRestore creates a new file
// <store>.before-restore-<time>-<random>.backup next to the store.
func (s *Store) createBeforeRestore() (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return nil, err
	}
	return os.CreateTemp(filepath.Dir(s.path),
		filepath.Base(s.path)+".before-restore-"+time.Now().UTC().Format("20060102T150405Z")+"-*.backup")
}

// backupToNewFile writes a backup of the store to a new file
// <store>.before-restore-<time>-<random>.backup next to it, synced, and
// returns its path.
func (s *Store) backupToNewFile() (path string, err error) {
	f, err := s.createBeforeRestore()
	if err != nil {
		return "", err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(f.Name())
			path = ""
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	if err := s.Backup(w); err != nil {
		return "", err
	}
	if err := w.Flush(); err != nil {
		return "", err
	}
	if err := f.Sync(); err != nil {
		return "", err
	}
	return f.Name(), fsyncPath(filepath.Dir(s.path))
}

// fsyncPath flushes a file or directory, data and metadata, to disk.
func fsyncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
