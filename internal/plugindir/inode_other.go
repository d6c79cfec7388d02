//go:build !unix

package plugindir

import "io/fs"

// inodeOf has no inode to offer here; size and time still catch changes.
func inodeOf(fs.FileInfo) uint64 { return 0 }
