package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip13"
	"github.com/nbd-wtf/go-nostr/nip19"
	"github.com/spf13/cobra"

	"github.com/hearthkit/caddy-hearth/handlers/directory"
)

func init() {
	addHearthCommand(agentEventCommand)
}

// agentEventCommand is `caddy hearth agent-event`: a signed Nostr event for
// the agent directory, printed as JSON to post with curl. Operators with
// Nostr tooling of their own do not need it; it spares a newcomer finding
// one for a first registration. It talks to no server.
func agentEventCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "agent-event --key FILE (--name NAME [--purpose TEXT] [--capability C]... | --post TEXT)",
		Short: "Prints a signed agent registration (or post) for the agent directory",
		Long: `Signs a Nostr event with the agent's key and prints it as JSON, to send to
the directory with curl: a registration (kind 31339, --name required) for
POST /api/v1/agents/register, or with --post a note (kind 1) for
POST /api/v1/agents/events (as a JSON array). --key names a file holding the
agent's secret key (hex or nsec); when it does not exist, a new key is made
and written there (mode 0600), and its npub printed. See docs/directory.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			keyFile, _ := cmd.Flags().GetString("key")
			if keyFile == "" {
				return errors.New("--key is required")
			}
			sk, created, err := agentKey(keyFile)
			if err != nil {
				return err
			}
			pk, err := nostr.GetPublicKey(sk)
			if err != nil {
				return fmt.Errorf("%s: %w", keyFile, err)
			}
			if created {
				npub, _ := nip19.EncodePublicKey(pk)
				fmt.Fprintf(cmd.ErrOrStderr(), "made a new key in %s: the agent is %s\n", keyFile, npub)
			}
			f := cmd.Flags()
			name, _ := f.GetString("name")
			post, _ := f.GetString("post")
			evt := nostr.Event{PubKey: pk, CreatedAt: nostr.Now(), Tags: nostr.Tags{}}
			switch {
			case post != "" && name != "":
				return errors.New("--post and --name do not go together: a registration or a post")
			case post != "":
				evt.Kind, evt.Content = nostr.KindTextNote, post
			case name != "":
				evt.Kind, _ = f.GetInt("kind")
				evt.Tags = append(evt.Tags, nostr.Tag{"d", "agent"}, nostr.Tag{"name", name})
				for _, k := range []string{"purpose", "operator", "nip05"} {
					if v, _ := f.GetString(k); v != "" {
						evt.Tags = append(evt.Tags, nostr.Tag{k, v})
					}
				}
				caps, _ := f.GetStringArray("capability")
				for _, c := range caps {
					evt.Tags = append(evt.Tags, nostr.Tag{"capability", c})
				}
				if bits, _ := f.GetInt("pow"); bits > 0 {
					ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
					nonce, err := nip13.DoWork(ctx, evt, bits)
					cancel()
					if err != nil {
						return fmt.Errorf("proof of work of %d bits: %w (try fewer bits)", bits, err)
					}
					evt.Tags = append(evt.Tags, nonce)
				}
			default:
				return errors.New("--name (a registration) or --post (a note) is required")
			}
			if err := evt.Sign(sk); err != nil {
				return err
			}
			out, err := json.Marshal(evt)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), string(out))
			return err
		},
	}
	f := c.Flags()
	f.String("key", "", "File with the agent's secret key (hex or nsec); made when missing")
	f.String("name", "", "The agent's name (a registration)")
	f.String("purpose", "", "What the agent does")
	f.StringArray("capability", nil, "A capability; repeatable")
	f.String("operator", "", "Who runs the agent")
	f.String("nip05", "", "A NIP-05 identifier the agent claims (name@domain)")
	f.Int("pow", 0, "NIP-13 proof of work to commit to, in bits")
	f.Int("kind", directory.DefaultKind, "The registration event kind (the directory's kind option)")
	f.String("post", "", "A note's text (a post instead of a registration)")
	return c
}

// agentKey reads the secret key in path, or makes one there.
func agentKey(path string) (sk string, created bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		sk = nostr.GeneratePrivateKey()
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return "", false, err
		}
		if _, err := f.WriteString(sk + "\n"); err != nil {
			f.Close()
			return "", false, err
		}
		return sk, true, f.Close()
	}
	if err != nil {
		return "", false, err
	}
	sk = strings.TrimSpace(string(b))
	if strings.HasPrefix(sk, "nsec1") {
		prefix, v, err := nip19.Decode(sk)
		if err != nil || prefix != "nsec" {
			return "", false, fmt.Errorf("%s: not a valid nsec", path)
		}
		sk = v.(string)
	}
	if len(sk) != 64 || strings.Trim(strings.ToLower(sk), "0123456789abcdef") != "" {
		return "", false, fmt.Errorf("%s: not a secret key (64 hex digits or an nsec)", path)
	}
	return strings.ToLower(sk), false, nil
}
