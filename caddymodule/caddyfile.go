package caddymodule

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/dustin/go-humanize"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("hearth", parseGlobalOption)
}

// parseGlobalOption sets up the hearth app from the global option:
//
//	hearth {
//	    storage_dir <path>
//	    open_registration
//	    memtable_size <size>
//	    block_cache_size <size>
//	    index_cache_size <size>
//	    min_free_space <size>|off
//	    sync_writes on|off
//	    gc_interval <duration>
//	    session_lifetime <duration>
//	}
func parseGlobalOption(d *caddyfile.Dispenser, _ any) (any, error) {
	app := new(App)
	if err := app.UnmarshalCaddyfile(d); err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: "hearth", Value: caddyconfig.JSON(app, nil)}, nil
}

// UnmarshalCaddyfile reads the hearth global option block.
func (a *App) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // option name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "storage_dir":
			if !d.NextArg() {
				return d.ArgErr()
			}
			a.StorageDir = d.Val()
		case "open_registration":
			a.OpenRegistration = true
		case "memtable_size", "block_cache_size", "index_cache_size":
			name := d.Val()
			if !d.NextArg() {
				return d.ArgErr()
			}
			n, err := humanize.ParseBytes(d.Val())
			if err != nil {
				return d.Errf("%s: %v", name, err)
			}
			switch name {
			case "memtable_size":
				a.MemTableSize = int64(n)
			case "block_cache_size":
				a.BlockCacheSize = int64(n)
			default:
				a.IndexCacheSize = int64(n)
			}
		case "min_free_space":
			if !d.NextArg() {
				return d.ArgErr()
			}
			if d.Val() == "off" {
				a.MinFreeSpace = -1
				break
			}
			n, err := humanize.ParseBytes(d.Val())
			if err != nil || n == 0 {
				return d.Errf("min_free_space: a size such as 512MiB, or off")
			}
			a.MinFreeSpace = int64(n)
		case "sync_writes":
			if !d.NextArg() {
				return d.ArgErr()
			}
			v, err := parseOnOff(d.Val())
			if err != nil {
				return d.Errf("sync_writes: %v", err)
			}
			a.SyncWrites = &v
		case "gc_interval", "session_lifetime":
			name := d.Val()
			if !d.NextArg() {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(d.Val())
			if err != nil || dur <= 0 {
				return d.Errf("%s: want a positive duration such as 10m, got %q", name, d.Val())
			}
			if name == "gc_interval" {
				a.GCInterval = caddy.Duration(dur)
			} else {
				a.SessionLifetime = caddy.Duration(dur)
			}
		default:
			return d.Errf("unrecognized hearth option '%s'", d.Val())
		}
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	return nil
}

func parseOnOff(s string) (bool, error) {
	switch s {
	case "on":
		return true, nil
	case "off":
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, strconv.ErrSyntax
	}
	return b, nil
}

// parseLimit reads the arguments "<count> <window>" of the rate-limit
// subdirective name.
func parseLimit(d *caddyfile.Dispenser, name string, args []string) (int, caddy.Duration, error) {
	if len(args) != 2 {
		return 0, 0, d.Errf("%s: want <count> <window>, e.g. 5 10m", name)
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n <= 0 {
		return 0, 0, d.Errf("%s: count must be a positive integer, got %q", name, args[0])
	}
	win, err := caddy.ParseDuration(args[1])
	if err != nil || win <= 0 {
		return 0, 0, d.Errf("%s: window must be a positive duration, got %q", name, args[1])
	}
	return n, caddy.Duration(win), nil
}
