package storage

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// A backup is Badger's backup stream (frames of an 8-byte little-endian
// length and a KVList of that length) followed by Hearth's end record: a
// length of all ones, backupEndMagic and the number of stream bytes before
// it. Restore checks every frame before Badger reads it and requires the
// end record, so a file that is not a backup, or one cut short anywhere,
// is refused before anything is loaded into the new store... or, for a
// cut between frames, before the restore completes.
const (
	backupEndMarker = ^uint64(0)
	backupEndMagic  = "HEARTH-BACKUP-END"
	// maxBackupFrame bounds one frame's length: Badger's stream batches
	// stay near 100 MiB (a soft limit); anything far beyond is not a
	// Hearth backup.
	maxBackupFrame = 1 << 30
)

// ErrNotBackup is returned by Restore for input that is not a complete
// backup written by Backup.
var ErrNotBackup = errors.New("not a complete Hearth backup")

// Backup writes a full backup of the database to w: Badger's backup stream
// of a consistent snapshot (the store keeps serving), then the end record.
func (s *Store) Backup(w io.Writer) error {
	cw := &countingWriter{w: w}
	if _, err := s.db.Backup(cw, 0); err != nil {
		return err
	}
	end := make([]byte, 0, 8+len(backupEndMagic)+8)
	end = binary.LittleEndian.AppendUint64(end, backupEndMarker)
	end = append(end, backupEndMagic...)
	end = binary.LittleEndian.AppendUint64(end, uint64(cw.n))
	_, err := w.Write(end)
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

// checkedBackup returns a reader of Badger's stream in r, without the end
// record, that fails (with ErrNotBackup) on a frame longer than
// maxBackupFrame, and on a stream that ends without the end record or with
// bytes after it.
func checkedBackup(r io.Reader) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(copyBackupFrames(pw, bufio.NewReaderSize(r, 64<<10))) }()
	return pr
}

func copyBackupFrames(w io.Writer, r *bufio.Reader) error {
	var streamBytes uint64
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("%w: it ends without Hearth's end record (cut short?)", ErrNotBackup)
			}
			return err
		}
		size := binary.LittleEndian.Uint64(hdr[:])
		if size == backupEndMarker {
			return checkBackupEnd(r, streamBytes)
		}
		if size > maxBackupFrame {
			return fmt.Errorf("%w: a frame of %d bytes", ErrNotBackup, size)
		}
		if _, err := w.Write(hdr[:]); err != nil {
			return err
		}
		n, err := io.CopyN(w, r, int64(size))
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: it ends inside a record (cut short?)", ErrNotBackup)
		}
		if err != nil {
			return err
		}
		streamBytes += uint64(len(hdr)) + uint64(n)
	}
}

func checkBackupEnd(r *bufio.Reader, streamBytes uint64) error {
	var end [len(backupEndMagic) + 8]byte
	if _, err := io.ReadFull(r, end[:]); err != nil || string(end[:len(backupEndMagic)]) != backupEndMagic {
		return fmt.Errorf("%w: a damaged end record", ErrNotBackup)
	}
	if n := binary.LittleEndian.Uint64(end[len(backupEndMagic):]); n != streamBytes {
		return fmt.Errorf("%w: the end record counts %d bytes, the file has %d", ErrNotBackup, n, streamBytes)
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
		if had, err = fresh.hasRecords(); err == nil && !had {
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
// (ErrRestoreRunning otherwise). The backup is loaded
// into a fresh sibling directory first, so input that is not a complete
// backup changes nothing; the current records are then written to a backup
// file next to the store (returned as previous, when there were any), and
// the store is brought to the backup's records with ordinary writes: keys
// the backup lacks are deleted, the others written with their expiry.
// Requests served meanwhile may see a mix of old and restored records.
func (s *Store) Replace(r io.Reader) (previous string, err error) {
	if !s.replacing.TryLock() {
		return "", ErrRestoreRunning
	}
	defer s.replacing.Unlock()
	fresh, err := loadBackup(s.path, r, Options{GCInterval: -1})
	if err != nil {
		return "", err
	}
	defer func() {
		fresh.Close()
		os.RemoveAll(fresh.path)
	}()

	had, err := s.hasRecords()
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
		s.vlogWritten.Store(true)
		if serr := s.Sync(); err == nil && serr != nil {
			err = serr
		}
	}()
	// Drop what the backup lacks, then write what it has.
	del := s.db.NewWriteBatch()
	defer del.Cancel()
	err = s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		return fresh.db.View(func(ftxn *badger.Txn) error {
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
		return previous, fmt.Errorf("remove records the backup lacks (the earlier records are in %s): %w", previous, err)
	}
	put := s.db.NewWriteBatch()
	defer put.Cancel()
	err = fresh.db.View(func(ftxn *badger.Txn) error {
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
		}
		return nil
	})
	if err == nil {
		err = put.Flush()
	}
	if err != nil {
		return previous, fmt.Errorf("write the backup's records (the earlier records are in %s): %w", previous, err)
	}
	return previous, nil
}

// backupToNewFile writes a backup of the store to a new file
// <store>.before-restore-<time>-<random>.backup next to it, synced, and
// returns its path.
func (s *Store) backupToNewFile() (path string, err error) {
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
