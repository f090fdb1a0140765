package caddymodule

import (
	"errors"
	"regexp"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"
)

// Every Caddyfile parser of Hearth has one shape (Caddy's own), written
// once in readBlock:
//
//	return readBlock(d, "<module> subdirective", func(name string) (err error) {
//		switch name {
//		case "x": h.X, err = argInt(d, name, 1)
//		...
//		default: err = errUnrecognized
//		}
//		return err
//	})
//
// The arg* helpers below read a subdirective's arguments, all of them, so a
// stray extra argument is an error; every option is declared once, as a
// field of the module's struct (JSON tag, `caddyfile` tag with its syntax,
// `default` tag and doc comment), and docs/configuration.md is generated
// from those declarations (see options_test.go).

// errUnrecognized is what a readBlock callback returns for a name it does
// not know.
var errUnrecognized = errors.New("unrecognized subdirective")

// readBlock reads a directive or global option that takes no arguments and
// a block of subdirectives: sub reads each one's arguments (name is the
// subdirective); errUnrecognized from it is reported as "unrecognized
// <what> '<name>'".
func readBlock(d *caddyfile.Dispenser, what string, sub func(name string) error) error {
	d.Next() // the directive or option name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		name := d.Val()
		if err := sub(name); err == errUnrecognized {
			return d.Errf("unrecognized %s '%s'", what, name)
		} else if err != nil {
			return err
		}
	}
	return nil
}

// parseHandler is the Caddyfile parser of a handler directive: it reads the
// directive's block into a new M.
func parseHandler[M any, P interface {
	*M
	caddyhttp.MiddlewareHandler
	caddyfile.Unmarshaler
}](h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	m := P(new(M))
	err := m.UnmarshalCaddyfile(h.Dispenser)
	return m, err
}

// handlerInfo is the module information of the handler M, whose directive
// is name: the module http.handlers.<name>.
func handlerInfo[M any, P interface {
	*M
	caddy.Module
}](name string) caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: caddy.ModuleID("http.handlers." + name), New: func() caddy.Module { return P(new(M)) }}
}

// registerHandler registers the handler module M and its Caddyfile
// directive, named as the module (hearth_oauth for
// http.handlers.hearth_oauth), ordered pos (before or after) the directive
// other.
func registerHandler[M any, P interface {
	*M
	caddy.Module
	caddyhttp.MiddlewareHandler
	caddyfile.Unmarshaler
}](pos httpcaddyfile.Positional, other string) {
	m := P(new(M))
	caddy.RegisterModule(m)
	directive := m.CaddyModule().ID.Name()
	httpcaddyfile.RegisterHandlerDirective(directive, parseHandler[M, P])
	httpcaddyfile.RegisterDirectiveOrder(directive, pos, other)
}

func init() {
	httpcaddyfile.RegisterGlobalOption("hearth", parseGlobalOption)
}

// parseGlobalOption sets up the hearth app from the global option
// `hearth { ... }`; its subdirectives are the fields of App.
func parseGlobalOption(d *caddyfile.Dispenser, _ any) (any, error) {
	app := new(App)
	if err := app.UnmarshalCaddyfile(d); err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: "hearth", Value: caddyconfig.JSON(app, nil)}, nil
}

// UnmarshalCaddyfile reads the hearth global option block.
func (a *App) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return readBlock(d, "hearth option", func(name string) (err error) {
		switch name {
		case "storage_dir":
			a.StorageDir, err = argString(d)
		case "open_registration":
			a.OpenRegistration, err = true, argNone(d)
		case "memtable_size":
			a.MemTableSize, err = argSize(d, name)
		case "block_cache_size":
			a.BlockCacheSize, err = argSize(d, name)
		case "index_cache_size":
			a.IndexCacheSize, err = argSize(d, name)
		case "min_free_space":
			var v string
			if v, err = argString(d); err == nil {
				a.MinFreeSpace = -1
				if v != "off" {
					n, perr := humanize.ParseBytes(v)
					if perr != nil || n == 0 || n > 1<<62 {
						return d.Errf("%s: want a size such as 512MiB, or off, got %q", name, v)
					}
					a.MinFreeSpace = int64(n)
				}
			}
		case "sync_writes":
			var on bool
			on, err = argOnOff(d, name)
			a.SyncWrites = &on
		case "gc_interval":
			a.GCInterval, err = argDuration(d, name)
		case "session_lifetime":
			a.SessionLifetime, err = argDuration(d, name)
		case "cookie_domain":
			if a.CookieDomain, err = argString(d); err == nil && !validCookieDomain(a.CookieDomain) {
				return d.Errf("%s: want a domain name such as example.org, got %q", name, a.CookieDomain)
			}
		case "storage":
			a.Storage, err = parseStorage(d)
		default:
			err = errUnrecognized
		}
		return err
	})
}

// parseStorage reads `storage badger` or `storage postgres { dsn <dsn>
// [prefix <name>] [max_conns <n>] }`.
func parseStorage(d *caddyfile.Dispenser) (*StorageConfig, error) {
	engine, err := argString(d)
	if err != nil {
		return nil, err
	}
	switch engine {
	case "badger":
		if d.NextBlock(1) {
			return nil, d.Errf("storage badger takes no block: its options are hearth's (memtable_size, …)")
		}
		return nil, nil
	case "postgres":
	default:
		return nil, d.Errf("storage: want badger or postgres, got %q", engine)
	}
	c := &StorageConfig{Engine: engine}
	for d.NextBlock(1) {
		var err error
		switch name := d.Val(); name {
		case "dsn":
			c.DSN, err = argString(d)
		case "prefix":
			if c.Prefix, err = argString(d); err == nil && !tablePrefix.MatchString(c.Prefix) {
				return nil, d.Errf("storage postgres prefix: want lowercase letters, digits and _ (at most 31, not starting with a digit), got %q", c.Prefix)
			}
		case "max_conns":
			c.MaxConns, err = argInt(d, name, 1)
		default:
			return nil, d.Errf("unrecognized storage postgres option '%s'", name)
		}
		if err != nil {
			return nil, err
		}
	}
	if c.DSN == "" {
		return nil, d.Errf("storage postgres needs a block with dsn <connection string or URL>, e.g. dsn {env.HEARTH_DATABASE_URL}")
	}
	return c, nil
}

// tablePrefix is what storage/kv/pgkv accepts as a table prefix.
var tablePrefix = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,30}$`)

// argNone checks that a flag subdirective has no arguments.
func argNone(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// argString reads exactly one argument.
func argString(d *caddyfile.Dispenser) (string, error) {
	if !d.NextArg() {
		return "", d.ArgErr()
	}
	v := d.Val()
	if d.NextArg() {
		return "", d.ArgErr()
	}
	return v, nil
}

// argStrings reads one or more arguments.
func argStrings(d *caddyfile.Dispenser) ([]string, error) {
	args := d.RemainingArgs()
	if len(args) == 0 {
		return nil, d.ArgErr()
	}
	return args, nil
}

// argSize reads one size such as 1MiB (more than zero bytes).
func argSize(d *caddyfile.Dispenser, name string) (int64, error) {
	v, err := argString(d)
	if err != nil {
		return 0, err
	}
	n, err := humanize.ParseBytes(v)
	if err != nil || n == 0 || n > 1<<62 {
		return 0, d.Errf("%s: want a size such as 1MiB, got %q", name, v)
	}
	return int64(n), nil
}

// argInt reads one integer of at least min.
func argInt(d *caddyfile.Dispenser, name string, min int) (int, error) {
	v, err := argString(d)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min {
		return 0, d.Errf("%s: want an integer of at least %d, got %q", name, min, v)
	}
	return n, nil
}

// argIntOrOff reads one positive integer, or "off" as -1.
func argIntOrOff(d *caddyfile.Dispenser, name string) (int, error) {
	v, err := argString(d)
	if err != nil {
		return 0, err
	}
	if v == "off" {
		return -1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, d.Errf("%s: want a positive integer or off, got %q", name, v)
	}
	return n, nil
}

// argFloat reads one number in (0, 1].
func argRatio(d *caddyfile.Dispenser, name string) (float64, error) {
	v, err := argString(d)
	if err != nil {
		return 0, err
	}
	r, err := strconv.ParseFloat(v, 64)
	if err != nil || !(r > 0 && r <= 1) {
		return 0, d.Errf("%s: want a number in (0, 1], got %q", name, v)
	}
	return r, nil
}

// argDuration reads one positive duration such as 10m.
func argDuration(d *caddyfile.Dispenser, name string) (caddy.Duration, error) {
	v, err := argString(d)
	if err != nil {
		return 0, err
	}
	dur, err := caddy.ParseDuration(v)
	if err != nil || dur <= 0 {
		return 0, d.Errf("%s: want a positive duration such as 10m, got %q", name, v)
	}
	return caddy.Duration(dur), nil
}

// argOnOff reads on or off (or a Go boolean).
func argOnOff(d *caddyfile.Dispenser, name string) (bool, error) {
	v, err := argString(d)
	if err != nil {
		return false, err
	}
	switch v {
	case "on":
		return true, nil
	case "off":
		return false, nil
	}
	b, perr := strconv.ParseBool(v)
	if perr != nil {
		return false, d.Errf("%s: want on or off, got %q", name, v)
	}
	return b, nil
}

// argLimit reads the arguments "<count> <window>" of a rate limit.
func argLimit(d *caddyfile.Dispenser, name string) (int, caddy.Duration, error) {
	return limitArgs(d, name, d.RemainingArgs())
}

// argLimitOrOff reads "<count> <window>", or "off" as a count of -1.
func argLimitOrOff(d *caddyfile.Dispenser, name string) (int, caddy.Duration, error) {
	args := d.RemainingArgs()
	if len(args) == 1 && args[0] == "off" {
		return -1, 0, nil
	}
	return limitArgs(d, name, args)
}

func limitArgs(d *caddyfile.Dispenser, name string, args []string) (int, caddy.Duration, error) {
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

// validCookieDomain accepts a domain name with at least one dot (a cookie
// for a top-level domain is refused by browsers), without port or scheme.
func validCookieDomain(d string) bool {
	d = strings.TrimPrefix(d, ".")
	if len(d) > 253 || !strings.Contains(d, ".") || strings.HasSuffix(d, ".") {
		return false
	}
	for _, label := range strings.Split(d, ".") {
		if label == "" || len(label) > 63 || strings.Trim(strings.ToLower(label), "abcdefghijklmnopqrstuvwxyz0123456789-") != "" ||
			label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
	}
	return true
}
