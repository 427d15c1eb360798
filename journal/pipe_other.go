//go:build !linux

package journal

import "os"

func growPipe(*os.File) int { return 0 }
