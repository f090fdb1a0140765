package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hearthkit/caddy-hearth/bench/importfiles"
)

// importFile is `gqlbench importfile -format readwise-reader|pocket-zip
// -rows N -o FILE`: the files the import benchmarks import.
func importFile(args []string) error {
	fs := flag.NewFlagSet("importfile", flag.ExitOnError)
	format := fs.String("format", "", "readwise-reader or pocket-zip")
	rows := fs.Int("rows", 10000, "rows (pocket-zip: a highlight pair on every fourth)")
	out := fs.String("o", "", "the file to write")
	fs.Parse(args)
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	switch *format {
	case "readwise-reader":
		err = importfiles.ReadwiseReaderCSV(f, *rows)
	case "pocket-zip":
		err = importfiles.PocketZip(f, *rows)
	default:
		err = fmt.Errorf("unknown format %q", *format)
	}
	return errors.Join(err, f.Close())
}

// peakMem is `gqlbench peakmem -pid P`: it resets the process's peak
// resident size (VmHWM: writing 5 to /proc/P/clear_refs, proc(5)), then
// reads /proc/P/status every 10 ms until SIGTERM or SIGINT, and prints the
// largest anonymous resident memory seen (RssAnon: the heap, stacks, the
// runtime's own; what the process holds), the largest file-backed part
// (RssFile: the binary's pages and memory-mapped files, page cache the
// kernel takes back under pressure), the kernel's VmHWM (both together,
// not sampled) and RssAnon when it started, in MiB:
//
//	anon=A file=F hwm=H anon-start=S
func peakMem(args []string) error {
	fs := flag.NewFlagSet("peakmem", flag.ExitOnError)
	pid := fs.Int("pid", 0, "the process to watch")
	fs.Parse(args)
	path := "/proc/" + strconv.Itoa(*pid) + "/"
	if err := os.WriteFile(path+"clear_refs", []byte("5"), 0); err != nil {
		return fmt.Errorf("reset the peak resident size: %w", err)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	var anon, file, hwm, start uint64
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for first := true; ; first = false {
		v, err := procStatus(path+"status", "RssAnon", "RssFile", "VmHWM")
		if err != nil {
			return err
		}
		if first {
			start = v[0]
		}
		anon, file, hwm = max(anon, v[0]), max(file, v[1]), max(hwm, v[2])
		select {
		case <-stop:
			mib := func(kb uint64) string { return strconv.FormatFloat(float64(kb)/1024, 'f', 1, 64) }
			fmt.Printf("anon=%s file=%s hwm=%s anon-start=%s\n", mib(anon), mib(file), mib(hwm), mib(start))
			return nil
		case <-tick.C:
		}
	}
}

// procStatus reads the fields named of a /proc/P/status file, in kB.
func procStatus(path string, names ...string) ([]uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := make([]uint64, len(names))
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		for i, n := range names {
			if k == n {
				out[i], _ = strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			}
		}
	}
	return out, sc.Err()
}
