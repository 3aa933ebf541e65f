package main

import "github.com/custodylog/custody/internal/verifycli"

// custody verify is the same command as the custody-verify binary's, so an
// auditor's verdicts never depend on which binary they ran.
func init() { register(verifycli.Command) }
