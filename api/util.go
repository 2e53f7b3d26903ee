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
