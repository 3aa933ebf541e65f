package clikit

import (
	"context"
	"fmt"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/internal/verifycli"
)

// One flag name has one meaning in every command:
//
//	--log-key   the log's public checkpoint verifier key: the key string
//	            (<origin>+<hash>+<key>) or a file holding it or the key set
//	--key       a private key file that signs
//	--target    a target identifier (airline_portal/account_123)
//	--grant     the id of a CONFIRM or DELEGATE
//
// Private keys other than the signer's have names of their own
// (--admin-key, --log-private-key, --new-key, --tls-key). TestFlagMeanings
// holds every command to this.

// RenamedFlag is a flag spelling that changed meaning: the old spelling
// keeps working for one release as a hidden alias of the new one, with a
// warning on standard error.
type RenamedFlag struct {
	Command string // the command's full path, like "custody init"
	Old     string // the old spelling
	New     string // the flag it now is
}

// RenamedFlags are the spellings kept for one release.
var RenamedFlags = []RenamedFlag{
	{"custody init", "log-key", "log-private-key"},
	{"custody checkpoint", "key", "verifier-key"},
	{"custody revoke", "target", "grant"},
}

// AddRenamedFlags gives cmd (at path) the hidden old spellings of its
// renamed flags, and a Before that warns about a typed old spelling and
// moves its value to the new flag.
func AddRenamedFlags(cmd *cli.Command, path string) {
	var mine []RenamedFlag
	for _, r := range RenamedFlags {
		if r.Command == path {
			mine = append(mine, r)
		}
	}
	if len(mine) == 0 {
		return
	}
	for _, r := range mine {
		var newFlag cli.Flag
		for _, f := range cmd.Flags {
			for _, n := range f.Names() {
				if n == r.New {
					newFlag = f
				}
			}
		}
		usage := fmt.Sprintf("deprecated: use --%s", r.New)
		switch newFlag.(type) {
		case *cli.BoolFlag:
			cmd.Flags = append(cmd.Flags, &cli.BoolFlag{Name: r.Old, Hidden: true, Usage: usage})
		case *cli.StringFlag:
			cmd.Flags = append(cmd.Flags, &cli.StringFlag{Name: r.Old, Hidden: true, Usage: usage})
		default:
			panic(fmt.Sprintf("%s: renamed flag --%s is not a string or boolean flag", path, r.New))
		}
	}
	before := cmd.Before
	cmd.Before = func(ctx context.Context, c *cli.Command) (context.Context, error) {
		for _, r := range mine {
			if !c.IsSet(r.Old) {
				continue
			}
			if c.IsSet(r.New) {
				return ctx, Usage(c, "--%s and --%s are the same flag (--%s is its old spelling): give --%s", r.Old, r.New, r.Old, r.New)
			}
			fmt.Fprintf(c.Root().ErrWriter, "custody: warning: %s --%s is deprecated and goes in the next release: use --%s\n", strings.TrimPrefix(path, "custody "), r.Old, r.New)
			v := c.String(r.Old)
			if _, ok := lookupFlag(c, r.Old).(*cli.BoolFlag); ok {
				v = fmt.Sprint(c.Bool(r.Old))
			}
			if err := c.Set(r.New, v); err != nil {
				return ctx, Usage(c, "--%s: %v", r.Old, err)
			}
		}
		if before != nil {
			return before(ctx, c)
		}
		return ctx, nil
	}
}

// lookupFlag returns c's flag called name, or nil.
func lookupFlag(c *cli.Command, name string) cli.Flag {
	for _, f := range c.Flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

// OptionalLogKey reads --log-key or $CUSTODY_LOG_KEY, when given, as every
// command reads it: the verifier key string, or a file holding it or the
// log's key set. "" when neither is given.
func OptionalLogKey(c *cli.Command) (string, error) {
	arg, from := LogKeyArg(c)
	if strings.TrimSpace(arg) == "" {
		return "", nil
	}
	k, err := verifycli.ReadKeySet(arg)
	if err != nil {
		return "", fmt.Errorf("%s %w", from, err)
	}
	return k, nil
}

// VerifierKeyArg reads the log's checkpoint verifier key given as a
// flag: the key itself (<origin>+<hash>+<key>), or a file holding it or,
// after a checkpoint key rotation, the log's key set.
func VerifierKeyArg(c *cli.Command, flag string) (string, error) {
	arg, from := strings.TrimSpace(c.String(flag)), "--"+flag
	if flag == "log-key" {
		arg, from = LogKeyArg(c)
		arg = strings.TrimSpace(arg)
	}
	if arg == "" {
		return "", Usage(c, "--%s VKEY is required: the log's checkpoint verifier key, or a file holding it", flag)
	}
	k, err := verifycli.ReadKeySet(arg)
	if err != nil {
		return "", fmt.Errorf("%s %w", from, err)
	}
	return k, nil
}
