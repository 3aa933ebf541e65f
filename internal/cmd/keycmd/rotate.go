package keycmd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/internal/clikit"
	"github.com/custodylog/custody/internal/keyfile"
	"github.com/custodylog/custody/internal/location"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/sign"
)

func keyRotateLogCommand() *cli.Command {
	return &cli.Command{
		Name:      "rotate-log",
		Usage:     "rotate the key that signs the log's checkpoints, keeping old checkpoints verifiable",
		UsageText: "custody key rotate-log --dir D [--new-key FILE] [--encrypt] [--json]\n   custody key rotate-log --dir D --finish [--json]",
		Description: `Rotates the checkpoint key in two steps, each run while the ledger is stopped
(it needs the data folder to itself):

1. Start: a new key (FILE, or one generated as keys/checkpoint-N.key in the
   data folder) joins the checkpoint keys. From now on every checkpoint is
   signed by the old key and the new one, so readers holding either keep
   verifying. The current head is signed again at once. Hand verifiers the
   new key set (printed, and by 'custody checkpoint --verifier-key').

2. Finish (--finish), once verifiers hold the new set: the new key signs
   alone. Each old key is retired at the current head: the key set keeps
   it as "<key> max_size=N root=R". Signed by it alone, that head still
   verifies, older checkpoints verify once proven consistent with it
   ('custody verify consistency'), and any other checkpoint (larger, or a
   different history) is refused, whoever holds the key.

GENESIS binds the log key for ever, and it keeps signing DENIALs until the
admin rotates that key too ('custody key rotate-denial'): keep its file
until then. Verifiers give the key set file to --log-key wherever they gave
the single key.

Example:

   custody key rotate-log --dir ./custody-data
   custody checkpoint --dir ./custody-data --verifier-key > log.keys
   custody key rotate-log --dir ./custody-data --finish
   custody verify wf.bundle.json --log-key log.keys`,
		Flags: []cli.Flag{
			clikit.DirFlag(),
			clikit.LocFlag(location.Store, ""),
			&cli.StringFlag{Name: "new-key", Usage: "the new checkpoint key's private key file (default: generate keys/checkpoint-N.key)", TakesFile: true},
			&cli.BoolFlag{Name: "encrypt", Usage: "protect a generated key file with a passphrase"},
			&cli.BoolFlag{Name: "finish", Usage: "end the rotation: the new key signs alone, the old one is retired"},
			clikit.JSONFlag(),
		},
		Action: func(ctx context.Context, c *cli.Command) error {
			loc, err := clikit.ResolveNoArgs(c)
			if err != nil {
				return err
			}
			dir := loc.Value
			opts := ledger.Options{Passphrase: sign.Passphrase("passphrase for the keys of " + dir + ": ")}
			var r *ledger.Rotation
			if c.Bool("finish") {
				if c.String("new-key") != "" || c.Bool("encrypt") {
					return clikit.Usage(c, "--finish takes no --new-key or --encrypt: it retires the old key")
				}
				r, err = ledger.FinishRotation(dir, opts)
			} else {
				r, err = startRotation(c, dir, opts)
			}
			if err != nil {
				return fmt.Errorf("key rotate-log: %w", err)
			}
			return printRotation(c, dir, r)
		},
	}
}

// startRotation rotates to --new-key, or to a key it generates.
func startRotation(c *cli.Command, dir string, opts ledger.Options) (*ledger.Rotation, error) {
	if f := c.String("new-key"); f != "" {
		if c.Bool("encrypt") {
			return nil, clikit.Usage(c, "--encrypt protects a generated key; --new-key FILE is used as it is")
		}
		abs, err := filepath.Abs(f)
		if err != nil {
			return nil, err
		}
		return ledger.RotateCheckpointKey(dir, abs, opts)
	}
	rel, pass, err := keyfile.NewInFolder(dir, "checkpoint", c.Bool("encrypt"))
	if err != nil {
		return nil, err
	}
	if pass != nil {
		defer clear(pass)
		opts.Passphrase = func() ([]byte, error) { return append([]byte(nil), pass...), nil }
	}
	path := filepath.Join(dir, rel)
	r, err := ledger.RotateCheckpointKey(dir, rel, opts)
	if err != nil {
		os.Remove(path) // never used: the config does not name it
		return nil, err
	}
	return r, nil
}

// RotationInfo is what key rotate-log prints with --json.
type RotationInfo struct {
	Origin     string   `json:"origin"`
	Size       uint64   `json:"size"`
	Finished   bool     `json:"finished"`
	KeyFile    string   `json:"new_key_file,omitempty"`
	Signing    []string `json:"signing_keys"`
	Retired    []string `json:"retired_keys,omitempty"`
	KeySet     string   `json:"key_set"`
	Checkpoint string   `json:"checkpoint"`
}

func printRotation(c *cli.Command, dir string, r *ledger.Rotation) error {
	finished := c.Bool("finish")
	info := RotationInfo{Origin: r.Origin, Size: r.Size, Finished: finished, Signing: r.Signing, Retired: r.Retired,
		KeySet: r.Keys, Checkpoint: string(r.Checkpoint)}
	if !finished {
		info.KeyFile = r.KeyFile
	}
	w := c.Root().Writer
	if c.Bool("json") {
		return clikit.WriteJSON(w, info)
	}
	if finished {
		fmt.Fprintf(w, "checkpoint key rotation of %s finished at size %d\n", r.Origin, r.Size)
		fmt.Fprintf(w, "signing now  %s\n", strings.Join(r.Signing, "\n             "))
		for _, k := range r.Retired {
			fmt.Fprintf(w, "retired      %s (vouches for the head of size %d it was retired at)\n", k, r.Size)
		}
	} else {
		fmt.Fprintf(w, "checkpoint key rotation of %s started at size %d\n", r.Origin, r.Size)
		fmt.Fprintf(w, "new key file %s\n", r.KeyFile)
		fmt.Fprintf(w, "signing now  %s\n", strings.Join(r.Signing, "\n             "))
		fmt.Fprintln(w, "every checkpoint is signed by all of these until you finish the rotation.")
	}
	fmt.Fprintf(w, "\nthe key set verifiers need (give its file to --log-key):\n\n%s\n", strings.TrimSpace(r.Keys))
	fmt.Fprintf(w, "\n   custody checkpoint --dir %s --verifier-key > log.keys\n", dir)
	if !finished {
		fmt.Fprintf(w, "   custody key rotate-log --dir %s --finish      # once verifiers hold it\n", dir)
	}
	fmt.Fprintln(w, "\nthe key that signs DENIALs does not change here; rotate it with custody key rotate-denial.")
	return nil
}
