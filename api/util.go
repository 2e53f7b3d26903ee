package api

import (
	"strconv"
)

func itoa(i int) string { return strconv.Itoa(i) }

func contains[E comparable](list []E, v E) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
