package storage

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/pb"
	"google.golang.org/protobuf/proto"

	"github.com/hearthkit/caddy-hearth/storage/kv"
)

// A backup (format 2) is Hearth's header backupMagic, Badger's backup
// stream (frames of an 8-byte little-endian length and a KVList of that
// length), and Hearth's end record: a length of all ones, backupEndMagic,
// the number of stream bytes, and the SHA-256 of everything before the
// checksum. Restore reads the whole file into a spool next to the store
// and checks it before anything is loaded, so a foreign, truncated or
// damaged file is refused (ErrNotBackup) before any change.
//
// Format 1, written before the header and checksum existed, is Badger's
// stream and the end record without the checksum. It is still restored:
// its frames and end record are checked, but a byte changed inside a
// record cannot be detected.
//
// The frames are Badger's, but the records in them are engine-neutral
// (key, value, expiry, user meta): another engine reads the same stream.
const (
	backupMagic       = "HEARTH-BACKUP-2\n"
	backupEndMarker   = ^uint64(0)
	backupEndMagic    = "HEARTH-BACKUP-END"
	backupChecksumLen = sha256.Size
	// maxBackupFrame bounds one frame's length: Badger's stream batches
	// stay near 100 MiB (a soft limit); anything far beyond is not a
	// Hearth backup.
	maxBackupFrame = 1 << 30
)

// ErrNotBackup is returned by Restore for input that is not a complete,
// intact backup written by Backup.
var ErrNotBackup = errors.New("not a complete Hearth backup")

// restoreCtx is the context of a backup's and a restore's engine calls.
// It is never cancelled: Close waits for them (the gate) rather than cut
// a restore short halfway, as it did before the store had a context of
// its own (Store.bg, which Close cancels first).
var restoreCtx = context.Background()

// Backup writes a full backup of the database to w: the header, Badger's
// backup stream of a consistent snapshot (the store keeps serving), then
// the end record with the checksum.
func (s *Store) Backup(w io.Writer) error {
	if err := s.enter(false); err != nil {
		return err
	}
	defer s.leave(false)
	if s.bdb == nil {
		// The same format from the engine's records (storage/kv/stream.go).
		return kv.WriteStream(restoreCtx, w, s.eng)
	}
	h := sha256.New()
	hw := io.MultiWriter(w, h)
	if _, err := io.WriteString(hw, backupMagic); err != nil {
		return err
	}
	cw := &countingWriter{w: hw}
	lw := &liveRecords{w: cw}
	// db.Backup's stream, with frames of about 16 MiB instead of 100
	// (liveRecords holds one whole).
	stream := s.bdb.DB().NewStream()
	stream.LogPrefix = "DB.Backup"
	stream.MaxSize = backupFrameTarget
	if _, err := stream.Backup(lw, 0); err != nil {
		return err
	}
	if len(lw.buf) != 0 {
		return errors.New("backup: badger's stream ended inside a frame")
	}
	end := make([]byte, 0, 8+len(backupEndMagic)+8)
	end = binary.LittleEndian.AppendUint64(end, backupEndMarker)
	end = append(end, backupEndMagic...)
	end = binary.LittleEndian.AppendUint64(end, uint64(cw.n))
	if _, err := hw.Write(end); err != nil {
		return err
	}
	_, err := w.Write(h.Sum(nil))
	return err
}

// liveRecords passes on Badger's backup frames without the delete markers
// and expired records in them. Badger's full backup carries a marker, with
// its key, for each record deleted since the last compaction, and keys
// name what a member saved (a title in an index key, a label's name): a
// backup taken after a member deleted their account kept them. A full
// backup restores into an empty store, where the markers change nothing.
// Each frame (Badger writes its length, then the frame) is held whole.
type liveRecords struct {
	w   io.Writer
	buf []byte
}

// backupFrameTarget is the size at which Backup's stream starts a new
// frame (a soft limit, as Badger's default of 100 MiB).
const backupFrameTarget = 16 << 20

// badgerBitDelete is Badger's meta bit of a delete marker (bitDelete in
// badger/v4 structs.go).
const badgerBitDelete = 1 << 0

func (l *liveRecords) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for len(l.buf) >= 8 {
		n := binary.LittleEndian.Uint64(l.buf)
		if n > maxBackupFrame {
			return 0, fmt.Errorf("backup: a frame of %d bytes", n)
		}
		if uint64(len(l.buf)-8) < n {
			break
		}
		if err := l.frame(l.buf[8 : 8+n]); err != nil {
			return 0, err
		}
		l.buf = append(l.buf[:0], l.buf[8+n:]...)
	}
	return len(p), nil
}

func (l *liveRecords) frame(b []byte) error {
	var list pb.KVList
	if err := proto.Unmarshal(b, &list); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	now := uint64(time.Now().Unix())
	kept := list.Kv[:0]
	for _, kv := range list.Kv {
		if len(kv.Meta) > 0 && kv.Meta[0]&badgerBitDelete != 0 || kv.ExpiresAt != 0 && kv.ExpiresAt <= now {
			continue
		}
		kept = append(kept, kv)
	}
	if len(kept) == 0 {
		return nil
	}
	if len(kept) < len(list.Kv) {
		list.Kv = kept
		var err error
		if b, err = proto.Marshal(&list); err != nil {
			return err
		}
	}
	var hdr [8]byte
	binary.LittleEndian.PutUint64(hdr[:], uint64(len(b)))
	if _, err := l.w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := l.w.Write(b)
	return err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// checkedBackup returns a reader of Badger's stream in r, without Hearth's
// header and end record, that fails (with ErrNotBackup) unless r is a
// complete backup (see copyBackupFrames). A format-2 backup's frames are
// only passed on once the checksum has matched, from a spool file next to
// dir (removed on Close).
func checkedBackup(dir string, r io.Reader) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(spoolBackup(dir, pw, r)) }()
	return pr
}

// spoolBackup checks r and writes its frames to w: at once for format 1,
// after the checksum matched for format 2.
func spoolBackup(dir string, w io.Writer, r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	head, _ := br.Peek(len(backupMagic))
	if string(head) != backupMagic {
		return notABackup(copyBackupFrames(w, br, nil), len(head) == 0)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(dir), filepath.Base(dir)+".restoring-*.spool")
	if err != nil {
		return err
	}
	defer func() {
		f.Close()
		os.Remove(f.Name())
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := copyBackupFrames(bw, br, sha256.New()); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	_, err = io.Copy(w, bufio.NewReaderSize(f, 1<<20))
	return err
}

// notABackup words the refusal of a file without the backup header: most
// such files are not backups at all (someone picked the wrong file), and
// the reason found reading it as a backup from before the header ("ends
// without Hearth's end record") would only puzzle them.
func notABackup(err error, empty bool) error {
	if !errors.Is(err, ErrNotBackup) {
		return err
	}
	if empty {
		return fmt.Errorf("%w: the file is empty", ErrNotBackup)
	}
	detail := strings.TrimPrefix(err.Error(), ErrNotBackup.Error()+": ")
	return fmt.Errorf("%w: this file is not a Hearth backup (a backup made by caddy hearth backup starts with the line %s, this one does not; read as a backup from before that line, %s)",
		ErrNotBackup, strings.TrimSpace(backupMagic), detail)
}

// copyBackupFrames writes the frames of the backup in r to w. With h set,
// r starts with the format-2 header and its end record carries the
// checksum h computes. It fails with ErrNotBackup on input that does not
// start like a backup, a frame longer than maxBackupFrame, a stream that
// ends without the end record or with bytes after it, and a checksum or
// byte count that does not match.
func copyBackupFrames(w io.Writer, r *bufio.Reader, h hash.Hash) error {
	if h != nil {
		head := make([]byte, len(backupMagic))
		if _, err := io.ReadFull(r, head); err != nil {
			return err
		}
		h.Write(head)
	} else if head, _ := r.Peek(8); len(head) == 8 && binary.LittleEndian.Uint64(head) > maxBackupFrame {
		return fmt.Errorf("%w: the file does not start with Hearth's backup header (not a backup, or a damaged one)", ErrNotBackup)
	}
	var streamBytes uint64
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("%w: it ends without Hearth's end record (cut short?)", ErrNotBackup)
			}
			return err
		}
		if h != nil {
			h.Write(hdr[:])
		}
		size := binary.LittleEndian.Uint64(hdr[:])
		if size == backupEndMarker {
			return checkBackupEnd(r, streamBytes, h)
		}
		if size > maxBackupFrame {
			return fmt.Errorf("%w: a frame of %d bytes (damaged?)", ErrNotBackup, size)
		}
		if _, err := w.Write(hdr[:]); err != nil {
			return err
		}
		fw := w
		if h != nil {
			fw = io.MultiWriter(w, h)
		}
		n, err := io.CopyN(fw, r, int64(size))
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: it ends inside a record (cut short?)", ErrNotBackup)
		}
		if err != nil {
			return err
		}
		streamBytes += uint64(len(hdr)) + uint64(n)
	}
}

func checkBackupEnd(r *bufio.Reader, streamBytes uint64, h hash.Hash) error {
	var end [len(backupEndMagic) + 8]byte
	if _, err := io.ReadFull(r, end[:]); err != nil || string(end[:len(backupEndMagic)]) != backupEndMagic {
		return fmt.Errorf("%w: a damaged end record", ErrNotBackup)
	}
	if n := binary.LittleEndian.Uint64(end[len(backupEndMagic):]); n != streamBytes {
		return fmt.Errorf("%w: the end record counts %d bytes, the file has %d", ErrNotBackup, n, streamBytes)
	}
	if h != nil {
		h.Write(end[:])
		var sum [backupChecksumLen]byte
		if _, err := io.ReadFull(r, sum[:]); err != nil {
			return fmt.Errorf("%w: it ends inside the checksum (cut short?)", ErrNotBackup)
		}
		if !hmac.Equal(sum[:], h.Sum(nil)) {
			return fmt.Errorf("%w: the checksum does not match (the file is damaged)", ErrNotBackup)
		}
	}
	if _, err := r.ReadByte(); err != io.EOF {
		return fmt.Errorf("%w: data after the end record", ErrNotBackup)
	}
	return nil
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
// (ErrRestoreRunning otherwise). The backup is checked and loaded into a
// fresh sibling directory first, so input that is not a complete, intact
// backup changes nothing. Then writes are refused (ErrRestoring) and the
// running ones awaited, the current records are written to a backup file
// next to the store (returned as previous, when there were any), and the
// store is brought to the backup's records: keys the backup lacks are
// deleted, the others written with their expiry. Should that fail, the
// store is brought back to the previous records the same way; the error
// then says whether that worked. Reads go on throughout and may see a mix
// of old and restored records while the records are written.
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
	if s.bdb == nil {
		return s.replaceFromStream(r)
	}
	fresh, err := loadBackup(s.path, r, Options{GCInterval: -1, MinFreeBytes: -1})
	if err != nil {
		return "", err
	}
	defer func() {
		fresh.Close()
		os.RemoveAll(fresh.path)
	}()

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
	// dropped and what was written reaches the disk, big values included.
	defer func() {
		s.caches.drop(nil)
		if serr := s.Sync(); err == nil && serr != nil {
			err = serr
		}
	}()
	if err = s.copyRecords(fresh); err == nil {
		return previous, nil
	}
	if rerr := s.rollBack(previous); rerr != nil {
		return previous, fmt.Errorf("restore failed (%v) and so did putting the earlier records back: the store may hold a mix; the earlier records are in %q: %w", err, previous, rerr)
	}
	return previous, fmt.Errorf("restore failed; the store holds its earlier records again: %w", err)
}

// replaceFromStream is Replace for an engine other than Badger: the backup
// is checked whole (kv.SpoolStream) before anything changes. An engine
// shared by several nodes (kv.Replacer: PostgreSQL) replaces the records in
// one transaction that first saves the current ones to the previous file
// (replaceAll); another engine saves them, then imports
// (importReplacing).
func (s *Store) replaceFromStream(r io.Reader) (previous string, err error) {
	sp, err := kv.SpoolStream(r, "")
	if errors.Is(err, kv.ErrNotStream) {
		return "", fmt.Errorf("load backup: %w: %v", ErrNotBackup, err)
	}
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
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(filepath.Dir(s.path),
		filepath.Base(s.path)+".before-restore-"+time.Now().UTC().Format("20060102T150405Z")+"-*.backup")
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
			if n++; copyRecordsHook != nil {
				if err := copyRecordsHook(n); err != nil {
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
// and imports first and what next yields in place of every record.
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
	pending, n := &first, 0
	err = s.eng.Import(restoreCtx, func() (kv.Record, error) {
		rec, err := first, error(nil)
		if pending != nil {
			pending = nil
		} else if rec, err = next(); err != nil {
			return rec, err
		}
		if n++; copyRecordsHook != nil {
			if err := copyRecordsHook(n); err != nil {
				return kv.Record{}, err
			}
		}
		return rec, nil
	}, kv.ImportReplace)
	s.caches.drop(nil)
	if err != nil {
		return previous, fmt.Errorf("restore failed; the store holds its earlier records again (the import is one transaction): %w", err)
	}
	return previous, nil
}

// rollBack brings the store back to the records of the backup file
// previous, or to no records when previous is empty.
func (s *Store) rollBack(previous string) error {
	var src io.Reader = strings.NewReader("")
	if previous != "" {
		f, err := os.Open(previous)
		if err != nil {
			return err
		}
		defer f.Close()
		src = f
	}
	var old *Store
	var err error
	if previous != "" {
		old, err = loadBackup(s.path, src, Options{GCInterval: -1, MinFreeBytes: -1})
	} else {
		old, err = openEmptySibling(s.path)
	}
	if err != nil {
		return err
	}
	defer func() {
		old.Close()
		os.RemoveAll(old.path)
	}()
	return s.copyRecords(old)
}

// openEmptySibling opens an empty store in a new directory next to dir.
func openEmptySibling(dir string) (*Store, error) {
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".restoring-*")
	if err != nil {
		return nil, err
	}
	st, err := Open(tmp, Options{GCInterval: -1, MinFreeBytes: -1})
	if err != nil {
		os.RemoveAll(tmp)
	}
	return st, err
}

// copyRecordsHook, when set (tests), is called with the number of records
// copyRecords (or importReplacing) has written so far, after each; an error
// it returns fails the copy there.
var copyRecordsHook func(n int) error

// copyRecords makes s hold exactly the records of src: keys src lacks are
// deleted, the others written with their expiry and user meta. Writes go
// through write batches, around the gate (a restore refuses writes).
func (s *Store) copyRecords(src *Store) error {
	// Drop what src lacks, then write what it has.
	del := s.bdb.DB().NewWriteBatch()
	defer del.Cancel()
	err := s.bdb.DB().View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		return src.bdb.DB().View(func(ftxn *badger.Txn) error {
			for it.Rewind(); it.Valid(); it.Next() {
				k := it.Item().KeyCopy(nil)
				if _, err := ftxn.Get(k); errors.Is(err, badger.ErrKeyNotFound) {
					if err := del.Delete(k); err != nil {
						return err
					}
				} else if err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err == nil {
		err = del.Flush()
	}
	if err != nil {
		return fmt.Errorf("remove records the backup lacks: %w", err)
	}
	put := s.bdb.DB().NewWriteBatch()
	defer put.Cancel()
	n := 0
	err = src.bdb.DB().View(func(ftxn *badger.Txn) error {
		it := ftxn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			e := badger.NewEntry(item.KeyCopy(nil), v).WithMeta(item.UserMeta())
			e.ExpiresAt = item.ExpiresAt()
			if err := put.SetEntry(e); err != nil {
				return err
			}
			n++
			if copyRecordsHook != nil {
				if err := copyRecordsHook(n); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err == nil {
		err = put.Flush()
	}
	if err != nil {
		return fmt.Errorf("write the backup's records: %w", err)
	}
	return nil
}

// backupToNewFile writes a backup of the store to a new file
// <store>.before-restore-<time>-<random>.backup next to it, synced, and
// returns its path.
func (s *Store) backupToNewFile() (path string, err error) {
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(filepath.Dir(s.path),
		filepath.Base(s.path)+".before-restore-"+time.Now().UTC().Format("20060102T150405Z")+"-*.backup")
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
