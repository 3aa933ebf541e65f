package ledger

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/internal/durable"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/storage"
)

// InitOptions describe a new log.
type InitOptions struct {
	// AdminName is the admin key's bound name (default "admin").
	AdminName string
	// LogKey and AdminKey are existing private keys to use; nil generates
	// one and stores it under <dir>/keys with mode 0600.
	LogKey, AdminKey ed25519.PrivateKey
	// LogKeyFile, when the log key is the operator's own file, is recorded
	// in the config instead of a copy under <dir>/keys.
	LogKeyFile string
	// Log parameters written into GENESIS (0: the defaults of DESIGN §2).
	MaxDepth, ClockSkewSeconds, MaxTTLSeconds int64
	// Options for the ledger Init returns open.
	Options Options
}

// Key file names under <dir>/keys.
const (
	LogKeyFile   = "keys/log.key"
	AdminKeyFile = "keys/admin.key"
)

// Init creates a log at loc (a data folder, or a postgres:// URL) with
// the given origin, writes GENESIS as leaf 0 and returns the ledger open.
// In a database, the config and the key files Init generates are kept in
// the database itself (see docs/DEPLOY.md).
func Init(loc, origin string, o InitOptions) (*Ledger, error) {
	if err := scope.CheckIdentifier(origin); err != nil {
		return nil, fmt.Errorf("origin %q: %v (an origin looks like example.com/custody)", origin, err)
	}
	if o.AdminName == "" {
		o.AdminName = "admin"
	}
	drv, err := storage.Lookup(loc)
	if err != nil {
		return nil, err
	}
	db := drv.Local // a data folder (the name is older than the drivers)
	if db {
		if _, err := os.Stat(filepath.Join(loc, configName)); err == nil {
			return nil, fmt.Errorf("%s already holds a ledger", loc)
		}
		if drv.Exists != nil && drv.Exists(loc) {
			return nil, fmt.Errorf("%s holds a database but no %s: refusing to overwrite it", loc, configName)
		}
		if _, err := os.Stat(filepath.Join(loc, SignedHeadName)); err == nil {
			return nil, fmt.Errorf("%s holds a signed head (%s) but no %s: it held a log; refusing to start another there", loc, SignedHeadName, configName)
		}
		if err := os.MkdirAll(filepath.Join(loc, "keys"), 0o700); err != nil {
			return nil, err
		}
	}
	o.Options.defaults()
	// A database makes the log the URL names if it does not hold it yet
	// (a named log, custody_log in the URL); its origin must be no other
	// log's.
	st, err := openStore(loc, o.Options, true, origin)
	if err != nil {
		return nil, err
	}
	var created []string
	cleanup := func() {
		st.Close()
		if db {
			for _, p := range created {
				os.RemoveAll(p)
			}
		}
	}
	if !db {
		if _, err := st.ReadFile(configName); err == nil {
			st.Close()
			return nil, fmt.Errorf("%s already holds a ledger", st.Location())
		}
		if h, err := st.Head(context.Background()); err != nil || h != nil {
			st.Close()
			if err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("%s holds a log (size %d) but no config: refusing to overwrite it", st.Location(), h.Size)
		}
	}
	writeKey := func(what, name string, k ed25519.PrivateKey) error {
		if _, err := st.ReadFile(name); err == nil {
			return fmt.Errorf("writing the %s: %s exists already in %s", what, name, st.Location())
		}
		pem, err := sign.MarshalPrivateKeyPEM(k, nil)
		if err != nil {
			return err
		}
		defer clear(pem)
		if err := st.WriteFile(name, pem); err != nil {
			return fmt.Errorf("writing the %s: %w", what, err)
		}
		if db {
			created = append(created, filepath.Join(loc, filepath.FromSlash(name)))
		}
		return nil
	}
	cfg := config{Origin: origin, LogKey: LogKeyFile}
	if o.LogKey == nil {
		_, priv, err := sign.GenerateKey()
		if err != nil {
			cleanup()
			return nil, err
		}
		o.LogKey = priv
	}
	if o.LogKeyFile != "" && db {
		cfg.LogKey = o.LogKeyFile
	} else if err := writeKey("log key", LogKeyFile, o.LogKey); err != nil {
		// In a database, the log key is kept in the database even when the
		// operator supplied it: every server of the log signs with it.
		cleanup()
		return nil, err
	}
	if o.AdminKey == nil {
		_, priv, err := sign.GenerateKey()
		if err != nil {
			cleanup()
			return nil, err
		}
		o.AdminKey = priv
		if err := writeKey("admin key", AdminKeyFile, priv); err != nil {
			cleanup()
			return nil, err
		}
	}
	if db {
		created = append(created, filepath.Join(loc, "db"), filepath.Join(loc, SignedHeadName))
	}
	l, err := open(st, origin, oneKey(o.LogKey), o.Options)
	if err != nil {
		cleanup()
		return nil, err
	}
	if err := l.genesis(o); err != nil {
		l.Close()
		cleanup()
		return nil, err
	}
	raw, _ := json.MarshalIndent(cfg, "", "  ")
	if err := st.WriteFile(configName, append(raw, '\n')); err != nil {
		l.Close()
		cleanup()
		return nil, err
	}
	return l, nil
}

func (l *Ledger) genesis(o InitOptions) error {
	vkey, err := merkle.VerifierKey(l.origin, o.LogKey.Public().(ed25519.PublicKey))
	if err != nil {
		return err
	}
	g := &statement.GenesisDoc{
		Header: statement.Header{Type: statement.Genesis, Timestamp: statement.FormatTimestamp(l.opts.Clock()),
			Log: l.origin, Actor: o.AdminName, Seq: 1},
		GenesisID: "genesis", AdminKey: sign.EncodePublicKey(o.AdminKey.Public().(ed25519.PublicKey)), LogKey: vkey,
		MaxDepth: o.MaxDepth, ClockSkewSeconds: o.ClockSkewSeconds, MaxTTLSeconds: o.MaxTTLSeconds,
	}
	if g.MaxDepth == 0 {
		g.MaxDepth = statement.DefaultMaxDepth
	}
	if g.ClockSkewSeconds == 0 {
		g.ClockSkewSeconds = statement.DefaultClockSkewSeconds
	}
	if g.MaxTTLSeconds == 0 {
		g.MaxTTLSeconds = statement.DefaultMaxTTLSeconds
	}
	payload, err := statement.Marshal(g)
	if err != nil {
		return fmt.Errorf("GENESIS: %w", err)
	}
	env, err := sign.Sign(o.AdminKey, statement.Genesis.Lower(), payload)
	if err != nil {
		return err
	}
	raw, err := env.Canonical()
	if err != nil {
		return err
	}
	res, err := l.Append(context.Background(), raw)
	if err != nil {
		return fmt.Errorf("writing GENESIS: %w", err)
	}
	if res.Verdict != authority.Accepted || res.Index != 0 {
		return fmt.Errorf("GENESIS was not accepted as leaf 0: %s %s: %s", res.Verdict, res.Code, res.Reason)
	}
	return nil
}

// writeFileSync writes a new file and fsyncs it and its directory, so the
// file exists after a crash once this returns.
func writeFileSync(path string, data []byte, mode os.FileMode) error {
	return durable.Create(path, data, mode)
}
