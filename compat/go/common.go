package main

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// moduleVersions names the Go toolchain and the modules whose path starts with one of prefixes.
func moduleVersions(prefixes ...string) map[string]string {
	out := map[string]string{"go": strings.TrimPrefix(runtime.Version(), "go")}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			for _, p := range prefixes {
				if m.Path == p {
					out[m.Path] = m.Version
				}
			}
		}
	}
	return out
}

// wanted tells whether partition p is among ps (all when ps is empty).
func wanted(ps []int32, p int32) bool {
	if len(ps) == 0 {
		return true
	}
	for _, x := range ps {
		if x == p {
			return true
		}
	}
	return false
}
