package keycmd

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/internal/clikit"
	"github.com/custodylog/custody/internal/keyfile"
	"github.com/custodylog/custody/internal/location"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/sign"
)

func keyRotateDenialCommand() *cli.Command {
	return &cli.Command{
		Name:      "rotate-denial",
		Usage:     "rotate the key that signs the log's DENIALs, retiring the old one for good",
		UsageText: "custody key rotate-denial --dir D --admin-key K [--new-key FILE] [--encrypt] [--json]",
		Description: `Rotates the key that signs DENIALs, while the ledger is stopped (it needs the
data folder to itself). GENESIS binds the log key, which signs DENIALs (and
checkpoints, until 'custody key rotate-log'). This command

1. lists a new key (FILE, or one generated as keys/denial-N.key in the data
   folder) in the ledger's config (denial_keys), and
2. appends the admin's PRINCIPAL statement of op log_key naming it, signed
   with --admin-key.

From that entry on, only the new key signs DENIALs; the old one is retired
for good (it stays bound, so nothing it signs is ever a submission). The
rotation is in the log's trust chain, so verifiers need nothing new: every
bundle carries it. The checkpoint key set does not change. Once checkpoints
no longer need it either (after 'custody key rotate-log --finish'), the old
log key's file can be destroyed.

Example:

   custody key rotate-denial --dir ./custody-data --admin-key ./custody-data/keys/admin.key`,
		Flags: []cli.Flag{
			clikit.DirFlag(),
			clikit.LocFlag(location.Store, ""),
			&cli.StringFlag{Name: "admin-key", Usage: "the admin's private key file (it signs the log_key statement)", Required: true, TakesFile: true},
			&cli.StringFlag{Name: "new-key", Usage: "the new DENIAL key's private key file (default: generate keys/denial-N.key)", TakesFile: true},
			&cli.BoolFlag{Name: "encrypt", Usage: "protect a generated key file with a passphrase"},
			clikit.JSONFlag(),
		},
		Action: func(ctx context.Context, c *cli.Command) error {
			loc, err := clikit.ResolveNoArgs(c)
			if err != nil {
				return err
			}
			dir := loc.Value
			admin, err := keyfile.ReadPrivate(c.String("admin-key"))
			if err != nil {
				return fmt.Errorf("key rotate-denial: --admin-key: %w", err)
			}
			defer clear(admin)
			opts := ledger.Options{Passphrase: sign.Passphrase("passphrase for the keys of " + dir + ": ")}
			keyFile := c.String("new-key")
			if keyFile != "" {
				if c.Bool("encrypt") {
					return clikit.Usage(c, "--encrypt protects a generated key; --new-key FILE is used as it is")
				}
				if keyFile, err = filepath.Abs(keyFile); err != nil {
					return err
				}
			} else {
				var pass []byte
				if keyFile, pass, err = keyfile.NewInFolder(dir, "denial", c.Bool("encrypt")); err != nil {
					return fmt.Errorf("key rotate-denial: %w", err)
				}
				if pass != nil {
					defer clear(pass)
					opts.Passphrase = func() ([]byte, error) { return append([]byte(nil), pass...), nil }
				}
			}
			r, err := ledger.RotateDenialKey(dir, keyFile, admin, opts)
			if err != nil {
				return fmt.Errorf("key rotate-denial: %w", err)
			}
			w := c.Root().Writer
			if c.Bool("json") {
				return clikit.WriteJSON(w, struct {
					Old     string `json:"old_denial_keyid"`
					New     string `json:"denial_keyid"`
					Index   uint64 `json:"index"`
					KeyFile string `json:"key_file"`
				}{r.Old, r.New, r.Index, r.KeyFile})
			}
			fmt.Fprintf(w, "DENIAL key of %s rotated at index %d (the admin's PRINCIPAL log_key statement)\n", dir, r.Index)
			fmt.Fprintf(w, "signing DENIALs now  %s (%s)\n", r.New, r.KeyFile)
			fmt.Fprintf(w, "retired for good     %s\n", r.Old)
			fmt.Fprintln(w, "\nverifiers need nothing new: the rotation is in the trust chain every bundle carries.")
			return nil
		},
	}
}
