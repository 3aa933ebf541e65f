//go:build !linux

/*
 * SPDX-FileCopyrightText: © 2017-2025 Istari Digital, Inc.
 * SPDX-License-Identifier: Apache-2.0
 */

package badger

import "os"

// fdatasync makes what was written to f durable (custody patch): fsync
// off Linux.
func fdatasync(f *os.File) error { return f.Sync() }
