package caddymodule

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "hearth",
		Usage: "<command> [args]",
		Short: "Manages Hearth: members, agent names, backups and restores",
		Long: `Manages Hearth's members and data.

The commands talk to the running Caddy through its admin API, found like
'caddy reload' finds it: --address, else the admin address of the --config
file, else localhost:2019. 'restore' also works while Caddy is stopped: it
then loads the backup into the storage_dir of the --config file.`,
		CobraFunc: setupHearthCommand,
	})
	addHearthCommand(memberCommand, backupCommand, restoreCommand)
}

// hearthCommands build the subcommands of `caddy hearth`. Other files of
// this package add theirs with addHearthCommand from init().
var hearthCommands []func() *cobra.Command

// addHearthCommand registers subcommand constructors of `caddy hearth`.
func addHearthCommand(fns ...func() *cobra.Command) {
	hearthCommands = append(hearthCommands, fns...)
}

// setupHearthCommand fills in the `caddy hearth` command: shared flags and
// every registered subcommand.
func setupHearthCommand(cmd *cobra.Command) {
	pf := cmd.PersistentFlags()
	pf.String("address", "", "The address of Caddy's admin API, if not the default")
	pf.StringP("config", "c", "", "Caddy config file, to find the admin address (and, for restore, the storage_dir)")
	pf.StringP("adapter", "a", "", "Name of the config adapter for --config")
	cmd.SilenceUsage = true
	cmd.PersistentPreRun = withConfigOnce
	for _, fn := range hearthCommands {
		cmd.AddCommand(fn())
	}
	needSubcommand(cmd)
}

// needSubcommand makes cmd and the commands under it that only group others
// fail on a missing or unknown subcommand. Cobra would print the help and
// exit 0, so a typo such as 'member suspnd alice' looked like success.
func needSubcommand(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		if c.HasSubCommands() {
			needSubcommand(c)
		}
	}
	if cmd.Runnable() {
		return
	}
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return fmt.Errorf("'%s' needs a command; see '%s --help'", cmd.CommandPath(), cmd.CommandPath())
		}
		msg := fmt.Sprintf("unknown command %q for '%s'", args[0], cmd.CommandPath())
		if cmd.SuggestionsMinimumDistance <= 0 {
			cmd.SuggestionsMinimumDistance = 2 // cobra's default, set only on its own path
		}
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return errors.New(msg)
	}
}

// adminAddress is the admin API address chosen by the command's flags, like
// `caddy reload` chooses it. An --address without a port (a host name or
// IP address) gets the port of Caddy's default admin address (2019).
func adminAddress(cmd *cobra.Command) (string, error) {
	fl := cmd.Flags()
	address, _ := fl.GetString("address")
	config, _ := fl.GetString("config")
	adapter, _ := fl.GetString("adapter")
	if address != "" {
		return withAdminPort(address)
	}
	if config == "" {
		return caddy.DefaultAdminListen, nil
	}
	cfgJSON, err := commandConfig(cmd)
	if err != nil {
		return "", err
	}
	if len(cfgJSON) == 0 {
		return caddy.DefaultAdminListen, nil
	}
	return caddycmd.DetermineAdminAPIAddress("", cfgJSON, config, adapter)
}

// configKey keys a command's loadedConfig in its context.
type configKey struct{}

// loadedConfig is the --config file as a command loaded it.
type loadedConfig struct {
	once sync.Once
	json []byte
	err  error
}

// withConfigOnce gives the command about to run its loadedConfig, which
// commandConfig fills at most once.
func withConfigOnce(cmd *cobra.Command, _ []string) {
	cmd.SetContext(context.WithValue(cmd.Context(), configKey{}, new(loadedConfig)))
}

// commandConfig is the --config file (or the Caddyfile in the current
// directory) in Caddy's JSON, loaded once per command: each load logs
// Caddy's "using config from file" and "adapted config to JSON" (and the
// adapter's warnings), and a command asks for the config at each admin
// API call and again for the site's address or storage_dir, so a
// self-hoster saw those lines two to four times.
func commandConfig(cmd *cobra.Command) ([]byte, error) {
	var lc *loadedConfig
	if ctx := cmd.Context(); ctx != nil {
		lc, _ = ctx.Value(configKey{}).(*loadedConfig)
	}
	if lc == nil {
		lc = new(loadedConfig)
	}
	lc.once.Do(func() {
		config, _ := cmd.Flags().GetString("config")
		adapter, _ := cmd.Flags().GetString("adapter")
		lc.json, _, _, lc.err = caddycmd.LoadConfig(config, adapter)
	})
	return lc.json, lc.err
}

// withAdminPort adds the default admin port to a TCP address without one;
// unix sockets and file descriptors are kept as they are.
func withAdminPort(address string) (string, error) {
	port := uint64(2019)
	if _, p, err := net.SplitHostPort(caddy.DefaultAdminListen); err == nil {
		if n, err := strconv.ParseUint(p, 10, 16); err == nil {
			port = n
		}
	}
	na, err := caddy.ParseNetworkAddressWithDefaults(address, "tcp", uint(port))
	if err != nil {
		return "", fmt.Errorf("--address %q: %w", address, err)
	}
	if na.IsUnixNetwork() || na.IsFdNetwork() {
		return address, nil
	}
	return na.String(), nil
}

var adminErrorRE = regexp.MustCompile(`(?s)HTTP (\d{3}): (.*)$`)

// adminCall sends a request to the running Caddy's admin API. in, when not
// nil, is sent as JSON. A response status of 400 or more becomes an error
// carrying the API's message.
func adminCall(cmd *cobra.Command, method, uri string, in any) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	return adminRequest(cmd, method, uri, nil, body)
}

// adminRequest is adminCall with a raw body and headers.
func adminRequest(cmd *cobra.Command, method, uri string, header http.Header, body io.Reader) (*http.Response, error) {
	addr, err := adminAddress(cmd)
	if err != nil {
		return nil, err
	}
	resp, err := caddycmd.AdminAPIRequest(addr, method, uri, header, body)
	if err == nil {
		return resp, nil
	}
	msg := err.Error()
	if m := adminErrorRE.FindStringSubmatch(msg); m != nil {
		status, _ := strconv.Atoi(m[1])
		var apiErr struct {
			Error string `json:"error"`
		}
		if json.Unmarshal([]byte(m[2]), &apiErr) == nil && apiErr.Error != "" {
			return nil, &adminAnswerError{Status: status, Msg: fmt.Sprintf("%s (HTTP %s)", apiErr.Error, m[1])}
		}
		return nil, &adminAnswerError{Status: status, Msg: fmt.Sprintf("admin API answered HTTP %s: %s", m[1], strings.TrimSpace(m[2]))}
	}
	return nil, fmt.Errorf("%w (is Caddy running with its admin API on %s? set --address or --config)", err, addr)
}

// adminAnswerError is an error status the admin API answered, with its
// message.
type adminAnswerError struct {
	Status int
	Msg    string
}

func (e *adminAnswerError) Error() string { return e.Msg }

// adminJSON is adminCall that decodes a JSON answer into out (when not nil).
func adminJSON(cmd *cobra.Command, method, uri string, in, out any) error {
	resp, err := adminCall(cmd, method, uri, in)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		addr, _ := adminAddress(cmd)
		return fmt.Errorf("%s did not answer like Caddy's admin API (%v); is that the admin address, not a site's?", addr, err)
	}
	return nil
}

// adminDone calls the admin API for an action whose answer has nothing to
// read, then says on standard output what was done (format and args, one
// line).
func adminDone(cmd *cobra.Command, method, uri string, in any, format string, args ...any) error {
	if err := adminJSON(cmd, method, uri, in, nil); err != nil {
		return err
	}
	fmt.Fprintln(cmd.OutOrStdout(), fmt.Sprintf(format, args...))
	return nil
}

func memberURI(username string, rest ...string) string {
	return "/hearth/members/" + strings.Join(append([]string{url.PathEscape(username)}, rest...), "/")
}

func memberCommand() *cobra.Command {
	member := &cobra.Command{
		Use:   "member",
		Short: "Adds, lists, suspends and removes members",
	}

	add := &cobra.Command{
		Use:   "add <username>",
		Short: "Creates a member; prompts for the password unless --password-stdin",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			display, _ := cmd.Flags().GetString("display-name")
			// What can be checked is checked before the password is asked for.
			if err := members.ValidateUsername(args[0]); err != nil {
				return fmt.Errorf("username %q: %w", args[0], err)
			}
			var existing memberView
			err := adminJSON(cmd, http.MethodGet, memberURI(args[0]), nil, &existing)
			if err == nil {
				return fmt.Errorf("username %q is taken", existing.Username)
			}
			var answer *adminAnswerError
			if errors.As(err, &answer) && answer.Status != http.StatusNotFound {
				return err // the admin API answered, but not that the name is free
			}
			// Not found, or no admin API reachable (then the creation says so).
			pw, err := readNewPassword(cmd)
			if err != nil {
				return err
			}
			var m memberView
			err = adminJSON(cmd, http.MethodPost, "/hearth/members",
				createMemberRequest{Username: args[0], Password: pw, DisplayName: display}, &m)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created member %s (id %s)\n", m.Username, m.ID)
			return nil
		},
	}
	add.Flags().String("display-name", "", "The member's display name")
	add.Flags().Bool("password-stdin", false, "Read the password from the first line of standard input")

	list := &cobra.Command{
		Use:   "list",
		Short: "Lists members",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return printList(cmd, "/hearth/members", "USERNAME\tDISPLAY NAME\tCREATED\tSTATUS", func(m memberView) []string {
				status := "active"
				if m.Suspended {
					status = "suspended"
				}
				return []string{m.Username, m.DisplayName, m.CreatedAt.Format(time.DateOnly), status}
			})
		},
	}
	list.Flags().Bool("json", false, "Print the members as JSON")

	simple := func(use, short, method, done string, rest ...string) *cobra.Command {
		return &cobra.Command{
			Use:   use + " <username>",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return adminDone(cmd, method, memberURI(args[0], rest...), nil, "%s %s", done, args[0])
			},
		}
	}
	suspend := simple("suspend", "Suspends a member: ends its sessions and stops its tokens working", http.MethodPost, "suspended", "suspend")
	unsuspend := simple("unsuspend", "Lifts a member's suspension", http.MethodPost, "unsuspended", "unsuspend")
	remove := &cobra.Command{
		Use:   "remove <username> [--yes]",
		Short: "Deletes a member and everything it owns; asks to type the username, or needs --yes",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if yes, _ := cmd.Flags().GetBool("yes"); !yes {
				if err := confirmRemoval(cmd, args[0]); err != nil {
					return err
				}
			}
			return adminDone(cmd, http.MethodDelete, memberURI(args[0]), nil, "removed %s", args[0])
		},
	}
	remove.Flags().Bool("yes", false, "Do not ask for confirmation (needed when standard input is not a terminal)")

	passwd := &cobra.Command{
		Use:   "passwd <username>",
		Short: "Sets a member's password (and ends its sessions)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pw, err := readNewPassword(cmd)
			if err != nil {
				return err
			}
			return adminDone(cmd, http.MethodPut, memberURI(args[0], "password"), setPasswordRequest{Password: pw}, "changed the password of %s", args[0])
		},
	}
	passwd.Flags().Bool("password-stdin", false, "Read the password from the first line of standard input")

	member.AddCommand(add, list, suspend, unsuspend, passwd, remove)
	for _, fn := range memberCommands {
		member.AddCommand(fn())
	}
	member.AddCommand(memberSelfCommands()...)
	return member
}

// memberCommands build more subcommands of `caddy hearth member`; other
// files of this package add theirs from init().
var memberCommands []func() *cobra.Command

// confirmRemoval asks, on a terminal, to type the member's username; it
// refuses when standard input is not a terminal (a script must say --yes).
func confirmRemoval(cmd *cobra.Command, username string) error {
	in, ok := cmd.InOrStdin().(*os.File)
	if !ok || !term.IsTerminal(int(in.Fd())) {
		return fmt.Errorf("removing %s deletes everything it owns; standard input is not a terminal, so pass --yes to confirm", username)
	}
	return confirmTyped(in, cmd.ErrOrStderr(), username)
}

// confirmTyped shows what removal does and reads one line from in: it must
// be the username.
func confirmTyped(in io.Reader, out io.Writer, username string) error {
	fmt.Fprintf(out, "This deletes the member %s and everything it owns: saved items, highlights, labels, tokens and sessions.\nType the username to confirm: ", username)
	line, err := bufio.NewReader(io.LimitReader(in, 1024)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read confirmation: %w", err)
	}
	if strings.TrimSpace(line) != username {
		return fmt.Errorf("not confirmed: %s was not removed", username)
	}
	return nil
}

// readNewPassword reads a password from the first line of stdin
// (--password-stdin) or prompts for it twice without echo.
func readNewPassword(cmd *cobra.Command) (string, error) {
	if fromStdin, _ := cmd.Flags().GetBool("password-stdin"); fromStdin {
		line, err := bufio.NewReader(io.LimitReader(cmd.InOrStdin(), 4096)).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("read password from stdin: %w", err)
		}
		pw := strings.TrimRight(line, "\r\n")
		if pw == "" {
			return "", errors.New("no password on standard input")
		}
		return pw, nil
	}
	in, ok := cmd.InOrStdin().(*os.File)
	if !ok || !term.IsTerminal(int(in.Fd())) {
		return "", errors.New("standard input is not a terminal; pass the password with --password-stdin")
	}
	out := cmd.ErrOrStderr()
	prompt := func(label string) (string, error) {
		fmt.Fprint(out, label)
		b, err := term.ReadPassword(int(in.Fd()))
		fmt.Fprintln(out)
		return string(b), err
	}
	pw, err := prompt("Password: ")
	if err != nil {
		return "", err
	}
	if err := members.ValidatePassword(pw); err != nil {
		return "", err
	}
	again, err := prompt("Repeat password: ")
	if err != nil {
		return "", err
	}
	if again != pw {
		return "", errors.New("the passwords do not match")
	}
	return pw, nil
}

func backupCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "backup --output FILE",
		Short: "Writes a backup of the running server's store to FILE",
		Long: `Streams a consistent backup of the store from the running Caddy (admin API
GET /hearth/backup) into FILE. The file appears only once the whole backup
has arrived; an interrupted backup leaves no file behind.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, _ := cmd.Flags().GetString("output")
			if out == "" {
				return errors.New("--output FILE is required")
			}
			n, err := backupTo(cmd, out)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote backup to %s (%d bytes)\n", out, n)
			return nil
		},
	}
	c.Flags().StringP("output", "o", "", "The backup file to write")
	return c
}

func backupTo(cmd *cobra.Command, path string) (n int64, err error) {
	resp, err := adminCall(cmd, http.MethodGet, "/hearth/backup", nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".part-*")
	if err != nil {
		return 0, fmt.Errorf("create backup file: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if n, err = io.Copy(f, resp.Body); err != nil {
		return n, fmt.Errorf("backup interrupted: %w", err)
	}
	if st := resp.Trailer.Get(BackupStatusTrailer); st != "ok" {
		return n, errors.New("backup interrupted: the server did not finish the stream (see the Caddy log)")
	}
	if err = f.Sync(); err != nil {
		return n, err
	}
	if err = f.Close(); err != nil {
		return n, err
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return n, fmt.Errorf("move backup into place: %w", err)
	}
	return n, nil
}

func restoreCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "restore --input FILE [--config Caddyfile]",
		Short: "Replaces the store's records with a backup's",
		Long: `Replaces the records of the store with those of a backup written by
'caddy hearth backup'. Input that is not a complete backup is refused and
changes nothing.

While Caddy runs (its admin API answers), the backup goes through the
admin API (POST /hearth/restore): the running store is brought to the
backup's records, and its earlier records are first written to a backup
file <storage_dir>.before-restore-<time>.backup. Requests served during
the restore may see a mix of old and restored records.

While Caddy is stopped, the backup is loaded into the store named by the
config's hearth storage_dir (the default location when the config has
none; a config without Hearth, or none, is refused): into a new directory first, then the current data is moved aside to
<storage_dir>.before-restore-<time>. Delete what was moved aside once you
have checked the restore. Run as root, it gives the new store the owner of
the one it replaces, so that Caddy, running as its own user, can open it. With 'storage postgres' in the config, the backup
goes into the database directly (other nodes may be running): checked whole,
the earlier records written to <storage_dir>.before-restore-<time>.backup,
then replaced in one transaction. A backup restores into either engine:
that is how a site moves from Badger to PostgreSQL and back.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			input, _ := cmd.Flags().GetString("input")
			if input == "" {
				return errors.New("--input FILE is required")
			}
			f, err := os.Open(input)
			if err != nil {
				return err
			}
			defer f.Close()
			var status struct {
				StorageDir string `json:"storage_dir"`
			}
			if adminJSON(cmd, http.MethodGet, "/hearth/status", nil, &status) == nil && status.StorageDir != "" {
				return restoreRunning(cmd, input, f)
			}
			dir, pg, err := storeOfConfig(cmd)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if pg != nil {
				// The database is shared (other nodes may run): the
				// same live restore as the admin API's.
				return restoreDatabase(w, input, dir, pg, f)
			}
			uid, gid, chown := storeOwner(dir)
			prev, err := storage.RestoreDir(dir, bufio.NewReader(f), storage.Options{})
			if errors.Is(err, storage.ErrLocked) {
				return fmt.Errorf("the store %s is in use by a process whose admin API did not answer: stop it, or give its admin address with --address, then run restore again", dir)
			}
			if err != nil {
				return fmt.Errorf("restore into %s: %w", dir, err)
			}
			if chown {
				if err := chownTree(dir, uid, gid); err != nil {
					return fmt.Errorf("restored into %s, but could not give it the owner of the store it replaced (uid %d): %w", dir, uid, err)
				}
			}
			fmt.Fprintf(w, "restored %s into %s\n", input, dir)
			if prev != "" {
				fmt.Fprintf(w, "the previous data is in %s; delete it once you have checked the restore\n", prev)
			}
			return nil
		},
	}
	c.Flags().StringP("input", "i", "", "The backup file to load")
	return c
}

// chownTree gives dir and everything in it to uid and gid (storeOwner).
// It runs as root in a directory another user owns the parent of, so no
// path is trusted after the start: dir is opened inside its parent
// (os.Root refuses a link that leads out of it, as dir swapped for a link
// to /etc would), its tree is walked and changed inside dir's own root,
// links changed and never followed out of it, and dir itself is given
// away last, through its handle, so that until then its owner cannot
// rename what is under it.
func chownTree(dir string, uid, gid int) error {
	parent, err := os.OpenRoot(filepath.Dir(dir))
	if err != nil {
		return err
	}
	defer parent.Close()
	root, err := parent.OpenRoot(filepath.Base(dir))
	if err != nil {
		return err
	}
	defer root.Close()
	err = fs.WalkDir(root.FS(), ".", func(p string, _ fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return err
		}
		return root.Lchown(p, uid, gid)
	})
	if err != nil {
		return err
	}
	top, err := root.Open(".")
	if err != nil {
		return err
	}
	defer top.Close()
	return top.Chown(uid, gid)
}

// restoreRunning sends the backup in f to the running Caddy.
func restoreRunning(cmd *cobra.Command, input string, f *os.File) error {
	resp, err := adminRequest(cmd, http.MethodPost, "/hearth/restore",
		http.Header{"Content-Type": {"application/octet-stream"}}, bufio.NewReader(f))
	if err != nil {
		return fmt.Errorf("restore through the admin API: %w", err)
	}
	defer resp.Body.Close()
	var out struct {
		Previous string `json:"previous"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return fmt.Errorf("restore through the admin API: unexpected answer: %w", err)
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "restored %s into the running server\n", input)
	if out.Previous != "" {
		fmt.Fprintf(w, "the previous records are in %s; delete it once you have checked the restore\n", out.Previous)
	}
	return nil
}

// hearthHandler finds a Hearth handler in a JSON config, as the Caddyfile
// adapter writes it or as a person does.
var hearthHandler = regexp.MustCompile(`"handler"\s*:\s*"hearth_`)

// storeOfConfig adapts the --config file (or the Caddyfile in the current
// directory) and returns the hearth app's storage directory (absolute; the
// default one when unset) and, with `storage postgres`, the database. A
// config that runs no Hearth, or none at all, is an error rather than the
// default directory: the backup would go into a store the site never
// opens, and the command would say it restored.
func storeOfConfig(cmd *cobra.Command) (dir string, pg *storage.PostgresOptions, err error) {
	cfgJSON, err := commandConfig(cmd)
	if err != nil {
		return "", nil, err
	}
	if len(cfgJSON) == 0 {
		return "", nil, errors.New("no running Caddy answered on its admin API, and there is no Caddyfile here: " +
			"pass --config with the site's Caddyfile (the backup goes into its storage_dir), or --address if Caddy runs with another admin address")
	}
	repl := caddy.NewReplacer()
	var cfg struct {
		Apps struct {
			Hearth *App `json:"hearth"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(cfgJSON, &cfg); err != nil {
		return "", nil, fmt.Errorf("read config: %w", err)
	}
	if cfg.Apps.Hearth == nil && !hearthHandler.Match(cfgJSON) {
		return "", nil, errors.New("the config runs no Hearth (no hearth option, no hearth_* directive): pass --config with the site's Caddyfile")
	}
	if a := cfg.Apps.Hearth; a != nil {
		dir = a.StorageDir
		if c := a.Storage; c != nil && c.Engine == "postgres" {
			pg = &storage.PostgresOptions{DSN: repl.ReplaceKnown(c.DSN, ""), Prefix: c.Prefix, MaxConns: int32(c.MaxConns)}
			if pg.DSN == "" {
				return "", nil, errors.New("storage postgres: dsn is empty (is the environment variable set?)")
			}
		}
	}
	if dir == "" {
		dir = defaultStorageDir()
	}
	dir, err = filepath.Abs(repl.ReplaceKnown(dir, ""))
	return dir, pg, err
}

// restoreDatabase brings the PostgreSQL store of the config to the backup
// in f (storage.Store.Replace: checked whole first, the earlier records
// saved to a file next to storage_dir, then replaced in one transaction).
func restoreDatabase(w io.Writer, input, dir string, pg *storage.PostgresOptions, f io.Reader) error {
	st, err := storage.Open(dir, storage.Options{Postgres: pg, GCInterval: -1})
	if err != nil {
		return err
	}
	defer st.Close()
	prev, err := st.Replace(bufio.NewReader(f))
	if err != nil {
		return fmt.Errorf("restore into the database: %w", err)
	}
	fmt.Fprintf(w, "restored %s into the database\n", input)
	if prev != "" {
		fmt.Fprintf(w, "the previous records are in %s; delete it once you have checked the restore\n", prev)
	}
	return nil
}
