// Package keycmd is the key command and its subcommands: generate, public,
// rotate-log (the checkpoint key) and rotate-denial (the DENIAL key).
package keycmd

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/internal/clikit"
	"github.com/custodylog/custody/internal/keyfile"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/sign"
)

// KeyCommand is `custody key`.
func KeyCommand() *cli.Command {
	return &cli.Command{
		Name:  "key",
		Usage: "make Ed25519 key files and show their public keys",
		Description: `Keys are Ed25519. Private keys are PKCS#8 PEM files (what openssl genpkey
-algorithm ed25519 writes), optionally passphrase-encrypted; a key id is the
hex SHA-256 of the public key.

Example:

   custody key generate --out alice.key --name user:alice
   custody key public alice.key`,
		Commands: []*cli.Command{keyGenerateCommand(), keyPublicCommand(), keyRotateLogCommand(), keyRotateDenialCommand()},
	}
}

func keyGenerateCommand() *cli.Command {
	return &cli.Command{
		Name:      "generate",
		Usage:     "write a new private key file and print its public key",
		UsageText: "custody key generate --out FILE [--name NAME] [--force] [--encrypt] [--json]",
		Description: `Generates an Ed25519 key and writes it to FILE as PKCS#8 PEM with mode 0600,
refusing to replace an existing file unless --force is given. With --encrypt
the file is passphrase-protected (scrypt + AES-256-CBC): the passphrase comes
from $CUSTODY_PASSPHRASE, or is asked for twice on the terminal. Prints the
public key (the base64 form statements use) and the key id; --name only
reminds you which name to bind the key to. The private key is never printed.

Example:

   custody key generate --out alice.key --name user:alice --encrypt`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Usage: "the private key file to write", Required: true, TakesFile: true},
			&cli.StringFlag{Name: "name", Usage: "the name you will bind the key to (printed as a reminder)"},
			&cli.BoolFlag{Name: "force", Usage: "replace an existing file"},
			&cli.BoolFlag{Name: "encrypt", Usage: "protect the file with a passphrase"},
			clikit.JSONFlag(),
		},
		Action: func(ctx context.Context, c *cli.Command) error {
			if _, err := clikit.Args(c, 0, 0, ""); err != nil {
				return err
			}
			out := c.String("out")
			if name := c.String("name"); c.IsSet("name") {
				// Checked here, where the name is first typed, not only
				// when principal enroll or a grant would refuse it.
				if err := scope.CheckIdentifier(name); err != nil {
					return clikit.Usage(c, "--name: %v: a principal or agent name is what principal enroll and --grantee take; nothing was written", err)
				}
			}
			if !c.Bool("force") {
				// Fail before asking for a passphrase.
				if _, err := os.Lstat(out); err == nil {
					return fmt.Errorf("key generate: %s already exists (refusing to overwrite; --force replaces it)", out)
				}
			}
			var pass []byte
			if c.Bool("encrypt") {
				var err error
				if pass, err = sign.NewPassphrase("passphrase for " + out + ": ")(); err != nil {
					return fmt.Errorf("key generate: %w", err)
				}
				defer clear(pass)
			}
			priv, err := keyfile.Generate(out, pass, c.Bool("force"))
			if err != nil {
				if errors.Is(err, fs.ErrExist) {
					return fmt.Errorf("key generate: %s already exists (refusing to overwrite; --force replaces it)", out)
				}
				return fmt.Errorf("key generate: %w", err)
			}
			pub := priv.Public().(ed25519.PublicKey)
			clear(priv)
			info := KeyInfo{File: out, PublicKey: sign.EncodePublicKey(pub), KeyID: sign.KeyID(pub), Name: c.String("name"), Encrypted: len(pass) > 0}
			if c.Bool("json") {
				return clikit.WriteJSON(c.Root().Writer, info)
			}
			w := c.Root().Writer
			enc := ""
			if info.Encrypted {
				enc = ", encrypted"
			}
			fmt.Fprintf(w, "wrote %s (mode 0600%s)\n", out, enc)
			fmt.Fprintf(w, "public key  %s\n", info.PublicKey)
			fmt.Fprintf(w, "key id      %s\n", info.KeyID)
			if info.Name != "" {
				fmt.Fprintf(w, "name        %s\n", clikit.SafeText(info.Name))
				if strings.HasPrefix(info.Name, "agent:") {
					fmt.Fprintf(w, "an agent's key is bound by the first grant naming it:\n   custody confirm ... --grantee %s --grantee-key %s\n", clikit.SafeText(info.Name), info.PublicKey)
				} else {
					fmt.Fprintf(w, "bind it with:\n   custody principal enroll --admin-key ADMIN.key --name %s --public-key %s\n", clikit.SafeText(info.Name), info.PublicKey)
				}
			}
			return nil
		},
	}
}

// KeyInfo is what key commands print with --json.
type KeyInfo struct {
	File      string `json:"file,omitempty"`
	PublicKey string `json:"public_key"`
	KeyID     string `json:"key_id"`
	Name      string `json:"name,omitempty"`
	Encrypted bool   `json:"encrypted,omitempty"`
	Private   bool   `json:"private_key_file,omitempty"`
}

func keyPublicCommand() *cli.Command {
	return &cli.Command{
		Name:      "public",
		Usage:     "print the public key and key id of a key file",
		UsageText: "custody key public [--pem] [--json] FILE|BASE64",
		Description: `Prints the base64 public key and the key id of FILE, which may be a private
key (PKCS#8 PEM, plain or encrypted), a public key (PKIX PEM), or the base64
public key itself. With --pem it prints the public key as PKIX PEM instead,
for tools that want a file.

Example:

   custody key public alice.key
   custody key public --pem alice.key > alice.pub`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "pem", Usage: "print the public key as PKIX PEM"},
			clikit.JSONFlag(),
		},
		Action: func(ctx context.Context, c *cli.Command) error {
			a, err := clikit.Args(c, 1, 1, "the key FILE")
			if err != nil {
				return err
			}
			pub, private, err := keyfile.Public(a[0])
			if err != nil {
				return fmt.Errorf("key public: %w", err)
			}
			w := c.Root().Writer
			if c.Bool("pem") {
				b, err := sign.MarshalPublicKeyPEM(pub)
				if err != nil {
					return err
				}
				_, err = w.Write(b)
				return err
			}
			info := KeyInfo{File: a[0], PublicKey: sign.EncodePublicKey(pub), KeyID: sign.KeyID(pub), Private: private}
			if c.Bool("json") {
				return clikit.WriteJSON(w, info)
			}
			fmt.Fprintf(w, "public key  %s\nkey id      %s\n", info.PublicKey, info.KeyID)
			return nil
		},
	}
}
