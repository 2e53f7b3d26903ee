package api

import (
	"sort"
	"strconv"
)

func itoa(i int) string { return strconv.Itoa(i) }

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func supported() []string {
	var out []string
	for _, ch := range knownChannels {
		if supportedChannels[ch] {
			out = append(out, ch)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
