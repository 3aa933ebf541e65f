/*
 * SPDX-FileCopyrightText: © 2017-2025 Istari Digital, Inc.
 * SPDX-License-Identifier: Apache-2.0
 */

package table

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// allocate gives a new, empty table file its size blocks (custody patch).
// On a filesystem without fallocate(2) the file stays empty and is sized
// sparse, as upstream does.
func allocate(fd *os.File, size int) error {
	if size <= 0 {
		return nil
	}
	err := unix.Fallocate(int(fd.Fd()), 0, 0, int64(size))
	if errors.Is(err, unix.EOPNOTSUPP) {
		return nil
	}
	return err
}
