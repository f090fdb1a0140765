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

// peakMem is `gqlbench peakmem -pid P`: it reads the idle process's
// resident sizes, resets its peak resident size (VmHWM: writing 5 to
// /proc/P/clear_refs, proc(5)), then reads /proc/P/status every 10 ms until
// SIGTERM or SIGINT, and prints the largest anonymous resident memory seen
// (RssAnon: the heap, stacks, the runtime's own; what the process holds),
// the largest file-backed part (RssFile: the binary's pages and
// memory-mapped files, page cache the kernel takes back under pressure), the
// kernel's VmHWM (both together, not sampled), the idle process's VmHWM,
// RssAnon and RssFile, and where the file-backed pages were when RssFile
// was largest (/proc/P/smaps, read every 100 ms: the binary, Badger's
// memtable logs *.mem, value logs *.vlog, tables *.sst, other files), in MiB:
//
//	hwm=H anon=A file=F idle: hwm=H anon=A file=F; at the file peak: binary=B mem=M vlog=V sst=S other=O
func peakMem(args []string) error {
	fs := flag.NewFlagSet("peakmem", flag.ExitOnError)
	pid := fs.Int("pid", 0, "the process to watch")
	fs.Parse(args)
	path := "/proc/" + strconv.Itoa(*pid) + "/"
	idle, err := procStatus(path+"status", "VmHWM", "RssAnon", "RssFile")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path+"clear_refs", []byte("5"), 0); err != nil {
		return fmt.Errorf("reset the peak resident size: %w", err)
	}
	exe, _ := os.Readlink(path + "exe")
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	var anon, file, hwm, mapsFile uint64
	var atPeak map[string]uint64
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for n := 0; ; n++ {
		v, err := procStatus(path+"status", "RssAnon", "RssFile", "VmHWM")
		if err != nil {
			return err
		}
		anon, file, hwm = max(anon, v[0]), max(file, v[1]), max(hwm, v[2])
		if n%10 == 0 {
			if m, err := fileMappings(path+"smaps", exe); err == nil && m["total"] > mapsFile {
				mapsFile, atPeak = m["total"], m
			}
		}
		select {
		case <-stop:
			fmt.Printf("hwm=%s anon=%s file=%s idle: hwm=%s anon=%s file=%s; at the file peak: binary=%s mem=%s vlog=%s sst=%s other=%s\n",
				mib(hwm), mib(anon), mib(file), mib(idle[0]), mib(idle[1]), mib(idle[2]),
				mib(atPeak["binary"]), mib(atPeak["mem"]), mib(atPeak["vlog"]), mib(atPeak["sst"]), mib(atPeak["other"]))
			return nil
		case <-tick.C:
		}
	}
}

func mib(kb uint64) string { return strconv.FormatFloat(float64(kb)/1024, 'f', 1, 64) }

// fileMappings sums the resident file-backed pages of a /proc/P/smaps by
// what is mapped (kB): the binary exe, Badger's *.mem, *.vlog and *.sst
// files, other files, and all of them ("total").
func fileMappings(path, exe string) (map[string]uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]uint64{}
	class := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if !strings.HasSuffix(fields[0], ":") { // a mapping's header: range perms offset dev inode [path]
			class = ""
			if len(fields) >= 6 && strings.HasPrefix(fields[5], "/") && fields[4] != "0" {
				name := strings.Join(fields[5:], " ")
				switch {
				case name == exe:
					class = "binary"
				case strings.HasSuffix(name, ".mem"):
					class = "mem"
				case strings.HasSuffix(name, ".vlog"):
					class = "vlog"
				case strings.HasSuffix(name, ".sst"):
					class = "sst"
				default:
					class = "other"
				}
			}
			continue
		}
		if class != "" && fields[0] == "Rss:" && len(fields) >= 2 {
			kb, _ := strconv.ParseUint(fields[1], 10, 64)
			out[class] += kb
			out["total"] += kb
		}
	}
	return out, sc.Err()
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
