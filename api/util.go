package api

import (
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
