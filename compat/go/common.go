package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
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

// byPartition turns a JSON object keyed by partition number into a map keyed by partition.
func byPartition(m map[string]int64) (map[int32]int64, error) {
	out := make(map[int32]int64, len(m))
	for k, v := range m {
		p, err := strconv.ParseInt(k, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("partition %q: %w", k, err)
		}
		out[int32(p)] = v
	}
	return out, nil
}

// groupView is what the Python side reads as a compat.base.GroupView: the state, the assignor
// and each member's assignment as topic -> partitions.
type groupView struct {
	State    string               `json:"state"`
	Assignor string               `json:"assignor"`
	Members  []map[string][]int32 `json:"members"`
}
